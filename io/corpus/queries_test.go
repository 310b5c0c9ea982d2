package corpus

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// readQueries reads every record of a query source: queries and errors.
func readQueries(t *testing.T, src interface{ Next() (Query, error) }) (qs []Query, errs []error) {
	t.Helper()
	for {
		q, err := src.Next()
		if errors.Is(err, io.EOF) {
			return qs, errs
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		qs = append(qs, q)
	}
}

// describeQuery is a query as one comparable line.
func describeQuery(q Query) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s %q", q.Index, q.ID, q.Text)
	if q.Err != nil {
		fmt.Fprintf(&b, " ERR %s", q.Err.Reason)
	}
	for _, c := range q.Cands {
		fmt.Fprintf(&b, " [%s %q", c.ID, c.Text)
		if c.Score != nil {
			fmt.Fprintf(&b, " %g", *c.Score)
		}
		if c.Err != nil {
			fmt.Fprintf(&b, " ERR %s", c.Err.Reason)
		}
		b.WriteString("]")
	}
	return b.String()
}

const groupedJSONL = `{"query_id": "q1", "query": "what cells", "candidates": [{"id": "d1", "text": "b cells", "title": "B", "score": 0.5}, {"id": 7, "text": "t cells"}]}
{"query_id": "q2", "query": "  ", "candidates": [{"id": "d3", "text": "x"}]}
{"query_id": "q3", "query": "why", "candidates": [{"id": "d4", "text": ""}, {"text": "no id"}, {"id": "d5", "text": "ok", "score": "high"}]}
`

func TestQueryReaderGrouped(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "g.jsonl", []byte(groupedJSONL))
	qr, err := OpenQueries([]string{in}, QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer qr.Close()
	qs, errs := readQueries(t, qr)
	want := []string{
		`0 q1 "what cells" [d1 "B\nb cells" 0.5] [7 "t cells"]`,
		`1 q2 "" ERR empty_text [d3 "x"]`,
		`2 q3 "why" [d4 "" ERR empty_text] [ "" ERR missing_field] [d5 "" ERR bad_score]`,
	}
	checkQueries(t, "grouped JSONL", qs, errs, want)

	// The same rows as Parquet, the candidates a list<struct> column.
	cand := arrow.StructOf(arrow.Field{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "title", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true})
	lists, _, err := array.FromJSON(memory.DefaultAllocator, arrow.ListOf(cand), strings.NewReader(
		`[[{"id":"d1","text":"b cells","title":"B","score":0.5},{"id":"7","text":"t cells"}],[{"id":"d3","text":"x"}],[{"id":"d4","text":""},{"text":"no id"},{"id":"d5","text":"ok"}]]`))
	if err != nil {
		t.Fatal(err)
	}
	pq := filepath.Join(dir, "g.parquet")
	writeParquet(t, pq, 2, []string{"query_id", "query", "candidates"},
		[]arrow.Array{stringsArr(sp("q1"), sp("q2"), sp("q3")), stringsArr(sp("what cells"), sp("  "), sp("why")), lists})
	qr2, err := OpenQueries([]string{pq}, QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer qr2.Close()
	qs, errs = readQueries(t, qr2)
	want[2] = `2 q3 "why" [d4 "" ERR empty_text] [ "" ERR missing_field] [d5 "ok"]` // a Parquet score column is a number
	checkQueries(t, "grouped Parquet", qs, errs, want)
}

func checkQueries(t *testing.T, what string, qs []Query, errs []error, want []string) {
	t.Helper()
	if len(errs) > 0 {
		t.Errorf("%s: errors %v", what, errs)
	}
	if len(qs) != len(want) {
		t.Fatalf("%s: %d queries; want %d", what, len(qs), len(want))
	}
	for i, q := range qs {
		if got := describeQuery(q); got != want[i] {
			t.Errorf("%s query %d:\n got %s\nwant %s", what, i, got, want[i])
		}
	}
}

// TestQueryReaderIDs: an empty query or document id is bad_id; a query id
// an earlier query has, and a document twice in one list, are
// duplicate_id; a resumed reader knows the ids before its start.
func TestQueryReaderIDs(t *testing.T) {
	in := writeFile(t, t.TempDir(), "ids.jsonl", []byte(`{"query_id":"q1","query":"a","candidates":[{"id":"d1","text":"x"},{"id":"d1","text":"y"},{"id":"","text":"z"}]}
{"query_id":"","query":"b","candidates":[{"id":"d1","text":"x"}]}
{"query_id":"q1","query":"c","candidates":[{"id":"d2","text":"x"}]}
{"query_id":"q2","query":"d","candidates":[{"id":"d2","text":"x"}]}
`))
	want := []string{
		`0 q1 "a" [d1 "x"] [d1 "y" ERR duplicate_id] [ "" ERR bad_id]`,
		`1  "" ERR bad_id [d1 "x"]`,
		`2 q1 "c" ERR duplicate_id [d2 "x"]`,
		`3 q2 "d" [d2 "x"]`,
	}
	for start := range len(want) + 1 {
		qr, err := OpenQueries([]string{in}, QueryOptions{Read: ReadOptions{StartIndex: int64(start)}})
		if err != nil {
			t.Fatal(err)
		}
		qs, errs := readQueries(t, qr)
		qr.Close()
		checkQueries(t, fmt.Sprintf("from %d", start), qs, errs, want[start:])
	}
}

// TestQueryReaderFlat: consecutive rows of one query form its list; a bad
// row inside a list fails as a candidate of it, with its own line; rows
// start a new list when the query id changes.
func TestQueryReaderFlat(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "f.jsonl", []byte(`{"query_id": "q1", "query": "what cells", "doc_id": "d1", "text": "b cells"}
{"query_id": "q1", "query": "what cells", "doc_id": "d2", "text": "t cells", "score": 3}
{broken
{"query_id": "q1", "query": "what cells", "text": "no id"}
{"query_id": "q2", "query": "why", "doc_id": "d9", "text": "because"}
{"query_id": "q1", "query": "what cells", "doc_id": "d3", "text": "again"}
`))
	qr, err := OpenQueries([]string{in}, QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer qr.Close()
	qs, errs := readQueries(t, qr)
	checkQueries(t, "flat", qs, errs, []string{
		`0 q1 "what cells" [d1 "b cells"] [d2 "t cells" 3] [ "" ERR malformed_json] [ "" ERR missing_field]`,
		`4 q2 "why" [d9 "because"]`,
		`5 q1 "what cells" ERR duplicate_id [d3 "again"]`, // q1 again, after another query
	})
	if c := qs[0].Cands[2]; c.Line != 3 || c.Err.Line != 3 || *c.Err.Candidate != 2 || c.Err.ID != "q1" {
		t.Errorf("bad row's candidate: %+v, error %+v; want line 3, candidate 2 of q1", c, c.Err)
	}
}

// TestQueryReaderResume: read from a group's start, the queries are those of
// a full read from there.
func TestQueryReaderResume(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for q := range 700 {
		for d := range 1 + q%3 {
			fmt.Fprintf(&b, `{"query_id": "q%d", "query": "query %d", "doc_id": "d%d", "text": "doc %d"}`+"\n", q, q, d, d)
		}
	}
	in := writeFile(t, dir, "f.jsonl", []byte(b.String()))
	read := func(start int64) []Query {
		qr, err := OpenQueries([]string{in}, QueryOptions{Read: ReadOptions{StartIndex: start}})
		if err != nil {
			t.Fatal(err)
		}
		defer qr.Close()
		qs, errs := readQueries(t, qr)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return qs
	}
	full := read(0)
	if len(full) != 700 || full[256].Group != full[256].Index || full[255].Group != 0 {
		t.Fatalf("%d queries, groups %d %d; want 700, a group starting at query 256", len(full), full[255].Group, full[256].Group)
	}
	part := read(full[512].Group)
	if len(part) != 700-512 || describeQuery(part[0]) != describeQuery(full[512]) || part[10].Group != full[522].Group {
		t.Errorf("resumed at query 512: %d queries from %s; want %d from %s", len(part), describeQuery(part[0]), 700-512, describeQuery(full[512]))
	}
}

// TestRunReader: a TREC run re-ranked to depth 2 by score, with queries and
// corpus files; a document or query the files lack, a bad line and lines
// beyond the depth each have their outcome.
func TestRunReader(t *testing.T) {
	dir := t.TempDir()
	run := writeFile(t, dir, "run.trec", []byte(`q1 Q0 d1 1 9.0 bm25
q1 Q0 d2 2 8.5 bm25
q2 Q0 d3 1 4 bm25
not a run line
q1 Q0 d4 3 9.5 bm25
q2 Q0 gone 2 3 bm25
q9 Q0 d1 1 1 bm25
`))
	queries := writeFile(t, dir, "queries.jsonl", []byte(`{"_id": "q1", "text": "first"}
{"_id": "q2", "text": "second"}
{"_id": "q3", "text": "unused"}
`))
	corpus := writeFile(t, dir, "corpus.jsonl", []byte(`{"_id": "d1", "title": "T1", "text": "one"}
{"_id": "d2", "title": "", "text": "two"}
{"_id": "d3", "text": "three"}
{"_id": "d4", "title": "T4", "text": "four"}
{"_id": "d5", "title": "T5", "text": "unused"}
`))
	rr, err := OpenRun(RunOptions{Run: run, Queries: []string{queries}, Corpus: []string{corpus}, Depth: 2, SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	qs, errs := readQueries(t, rr)
	checkQueries(t, "run", qs, nil, []string{
		`0 q1 "first" [d4 "T4\nfour" 9.5] [d1 "T1\none" 9]`,
		`2 q2 "second" [d3 "three" 4] [gone "" 3 ERR missing_document]`,
		`6 q9 "" ERR missing_query [d1 "T1\none" 1]`,
	})
	var re *RowError
	if len(errs) != 1 || !errors.As(errs[0], &re) || re.Line != 4 || re.Reason != ReasonMalformedLine {
		t.Errorf("errors %v; want the bad line 4 as malformed_line", errs)
	}
	if rr.Skipped != 1 {
		t.Errorf("%d lines skipped beyond the depth; want 1 (d2)", rr.Skipped)
	}
	if c := qs[1].Cands[1]; c.Line != 6 || c.Err.Line != 6 {
		t.Errorf("missing document: line %d; want the run line 6", c.Line)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "synapse-rerank-docs-*")); len(names) != 0 {
		t.Errorf("spool files left in the directory: %v", names)
	}
	if _, err := os.Stat(run); err != nil {
		t.Fatal(err)
	}
}

// TestRunReaderIDs: a run that lists a document twice for a query scores it
// once; a queries or corpus file with an _id the run names in two rows is
// refused, naming the second row.
func TestRunReaderIDs(t *testing.T) {
	dir := t.TempDir()
	run := writeFile(t, dir, "run.trec", []byte("q1 Q0 d1 1 9 bm25\nq1 Q0 d2 2 8 bm25\nq1 Q0 d1 3 7 bm25\n"))
	queries := writeFile(t, dir, "queries.jsonl", []byte(`{"_id": "q1", "text": "first"}`+"\n"))
	corpus := writeFile(t, dir, "corpus.jsonl", []byte(`{"_id": "d1", "text": "one"}`+"\n"+`{"_id": "d2", "text": "two"}`+"\n"))
	rr, err := OpenRun(RunOptions{Run: run, Queries: []string{queries}, Corpus: []string{corpus}, SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	qs, _ := readQueries(t, rr)
	rr.Close()
	checkQueries(t, "run", qs, nil, []string{`0 q1 "first" [d1 "one" 9] [d2 "two" 8] [d1 "one" 7 ERR duplicate_id]`})

	for name, o := range map[string]RunOptions{
		"queries": {Run: run, Queries: []string{writeFile(t, dir, "q2.jsonl", []byte(`{"_id": "q1", "text": "first"}`+"\n"+`{"_id": "q1", "text": "other"}`+"\n"))}, Corpus: []string{corpus}},
		"corpus":  {Run: run, Queries: []string{queries}, Corpus: []string{writeFile(t, dir, "c2.jsonl", []byte(`{"_id": "d1", "text": "one"}`+"\n"+`{"_id": "d2", "text": "two"}`+"\n"+`{"_id": "d1", "text": "uno"}`+"\n"))}},
	} {
		o.SpoolDir = dir
		rr, err := OpenRun(o)
		if err == nil {
			rr.Close()
		}
		if !errors.Is(err, ErrDuplicateRow) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), ".jsonl:") {
			t.Errorf("%s with an _id twice: got %v; want ErrDuplicateRow naming the %s file and line", name, err, name)
		}
	}
}
