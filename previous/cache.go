package previous

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// cache holds the last decoded batches, least recently used first out.
type cache struct {
	s     *Set
	max   int
	order []int // global batch numbers, most recent last
	held  map[int]arrow.RecordBatch
}

func newCache(s *Set, n int) *cache {
	return &cache{s: s, max: n, held: map[int]arrow.RecordBatch{}}
}

// get returns global batch g, valid until the cache is next used.
func (c *cache) get(g int) (arrow.RecordBatch, error) {
	if rec, ok := c.held[g]; ok {
		for i, x := range c.order {
			if x == g {
				c.order = append(append(c.order[:i:i], c.order[i+1:]...), g)
				break
			}
		}
		return rec, nil
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
	if f.mm != nil { // decoding a mapped batch reads all of it
		c.s.touch((c.s.starts[g+1] - c.s.starts[g]) * int64(4*c.s.dims+64))
	}
	if len(c.order) == c.max {
		old := c.order[0]
		c.order = c.order[1:]
		c.held[old].Release()
		delete(c.held, old)
	}
	c.held[g] = rec
	c.order = append(c.order, g)
	return rec, nil
}

func (c *cache) clear() {
	for _, rec := range c.held {
		rec.Release()
	}
	c.held, c.order = map[int]arrow.RecordBatch{}, nil
}
