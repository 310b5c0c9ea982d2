package corpus

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

func TestInputFormat(t *testing.T) {
	for name, want := range map[string]Format{
		"-": FormatAuto, "/dev/fd/63": FormatAuto, "a.jsonl": FormatAuto, "a.JSONL.gz": FormatAuto, "a.ndjson": FormatAuto,
		"a.json": FormatAuto, "a.parquet": FormatAuto, "s3://b/k/a.pq": FormatAuto, "dir.v2/corpus": FormatAuto,
		"a.arrow": FormatArrow, "s3://b/a.feather": FormatArrow, "a.csv": FormatCSV, "A.CSV.GZ": FormatCSV, "s3://b/a.csv.gz": FormatCSV, "a.tsv": FormatTSV, "a.tab": FormatTSV, "a.tsv.gz": FormatTSV,
	} {
		if got, err := InputFormat(name); err != nil || got != want {
			t.Errorf("InputFormat(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for name, words := range map[string]string{
		"a.txt": `unknown input format ".txt"`, "a.xlsx.gz": `unknown input format ".xlsx"`, "a.arrows": "stream format is not read", "a.arrow.gz": "gzip-compressed Arrow IPC",
		"a.parquet.gz": "gzip-compressed Parquet", "s3://b/a.zst": `unknown input format ".zst"`,
	} {
		if _, err := InputFormat(name); err == nil || !strings.Contains(err.Error(), words) || !strings.Contains(err.Error(), name) {
			t.Errorf("InputFormat(%q) = %v; want an error naming it and saying %q", name, err, words)
		}
	}
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

// TestCSVRecords: what the reader makes of each record of a CSV file, and
// that a resumed reader (StartIndex) numbers them the same.
func TestCSVRecords(t *testing.T) {
	dir := t.TempDir()
	data := []byte("\xef\xbb\xbf_id,title,text\r\n" +
		"1,T,\"two\nlines\"\r\n" + // lines 2-3
		"2,,plain\r\n" + // line 4: empty title
		"3,x,\"bad\"quote\r\n" + // line 5
		"4,y\r\n" + // line 6: short
		",z,no id\r\n" + // line 7
		"5,u,\"\xff\"\r\n" + // line 8: invalid UTF-8
		"6,v,last") // line 9: no line end
	want := []outcome{
		{Index: 0, Line: 2, ID: "1", Text: "T\ntwo\nlines"},
		{Index: 1, Line: 4, ID: "2", Text: "plain"},
		{Index: 2, Line: 5, Reason: ReasonMalformedCSV},
		{Index: 3, Line: 6, Reason: ReasonMalformedCSV},
		{Index: 4, Line: 7, Reason: ReasonBadID},
		{Index: 5, Line: 8, ID: "5", Reason: ReasonInvalidUTF8},
		{Index: 6, Line: 9, ID: "6", Text: "v\nlast"},
	}
	for _, name := range []string{"c.csv", "c.csv.gz"} {
		b := data
		if strings.HasSuffix(name, ".gz") {
			b = gz(t, data)
		}
		p := writeFile(t, dir, name, b)
		for _, start := range []int64{0, 3} {
			r, err := Open([]string{p}, ReadOptions{TextFields: []string{"title", "text"}, StartIndex: start})
			if err != nil {
				t.Fatal(err)
			}
			got, fes := readAll(t, r)
			if len(fes) > 0 {
				t.Fatalf("%s: file errors %v", name, fes)
			}
			if fmt.Sprint(got) != fmt.Sprint(want[start:]) {
				t.Errorf("%s from %d:\n got %v\nwant %v", name, start, got, want[start:])
			}
		}
	}
}

// TestCSVHeaderProblems: a header with a column twice, and a file whose
// text column is absent (the reader alone, without CheckFields: every row
// is missing_field).
func TestCSVHeaderProblems(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "dup.tsv", []byte("id\ttext\tid\n1\ta\t2\n"))
	r, err := Open([]string{p}, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, fes := readAll(t, r)
	if len(got) != 0 || len(fes) != 1 || !strings.Contains(fes[0].Error(), `column "id" twice`) {
		t.Errorf("records %v, file errors %v; want one naming the column", got, fes)
	}
	p = writeFile(t, dir, "body.csv", []byte("id,body\n1,a\n2,b\n"))
	empty := writeFile(t, dir, "empty.csv", nil)
	r, err = Open([]string{empty, p}, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, fes = readAll(t, r)
	if len(fes) != 0 || len(got) != 2 || got[0].Reason != ReasonMissingField || got[1].Index != 1 {
		t.Errorf("records %v, file errors %v; want two missing_field rows", got, fes)
	}
}

// TestCSVRaw: rerank-style raw rows hold every column as a JSON string.
func TestCSVRaw(t *testing.T) {
	p := writeFile(t, t.TempDir(), "r.csv", []byte("query_id,query\nq1,\"say \"\"hi\"\"\"\n"))
	r, err := Open([]string{p}, ReadOptions{Raw: []string{"query"}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Fields["query_id"]) != `"q1"` || string(d.Fields["query"]) != `"say \"hi\""` {
		t.Errorf("fields %q", d.Fields)
	}
}

// TestCheckFields: the fields of each kind of input, checked before any
// work, and what is not checked.
func TestCheckFields(t *testing.T) {
	dir := t.TempDir()
	csvFile := writeFile(t, dir, "c.csv", []byte("doc_id,heading,body\n1,a,b\n"))
	emptyCSV := writeFile(t, dir, "e.csv", nil)
	var lines []string
	for i := range 150 {
		lines = append(lines, fmt.Sprintf(`{"id":"%d","title":"t"}`, i))
	}
	late := slices.Clone(lines)
	late[120] = `{"id":"x","text":"late"}`
	malformed := writeFile(t, dir, "m.jsonl", []byte("not json\n[1]\n"))
	jl := writeFile(t, dir, "j.jsonl.gz", gz(t, []byte(strings.Join(lines, "\n"))))
	lateFile := writeFile(t, dir, "late.jsonl", []byte(strings.Join(late, "\n")))
	early := slices.Clone(lines)
	early[99] = `{"id":"x","text":"in row 100"}`
	earlyFile := writeFile(t, dir, "early.jsonl", []byte(strings.Join(early, "\n")))
	pq := dir + "/p.parquet"
	writeParquet(t, pq, 10, []string{"doc_id", "text"}, []arrow.Array{stringsArr(sp("a")), stringsArr(sp("b"))})
	truncated := writeFile(t, dir, "t.parquet", []byte("PAR1 not a footer"))
	for _, tc := range []struct {
		inputs []string
		opts   ReadOptions
		want   string // "" for no error
	}{
		{[]string{csvFile}, ReadOptions{TextFields: []string{"body"}}, ""},
		{[]string{csvFile}, ReadOptions{}, csvFile + ` has no column "text"; its columns are doc_id, heading, body`},
		{[]string{csvFile}, ReadOptions{TextFields: []string{"body"}, IDField: "id"}, csvFile + ` has no column "id"`},
		{[]string{emptyCSV, malformed, truncated}, ReadOptions{}, ""},
		{[]string{pq}, ReadOptions{}, ""},
		{[]string{pq}, ReadOptions{IDField: "id"}, pq + ` has no column "id"; its columns are doc_id, text`},
		{[]string{jl}, ReadOptions{}, jl + ` has no field "text" in its first 100 rows; they have id, title`},
		{[]string{earlyFile}, ReadOptions{}, ""},
		{[]string{lateFile}, ReadOptions{}, lateFile + ` has no field "text" in its first 100 rows`},
		{[]string{"-", lateFile}, ReadOptions{TextFields: []string{"title"}}, ""},
		{[]string{dir + "/x.txt"}, ReadOptions{}, `unknown input format ".txt"`},
	} {
		err := CheckFields(context.Background(), tc.inputs, DocNeeds(tc.opts))
		var fe *FieldError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v %+v: %v; want no error", tc.inputs, tc.opts, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v %+v: %v; want %q", tc.inputs, tc.opts, err, tc.want)
		case errors.As(err, &fe) && fe.Option != map[bool]string{true: "id-field", false: "text-field"}[tc.opts.IDField != "" && fe.Field == tc.opts.IDField]:
			t.Errorf("%v: option %q", tc.inputs, fe.Option)
		}
	}
	q := writeFile(t, dir, "q.jsonl", []byte(`{"qid":"1","query":"q","candidates":[]}`+"\n"))
	err := CheckFields(context.Background(), []string{q}, QueryOptions{}.Needs())
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "query_id" || fe.Option != "query-id-field" || !slices.Equal(fe.Have, []string{"candidates", "qid", "query"}) {
		t.Errorf("rerank rows without query_id: %v", err)
	}
	if err := CheckFields(context.Background(), []string{q}, QueryOptions{QueryIDField: "qid"}.Needs()); err != nil {
		t.Errorf("--query-id-field qid: %v", err)
	}
}

// TestCSVRecordLimit: an unterminated quote does not make the reader hold
// the rest of the file: past MaxLineBytes it is a FileError naming the
// line the record starts on, after the rows before it.
func TestCSVRecordLimit(t *testing.T) {
	rest := strings.Repeat("more text, and more\n", 20000) // 400 KB
	p := writeFile(t, t.TempDir(), "open.csv", []byte("id,text\n1,\"two\nlines\"\n2,fine\n3,\"never closed\n"+rest))
	r, err := Open([]string{p}, ReadOptions{MaxLineBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	got, fes := readAll(t, r)
	want := []outcome{{Index: 0, Line: 2, ID: "1", Text: "two\nlines"}, {Index: 1, Line: 4, ID: "2", Text: "fine"}}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(fes) != 1 || !strings.Contains(fes[0].Error(), "record from line 5 is longer than 1000 bytes") {
		t.Errorf("records %v, file errors %v; want %v and one file error naming line 5", got, fes, want)
	}
}

// TestTSVQuotes: a TSV field with a bare quote is a malformed_csv row, and
// the rows after it are read as usual (not run together into one field).
func TestTSVQuotes(t *testing.T) {
	p := writeFile(t, t.TempDir(), "q.tsv", []byte("id\ttext\n1\t\"Hi\" she said\n2\tit's a \"word\"\n3\t\"quoted\tand \"\"fine\"\"\"\n4\tlast\n"))
	r, err := Open([]string{p}, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, fes := readAll(t, r)
	want := []outcome{{Index: 0, Line: 2, Reason: ReasonMalformedCSV}, {Index: 1, Line: 3, Reason: ReasonMalformedCSV},
		{Index: 2, Line: 4, ID: "3", Text: "quoted\tand \"fine\""}, {Index: 3, Line: 5, ID: "4", Text: "last"}}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(fes) != 0 {
		t.Errorf("records %v, file errors %v; want %v", got, fes, want)
	}
}

// TestArrowInput: an Arrow IPC file of several record batches: string and
// integer ids, a null text, a resumed reader's indexes, a missing column,
// a column of the wrong type.
func TestArrowInput(t *testing.T) {
	dir := t.TempDir()
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "text", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	p := dir + "/a.arrow"
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(sc))
	if err != nil {
		t.Fatal(err)
	}
	for _, texts := range [][]*string{{sp("one"), nil}, {sp("three")}} {
		ids := make([]int64, len(texts))
		for i := range ids {
			ids[i] = int64(len(texts)*10 + i)
		}
		rec := array.NewRecordBatch(sc, []arrow.Array{int64Arr(ids...), stringsArr(texts...)}, int64(len(texts)))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := errors.Join(w.Close(), f.Close()); err != nil {
		t.Fatal(err)
	}
	want := []outcome{{Index: 0, Row: 0, ID: "20", Text: "one"}, {Index: 1, Row: 1, ID: "21", Reason: ReasonNullText}, {Index: 2, Row: 2, ID: "10", Text: "three"}}
	for _, start := range []int64{0, 2} {
		r, err := Open([]string{p}, ReadOptions{StartIndex: start})
		if err != nil {
			t.Fatal(err)
		}
		got, fes := readAll(t, r)
		if fmt.Sprint(got) != fmt.Sprint(want[start:]) || len(fes) != 0 {
			t.Errorf("from %d: records %v, file errors %v; want %v", start, got, fes, want[start:])
		}
	}
	r, _ := Open([]string{p}, ReadOptions{TextFields: []string{"body"}})
	got, _ := readAll(t, r)
	if len(got) != 3 || got[0].Reason != ReasonMissingField {
		t.Errorf("without the text column: %v; want 3 missing_field rows", got)
	}
	r, _ = Open([]string{p}, ReadOptions{TextFields: []string{"id"}, IDField: "text"})
	got, _ = readAll(t, r)
	if len(got) != 3 || got[0].Reason != ReasonNotText || got[1].Reason != ReasonBadID || got[2].Reason != ReasonNotText || got[2].ID != "three" {
		t.Errorf("an int64 text column and a string id column: %v; want not_text rows (ids one, three) and the null id's bad_id", got)
	}
	data, _ := os.ReadFile(p)
	cut := writeFile(t, dir, "cut.arrow", data[:len(data)/2])
	r, _ = Open([]string{cut, p}, ReadOptions{})
	got, fes := readAll(t, r)
	if len(fes) != 1 || fes[0].Source != cut || len(got) != 3 {
		t.Errorf("a truncated file then a good one: records %v, file errors %v", got, fes)
	}
}
