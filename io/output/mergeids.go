package output

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/record"
)

// ErrIDInTwoShards: an id is in two shards' parts. A single run keeps the
// first document with an id and makes every later one a duplicate_id row;
// merge does not rewrite the later part's rows into that error row (its
// chunks, tokens and counts are the shard's), so it refuses.
var ErrIDInTwoShards = errors.New("an id is in two shards' parts")

// The id rule across the parts of a sharded run (docs/resume-and-shards.md, "Shards and merge"):
//
//   - each part claims the ids of its output rows — embed and generate the
//     id column, rerank the query_id column — and the ids of its error
//     rows that were read before they failed (a reason the readers never
//     give: engine_error, engine_timeout, prompt_too_long, query_too_long,
//     invalid_output, special_text, not_storable);
//   - an id claimed by two parts is refused (ErrIDInTwoShards, exit 2)
//     before the merged output is published;
//   - an id repeated within one part is that shard's business: its reader
//     made every later document with it a duplicate_id row, and the rows an
//     embed document has (one per chunk) or a query has (one per document)
//     share its id.
//
// The ids are kept in one IDSet over all parts: at most IDSetBytes per
// distinct id, besides the one record batch a merge streams.

// unclaimedReasons are the reasons of records that fail as they are read,
// before the reader's id check: such a record claims no id.
var unclaimedReasons = map[string]bool{
	record.ReasonMalformedJSON: true, record.ReasonLineTooLong: true, record.ReasonTextTooLong: true, record.ReasonMissingField: true,
	record.ReasonNullText: true, record.ReasonNotText: true, record.ReasonInvalidUTF8: true, record.ReasonEmptyText: true,
	record.ReasonBadID: true, record.ReasonDuplicateID: true, record.ReasonCorruptRows: true, record.ReasonMalformedLine: true,
	record.ReasonMissingDocument: true, record.ReasonMissingQuery: true, record.ReasonBadScore: true, record.ReasonFileError: true,
}

// partIDs finds an id claimed by two parts.
type partIDs struct {
	set   *corpus.IDSet
	paths []string // the parts' manifests, by shard
}

func newPartIDs(paths []string) *partIDs { return &partIDs{set: corpus.NewIDSet(), paths: paths} }

// claim records that part k holds id.
func (p *partIDs) claim(id string, k int) error {
	first, seen := p.set.Add(id, int64(k))
	if !seen || first == int64(k) {
		return nil
	}
	return fmt.Errorf("%w: id %q is in shard %d (%s) and in shard %d (%s): a single run writes its first document and makes the later one a duplicate_id row; give the id to one document, or run unsharded",
		ErrIDInTwoShards, id, first, p.paths[first], k, p.paths[k])
}

// claimErrors claims the ids of part k's error rows that were read before
// they failed.
func (p *partIDs) claimErrors(ctx context.Context, errPath string, k int) error {
	f, _, err := files.OpenRandom(ctx, errPath)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(bufio.NewReaderSize(f, 1<<20))
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		var re struct {
			ID     string `json:"id"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(sc.Bytes(), &re); err != nil {
			return fmt.Errorf("%s: record %d: %w", errPath, n, err)
		}
		if re.ID == "" || unclaimedReasons[re.Reason] {
			continue
		}
		if err := p.claim(re.ID, k); err != nil {
			return err
		}
	}
	return sc.Err()
}

// idColumn is the column of a part's schema that holds the ids a single
// run keeps unique: rerank's query_id, else id.
func idColumn(sc *arrow.Schema) (int, error) {
	for _, name := range []string{ColQueryID, ColID} {
		if ix := sc.FieldIndices(name); len(ix) > 0 {
			return ix[0], nil
		}
	}
	return 0, fmt.Errorf("%w: the part has neither a %s nor an %s column", ErrForeignShard, ColQueryID, ColID)
}

// claimRows claims the ids of a record batch of part k; last is the id of
// the part's row before it (consecutive rows of one document skip the set).
func (p *partIDs) claimRows(rec arrow.RecordBatch, k int, last *string) error {
	c, err := idColumn(rec.Schema())
	if err != nil {
		return err
	}
	var value func(i int) string
	switch a := rec.Column(c).(type) {
	case *array.String:
		value = a.Value
	case *array.LargeString:
		value = a.Value
	default:
		return fmt.Errorf("%w: column %s is %s, not a string", ErrForeignShard, rec.Schema().Field(c).Name, a.DataType())
	}
	for i := range int(rec.NumRows()) {
		id := value(i)
		if id == *last {
			continue
		}
		*last = id
		if err := p.claim(id, k); err != nil {
			return err
		}
	}
	return nil
}
