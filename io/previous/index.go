package previous

import (
	"bufio"
	"bytes"
	"container/heap"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"

	"github.com/synapse-embed/synapse/io/output"
)

// EntrySize is the size of an index entry: a 128-bit hash of the id, the
// doc_hash, the document's first row and its row count.
const EntrySize = 16 + output.DocHashSize + 8 + 8

type entry [EntrySize]byte

func (e *entry) key() []byte            { return e[:16] }
func (e *entry) hash() []byte           { return e[16:48] }
func (e *entry) row() int64             { return int64(binary.LittleEndian.Uint64(e[48:56])) }
func (e *entry) rows() int64            { return int64(binary.LittleEndian.Uint64(e[56:64])) }
func compareEntries(a, b entry) int     { return bytes.Compare(a[:], b[:]) } // key first; then hash, row
func idKey(id string) [sha256.Size]byte { return sha256.Sum256([]byte(id)) }
func newEntry(id string, h []byte, row, n int64) entry {
	var e entry
	k := idKey(id)
	copy(e[:16], k[:16])
	copy(e[16:48], h)
	binary.LittleEndian.PutUint64(e[48:56], uint64(row))
	binary.LittleEndian.PutUint64(e[56:64], uint64(n))
	return e
}

// IndexBlock is how many index entries one read of the index file covers:
// the module keeps the first key of each block in memory (16 bytes per
// IndexBlock previous documents) and reads one block (IndexBlock ×
// EntrySize bytes) per lookup, two when an id's entries straddle blocks.
const IndexBlock = 256

// index is the sorted entries of every previous document in a file, and
// the first key of each block of it.
type index struct {
	path  string
	f     *os.File
	n     int
	first [][16]byte
	buf   []byte
}

// lookup returns the entries of the id.
func (x *index) lookup(id string) ([]entry, error) {
	k := idKey(id)
	b := sort.Search(len(x.first), func(i int) bool { return bytes.Compare(x.first[i][:], k[:16]) >= 0 })
	b = max(b-1, 0) // the block before may end with the key
	var out []entry
	for ; b < len(x.first); b++ {
		lo := b * IndexBlock
		hi := min(lo+IndexBlock, x.n)
		buf := x.buf[:(hi-lo)*EntrySize]
		if _, err := x.f.ReadAt(buf, int64(lo)*EntrySize); err != nil {
			return nil, fmt.Errorf("previous: index: %w", err)
		}
		for i := range hi - lo {
			var e entry
			copy(e[:], buf[i*EntrySize:])
			switch c := bytes.Compare(e.key(), k[:16]); {
			case c == 0:
				out = append(out, e)
			case c > 0:
				return out, nil
			}
		}
	}
	return out, nil
}

func (x *index) close() {
	if x.f != nil {
		x.f.Close()
	}
	os.Remove(x.path)
}

// buildIndex scans the previous documents and sorts their entries on disk.
func (s *Set) buildIndex() error {
	var runs []string
	defer func() {
		for _, r := range runs {
			os.Remove(r)
		}
	}()
	buf := make([]entry, 0, s.sortRun)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		slices.SortFunc(buf, compareEntries)
		path, err := writeRun(s.tmpDir, buf)
		runs = append(runs, path)
		buf = buf[:0]
		return err
	}
	for row := int64(0); row < s.Rows(); {
		id, h, end, err := s.doc(row)
		if err != nil {
			return err
		}
		buf = append(buf, newEntry(id, h[:], row, end-row))
		if len(buf) == s.sortRun {
			if err := flush(); err != nil {
				return err
			}
		}
		row = end
	}
	if err := flush(); err != nil {
		return err
	}
	out, n, first, err := mergeRuns(s.tmpDir, runs)
	if err != nil {
		return err
	}
	x := &index{path: out, n: n, first: first, buf: make([]byte, IndexBlock*EntrySize)}
	if x.f, err = os.Open(out); err != nil {
		os.Remove(out)
		return fmt.Errorf("previous: index: %w", err)
	}
	s.index = x
	s.Stats.IndexBuilt = true
	return nil
}

func writeRun(dir string, entries []entry) (string, error) {
	f, err := os.CreateTemp(dir, "synapse-previous-run-*")
	if err != nil {
		return "", fmt.Errorf("previous: index: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	for i := range entries {
		bw.Write(entries[i][:])
	}
	if err := errors.Join(bw.Flush(), f.Close()); err != nil {
		return f.Name(), fmt.Errorf("previous: index: %w", err)
	}
	return f.Name(), nil
}

// mergeRuns merges sorted runs into one file, and returns the first key
// of each IndexBlock of it.
func mergeRuns(dir string, runs []string) (string, int, [][16]byte, error) {
	f, err := os.CreateTemp(dir, "synapse-previous-index-*")
	if err != nil {
		return "", 0, nil, fmt.Errorf("previous: index: %w", err)
	}
	var first [][16]byte
	h := &runHeap{}
	var all []*runCursor
	for _, r := range runs {
		rf, err := os.Open(r)
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			return "", 0, nil, fmt.Errorf("previous: index: %w", err)
		}
		defer rf.Close()
		c := &runCursor{r: bufio.NewReaderSize(rf, 1<<16)}
		all = append(all, c)
		if c.next() {
			heap.Push(h, c)
		}
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	n := 0
	for h.Len() > 0 {
		c := (*h)[0]
		if n%IndexBlock == 0 {
			first = append(first, [16]byte(c.cur[:16]))
		}
		bw.Write(c.cur[:])
		n++
		if c.next() {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	var readErr error
	for _, c := range all {
		readErr = errors.Join(readErr, c.err)
	}
	if err := errors.Join(readErr, bw.Flush(), f.Close()); err != nil {
		os.Remove(f.Name())
		return "", 0, nil, fmt.Errorf("previous: index: %w", err)
	}
	return f.Name(), n, first, nil
}

type runCursor struct {
	r   *bufio.Reader
	cur entry
	err error
}

func (c *runCursor) next() bool {
	_, err := io.ReadFull(c.r, c.cur[:])
	if err != nil && err != io.EOF {
		c.err = err
	}
	return err == nil
}

type runHeap []*runCursor

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return compareEntries(h[i].cur, h[j].cur) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runCursor)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
