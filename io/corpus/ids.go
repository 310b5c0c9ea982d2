package corpus

import (
	"fmt"
	"hash/maphash"
	"strconv"
)

// The id rule of embed and generate inputs (docs/jobs.md, "Ids"):
//
//   - a row's id is the ReadOptions.IDField, or else the first of "id" and
//     "_id" that the row has (JSONL: the key is present; Parquet: the column
//     exists): a string, or a number (its JSON text; an integer column's
//     decimal);
//   - a null id, an empty string and an id of the form #N (N decimal
//     digits) are bad_id rows: #N is reserved for the next case;
//   - a row with none of these fields is named #INDEX, its record index in
//     the run ("#0", "#17"), which no real id can equal; a range shard does
//     not know the single run's index, so there such a row is a
//     missing_field error;
//   - with ReadOptions.UniqueIDs, the first document with an id keeps it
//     and every later document with the same id is a duplicate_id row
//     naming the first one's index. Rows that are errors for another
//     reason claim no id.

// FallbackIDPrefix starts the id a row without an id field is given.
const FallbackIDPrefix = "#"

// fallbackIDOf is the id of the record with index idx that has no id field.
func fallbackIDOf(idx int64) string { return FallbackIDPrefix + strconv.FormatInt(idx, 10) }

// reservedID reports whether id has the form #N that fallback ids have.
func reservedID(id string) bool {
	if len(id) < 2 || id[:1] != FallbackIDPrefix {
		return false
	}
	for _, c := range id[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// checkID refuses an empty id and one a row without an id could be given.
func checkID(d Doc, field, id string) (string, error) {
	switch {
	case id == "":
		return "", d.Error(ReasonBadID, fmt.Sprintf("ID field %q is empty", field))
	case reservedID(id):
		return "", d.Error(ReasonBadID, fmt.Sprintf("ID %q in field %q: ids of the form #N are reserved for rows without an id", id, field))
	}
	return id, nil
}

// IDSetBytes bounds what an IDSet holds per distinct id: a 16-byte key and
// an 8-byte index in a Go map, 35 to 56 bytes by how full the map is
// (BenchmarkIDSet: go test ./io/corpus -run '^$' -bench IDSet -benchtime 1x).
const IDSetBytes = 64

// IDSet finds repeated ids. It keeps two independent 64-bit hashes of each
// id (never the id itself) with the index of its first record: about
// IDSetBytes per distinct id. Two different ids are taken for one with a
// probability of about n²/2¹²⁹ for n ids (below 10⁻²⁰ for a billion).
// Memory: at most IDSetBytes per id (64 MB for a million ids).
type IDSet struct {
	s1, s2 maphash.Seed
	m      map[[2]uint64]int64
}

// NewIDSet returns an empty IDSet.
func NewIDSet() *IDSet {
	return &IDSet{s1: maphash.MakeSeed(), s2: maphash.MakeSeed(), m: map[[2]uint64]int64{}}
}

// Add records id for the record with index idx; if id was added before, it
// returns the index it was first added with and true.
func (s *IDSet) Add(id string, idx int64) (int64, bool) {
	k := [2]uint64{maphash.String(s.s1, id), maphash.String(s.s2, id)}
	if first, ok := s.m[k]; ok {
		return first, true
	}
	s.m[k] = idx
	return 0, false
}

// Len is the number of distinct ids added.
func (s *IDSet) Len() int { return len(s.m) }

// duplicateError is the error row of d, whose id the record first was
// already used by.
func duplicateError(d Doc, first int64) *RowError {
	return d.Error(ReasonDuplicateID, fmt.Sprintf("ID %q was first used by the record at index %d", d.ID, first))
}

// IDStats counts what the id rule did in a run (every record read, those
// before a resumed run's start included).
type IDStats struct {
	Fallback   int64 // documents without an id field, named #INDEX
	Duplicates int64 // documents whose id an earlier document had (duplicate_id rows)
}
