package output

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// idBatch is a record batch of one string column name holding ids.
func idBatch(t testing.TB, name string, ids ...string) arrow.RecordBatch {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: name, Type: arrow.BinaryTypes.String}, {Name: "x", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i, id := range ids {
		b.Field(0).(*array.StringBuilder).Append(id)
		b.Field(1).(*array.Int32Builder).Append(int32(i))
	}
	rec := b.NewRecordBatch()
	t.Cleanup(rec.Release)
	return rec
}

// TestPartIDs: an id is refused when two parts claim it — by output rows
// (embed's id, rerank's query_id) or by an error row read before it failed
// (engine_error) — and not for rows of one part (chunks of a document, a
// query's documents, a partial document in the errors file too), nor for
// error rows that claim no id (duplicate_id, bad_id, text_too_long).
func TestPartIDs(t *testing.T) {
	dir := t.TempDir()
	errFile := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	paths := []string{"out.shard-0-of-2.json", "out.shard-1-of-2.json"}
	unclaimed := errFile("u.jsonl",
		`{"source":"a.jsonl","line":3,"index":2,"id":"x","reason":"duplicate_id","detail":"ID \"x\" was first used by the record at index 0"}`,
		`{"source":"a.jsonl","line":4,"index":3,"id":"y","reason":"text_too_long"}`,
		`{"source":"a.jsonl","line":5,"index":4,"reason":"bad_id"}`)
	engine := func(id string) string {
		return errFile("e-"+id+".jsonl", `{"source":"a.jsonl","line":9,"index":8,"id":"`+id+`","chunk":1,"reason":"engine_error","detail":"boom"}`)
	}
	type step struct {
		part   int
		col    string   // a batch of this column, or
		ids    []string // its ids
		errors string   // an errors file
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  string // the id refused; "" none
	}{
		{"chunks of one document", []step{{0, ColID, []string{"a", "a", "a", "b"}, ""}, {1, ColID, []string{"c", "c"}, ""}}, ""},
		{"embed id in two parts", []step{{0, ColID, []string{"a", "a", "b"}, ""}, {1, ColID, []string{"c", "b", "b"}, ""}}, "b"},
		{"a document's last row in the next batch", []step{{0, ColID, []string{"a", "b"}, ""}, {0, ColID, []string{"b", "c"}, ""}}, ""},
		{"rerank query in two parts", []step{{0, ColQueryID, []string{"q1", "q1"}, ""}, {1, ColQueryID, []string{"q2", "q1"}, ""}}, "q1"},
		{"unclaimed error rows", []step{{0, "", nil, unclaimed}, {1, ColID, []string{"x", "y"}, ""}}, ""},
		{"partial document in one part", []step{{0, "", nil, engine("p")}, {0, ColID, []string{"p"}, ""}}, ""},
		{"engine error in another part", []step{{0, "", nil, engine("p")}, {1, ColID, []string{"p"}, ""}}, "p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids := newPartIDs(paths)
			var err error
			last := map[int]*string{0: new(string), 1: new(string)}
			for _, s := range tc.steps {
				if s.errors != "" {
					err = ids.claimErrors(context.Background(), s.errors, s.part)
				} else {
					err = ids.claimRows(idBatch(t, s.col, s.ids...), s.part, last[s.part])
				}
				if err != nil {
					break
				}
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v; want no error", err)
			case tc.want != "" && !errors.Is(err, ErrIDInTwoShards):
				t.Errorf("got %v; want ErrIDInTwoShards for %q", err, tc.want)
			case tc.want != "" && (!strings.Contains(err.Error(), `"`+tc.want+`"`) || !strings.Contains(err.Error(), paths[0]) || !strings.Contains(err.Error(), paths[1])):
				t.Errorf("got %v; want it to name id %q and both manifests", err, tc.want)
			}
		})
	}
}

// BenchmarkMergeIDs is what merge's id check costs per output row: batches
// of 16,384 rows, 4 rows (chunks) per document, 1,000,000 documents over 4
// parts (go test ./io/output -run '^$' -bench MergeIDs -benchtime 1x).
func BenchmarkMergeIDs(b *testing.B) {
	const docs, chunks, batch, parts = 1_000_000, 4, 1 << 14, 4

	var recs []arrow.RecordBatch
	var ids []string
	for d := range docs {
		for range chunks {
			ids = append(ids, "doc-"+fmt.Sprint(d))
			if len(ids) == batch {
				recs = append(recs, idBatch(b, ColID, ids...))
				ids = ids[:0]
			}
		}
	}
	if len(ids) > 0 {
		recs = append(recs, idBatch(b, ColID, ids...))
	}
	paths := make([]string, parts)
	b.ResetTimer()
	for range b.N {
		p := newPartIDs(paths)
		for k := range parts {
			last := ""
			for _, rec := range recs[k*len(recs)/parts : (k+1)*len(recs)/parts] {
				if err := p.claimRows(rec, k, &last); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*docs*chunks), "ns/row")
}
