package previous

import (
	"container/list"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// cache holds the last decoded batches, least recently used first out.
type cache struct {
	s    *Set
	max  int
	lru  *list.List // of *cached, most recent at the front
	held map[int]*list.Element
	last int // the batch read last
}

type cached struct {
	g   int
	rec arrow.RecordBatch
}

func newCache(s *Set, n int) *cache {
	return &cache{s: s, max: n, lru: list.New(), held: map[int]*list.Element{}, last: -1}
}

// get returns global batch g, valid until the cache is next used.
func (c *cache) get(g int) (arrow.RecordBatch, error) {
	if e, ok := c.held[g]; ok {
		c.lru.MoveToFront(e)
		c.switchTo(g)
		return e.Value.(*cached).rec, nil
	}
	ref := c.s.batches[g]
	f := c.s.files[ref.file]
	rec, err := f.batch(ref.batch)
	if err == nil && f.pq != nil {
		err = f.check(rec) // an IPC batch was checked when the file was opened
		if err != nil {
			rec.Release()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: batch %d: %w", ErrInvalid, f.path, ref.batch, err)
	}
	c.switchTo(g)
	if c.lru.Len() == c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		x := old.Value.(*cached)
		x.rec.Release()
		delete(c.held, x.g)
	}
	c.held[g] = c.lru.PushFront(&cached{g, rec})
	return rec, nil
}

// switchTo counts a read of batch g after another one: its pages (the
// kernel maps 64 KiB around each page read) count as read in full, which
// bounds what random lookups leave mapped.
func (c *cache) switchTo(g int) {
	if g == c.last {
		return
	}
	c.last = g
	if c.s.files[c.s.batches[g].file].mm != nil {
		c.s.touch((c.s.starts[g+1] - c.s.starts[g]) * int64(4*c.s.dims+64))
	}
}

func (c *cache) clear() {
	for _, e := range c.held {
		e.Value.(*cached).rec.Release()
	}
	c.lru.Init()
	c.held = map[int]*list.Element{}
}
