package previous

import (
	"bytes"

	"github.com/synapse-embed/synapse/io/output"
)

// Status is what the previous output holds for an input document.
type Status int

const (
	New       Status = iota // no previous document has its id
	Changed                 // a previous document has its id, another doc_hash
	Unchanged               // a previous document has its id and doc_hash: its rows can be copied
)

// Match is a previous document found for an input document.
type Match struct {
	Status     Status
	Start, End int64 // its rows (Changed, Unchanged)
}

// Find looks up the input document id whose text hashes to hash, and
// marks the previous document found as seen: a previous document is found
// once (an id that occurs twice finds its two documents in turn). Call it
// in input order.
func (s *Set) Find(id string, hash [output.DocHashSize]byte) (Match, error) {
	if s.cursor < s.Rows() && !s.isFound(s.cursor) {
		pid, ph, end, err := s.doc(s.cursor)
		if err != nil {
			return Match{}, err
		}
		if pid == id {
			m := Match{Status: Changed, Start: s.cursor, End: end}
			if ph == hash {
				m.Status = Unchanged
			}
			s.setFound(s.cursor)
			s.cursor = end
			s.Stats.Cursor++
			return m, nil
		}
	}
	if s.index == nil {
		if err := s.buildIndex(); err != nil {
			return Match{}, err
		}
	}
	entries, err := s.index.lookup(id)
	if err != nil {
		return Match{}, err
	}
	var pick *entry
	for _, e := range entries {
		if s.isFound(e.row()) {
			continue
		}
		if bytes.Equal(e.hash(), hash[:]) {
			pick = &e
			break
		}
		if pick == nil {
			pick = &e
		}
	}
	if pick == nil {
		return Match{Status: New}, nil
	}
	start := pick.row()
	pid, ph, end, err := s.doc(start) // the id itself, not only its 128-bit hash
	if err != nil || pid != id {
		return Match{Status: New}, err
	}
	m := Match{Status: Changed, Start: start, End: end}
	if ph == hash {
		m.Status = Unchanged
	}
	s.setFound(start)
	s.cursor = end
	s.Stats.Indexed++
	return m, nil
}

func (s *Set) isFound(row int64) bool { return s.found[row/64]&(1<<(row%64)) != 0 }
func (s *Set) setFound(row int64)     { s.found[row/64] |= 1 << (row % 64) }

// Deleted calls fn with the id of every previous document Find did not
// find, in the previous order, and returns how many there were.
func (s *Set) Deleted(fn func(id string) error) (int64, error) {
	var n int64
	for row := int64(0); row < s.Rows(); {
		id, _, end, err := s.doc(row)
		if err != nil {
			return n, err
		}
		if !s.isFound(row) {
			n++
			if err := fn(id); err != nil {
				return n, err
			}
		}
		row = end
	}
	return n, nil
}
