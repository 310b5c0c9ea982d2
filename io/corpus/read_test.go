package corpus

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/synapse-embed/synapse/io/files"
)

// A JSONL file with every kind of bad line; each non-blank line is one record.
const badJSONL = "\xef\xbb\xbf" + `{"id":"a","text":"hello"}
{"id":"b"}
{"id":"c","text":null}
{"id":"d","text":42}
{"id":"e","text":
[1,2,3]

{"id":"f","text":"bad ` + "\xff" + ` byte"}
{"id":"g","text":"   "}
{"id":"h","text":""}
{"_id":"i","text":"underscore id"}
{"text":"no id"}
{"id":7,"text":"numeric id"}
{"id":{"x":1},"text":"object id"}
{"id":null,"_id":"z","text":"null id"}
{"id":"","text":"empty id"}
{"id":"#3","text":"reserved"}
{"id":"#3a","text":"not reserved"}
{"id":"j","text":"crlf"}` + "\r\n" + `   
{"id":"k","text":"no newline at end"}`

func TestJSONLRecords(t *testing.T) {
	want := []outcome{
		{Index: 0, Line: 1, ID: "a", Text: "hello"},
		{Index: 1, Line: 2, ID: "b", Reason: ReasonMissingField},
		{Index: 2, Line: 3, ID: "c", Reason: ReasonNullText},
		{Index: 3, Line: 4, ID: "d", Reason: ReasonNotText},
		{Index: 4, Line: 5, Reason: ReasonMalformedJSON},
		{Index: 5, Line: 6, Reason: ReasonMalformedJSON},
		{Index: 6, Line: 8, ID: "f", Reason: ReasonInvalidUTF8},
		{Index: 7, Line: 9, ID: "g", Reason: ReasonEmptyText},
		{Index: 8, Line: 10, ID: "h", Reason: ReasonEmptyText},
		{Index: 9, Line: 11, ID: "i", Text: "underscore id"},
		{Index: 10, Line: 12, ID: "#10", Text: "no id"}, // no id field: #INDEX
		{Index: 11, Line: 13, ID: "7", Text: "numeric id"},
		{Index: 12, Line: 14, Reason: ReasonBadID},
		{Index: 13, Line: 15, Reason: ReasonBadID}, // null: not a fallback to _id or #INDEX
		{Index: 14, Line: 16, Reason: ReasonBadID}, // empty
		{Index: 15, Line: 17, Reason: ReasonBadID}, // #N is reserved
		{Index: 16, Line: 18, ID: "#3a", Text: "not reserved"},
		{Index: 17, Line: 19, ID: "j", Text: "crlf"},
		{Index: 18, Line: 21, ID: "k", Text: "no newline at end"},
	}
	path := writeFile(t, t.TempDir(), "bad.jsonl", []byte(badJSONL))
	r, err := Open([]string{path}, ReadOptions{SkipEmpty: true})
	if err != nil {
		t.Fatal(err)
	}
	got, fes := readAll(t, r)
	if len(fes) != 0 {
		t.Fatalf("file errors: %v", fes)
	}
	compareOutcomes(t, got, want)

	// Without SkipEmpty, empty and blank texts are documents.
	r, _ = Open([]string{path}, ReadOptions{})
	got, _ = readAll(t, r)
	if got[7].Reason != "" || got[7].Text != "   " || got[8].Reason != "" || got[8].Text != "" {
		t.Errorf("without SkipEmpty: got %+v, %+v; want documents", got[7], got[8])
	}
}

func compareOutcomes(t *testing.T, got, want []outcome) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d records; want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("record %d: got %+v; want %+v", i, got[i], want[i])
		}
	}
}

func TestRowErrorDetails(t *testing.T) {
	path := writeFile(t, t.TempDir(), "x.jsonl", []byte("{\"id\":\"u\",\"text\":\"ok \xc3\x28 no\"}\n{\"id\":\"d\",\"text\":true}\n"))
	r, _ := Open([]string{path}, ReadOptions{})
	_, err := r.Next()
	var re *RowError
	if !errors.As(err, &re) {
		t.Fatalf("got %v; want a RowError", err)
	}
	if want := `x.jsonl:1: invalid_utf8: field "text": invalid UTF-8 at byte 4 of the value`; !strings.HasSuffix(re.Error(), want) {
		t.Errorf("got %q; want suffix %q", re.Error(), want)
	}
	_, err = r.Next()
	if !errors.As(err, &re) || !strings.Contains(re.Detail, "boolean") {
		t.Errorf("got %v; want not_text naming a boolean", err)
	}
}

func TestTextFieldsIDFieldPrefix(t *testing.T) {
	lines := `{"doc":"1","title":"T","text":"body"}
{"doc":"2","title":"","text":"only body"}
{"doc":"3","text":"no title"}
{"title":"T","text":"no doc"}
`
	path := writeFile(t, t.TempDir(), "t.jsonl", []byte(lines))
	r, err := Open([]string{path}, ReadOptions{TextFields: []string{"title", "text"}, IDField: "doc", Prefix: "search_document: "})
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Next()
	if err != nil || d.Text != "search_document: T\nbody" || d.PrefixLen != 17 || d.ID != "1" {
		t.Errorf("got %+v, %v; want joined text with prefix", d, err)
	}
	if d, err := r.Next(); err != nil || d.Text != "search_document: only body" {
		t.Errorf("got %q, %v; want empty title left out", d.Text, err)
	}
	var re *RowError
	if _, err := r.Next(); !errors.As(err, &re) || re.Reason != ReasonMissingField || re.ID != "3" {
		t.Errorf("got %v; want missing_field for the title", err)
	}
	if _, err := r.Next(); !errors.As(err, &re) || re.Reason != ReasonMissingField || !strings.Contains(re.Detail, "ID") {
		t.Errorf("got %v; want missing_field for the explicit ID field", err)
	}
}

func TestJSONLLongLines(t *testing.T) {
	big := strings.Repeat("word ", 1<<20) // 5 MiB
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "{\"id\":\"big\",\"text\":%q}\n{\"id\":\"next\",\"text\":\"small\"}\n", big)
	path := writeFile(t, t.TempDir(), "big.jsonl", buf.Bytes())

	r, _ := Open([]string{path}, ReadOptions{})
	got, _ := readAll(t, r)
	if len(got) != 2 || got[0].Text != big || got[1].Text != "small" {
		t.Fatalf("got %d records (first %d bytes); want the 5 MiB document and the next", len(got), len(got[0].Text))
	}
	r, _ = Open([]string{path}, ReadOptions{MaxLineBytes: 1 << 20})
	got, _ = readAll(t, r)
	want := []outcome{{Index: 0, Line: 1, Reason: ReasonLineTooLong}, {Index: 1, Line: 2, ID: "next", Text: "small"}}
	compareOutcomes(t, got, want)
}

func gzipBytes(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestJSONLGzipAndStdin(t *testing.T) {
	var plain bytes.Buffer
	for i := range 2000 {
		fmt.Fprintf(&plain, "{\"id\":\"%d\",\"text\":\"document number %d with some words\"}\n", i, i)
	}
	dir := t.TempDir()
	gz := gzipBytes(t, plain.Bytes())
	full := writeFile(t, dir, "c.jsonl.gz", gz)
	cut := writeFile(t, dir, "cut.jsonl.gz", gz[:len(gz)/2])

	r, _ := Open([]string{full}, ReadOptions{})
	got, fes := readAll(t, r)
	if len(got) != 2000 || len(fes) != 0 || got[1999].ID != "1999" {
		t.Errorf("gzip: got %d records, %v; want 2000", len(got), fes)
	}

	r, _ = Open([]string{"-"}, ReadOptions{Stdin: bytes.NewReader(gz)})
	got, _ = readAll(t, r)
	if len(got) != 2000 || got[0].Line != 1 {
		t.Errorf("gzip on stdin: got %d records; want 2000", len(got))
	}

	r, _ = Open([]string{cut, full}, ReadOptions{})
	got, fes = readAll(t, r)
	if len(fes) != 1 || fes[0].Source != cut || !errors.Is(fes[0], io.ErrUnexpectedEOF) {
		t.Fatalf("truncated gzip: got file errors %v; want one unexpected EOF naming %s", fes, cut)
	}
	n := 0
	for n < len(got) && got[n].Index == int64(n) && got[n].Line == n+1 {
		n++
	}
	if n == 0 || n >= 2000 || len(got) != n+2000 || got[n].Index != int64(n) || got[n].Line != 1 {
		t.Errorf("truncated gzip: %d records before the cut, %d in all; want the rest from the next file", n, len(got))
	}
	for _, o := range got[:n] {
		if o.Reason != "" {
			t.Errorf("truncated gzip: record %+v before the cut is bad", o)
		}
	}
}

func TestOpenOptions(t *testing.T) {
	for _, tc := range []struct {
		files []string
		opts  ReadOptions
	}{
		{nil, ReadOptions{}},
		{[]string{"-", "-"}, ReadOptions{}},
		{[]string{"a"}, ReadOptions{TextFields: []string{""}}},
		{[]string{"a"}, ReadOptions{Shard: 3, Shards: 3}},
	} {
		if _, err := Open(tc.files, tc.opts); err == nil {
			t.Errorf("Open(%q, %+v): got no error; want one", tc.files, tc.opts)
		}
	}
	r, _ := Open([]string{filepath.Join(t.TempDir(), "missing.jsonl")}, ReadOptions{})
	_, fes := readAll(t, r)
	if len(fes) != 1 || !errors.Is(fes[0], os.ErrNotExist) || fes[0].RowGroup != -1 {
		t.Errorf("missing file: got %v; want one not-exist file error", fes)
	}
}

// textColumns builds the same texts as string, large_string and dictionary
// arrays; nil is null.
func textColumns(t *testing.T, vals []*string) map[string]arrow.Array {
	mem := memory.DefaultAllocator
	str := stringsArr(vals...)
	lb := array.NewLargeStringBuilder(mem)
	defer lb.Release()
	db := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String})
	defer db.Release()
	for _, v := range vals {
		if v == nil {
			lb.AppendNull()
			db.AppendNull()
			continue
		}
		lb.Append(*v)
		if err := db.(*array.BinaryDictionaryBuilder).AppendString(*v); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]arrow.Array{"string": str, "large_string": lb.NewArray(), "dictionary": db.NewArray()}
}

func TestParquetTextColumnTypes(t *testing.T) {
	vals := []*string{sp("alpha"), nil, sp("beta"), sp("bad \xff"), sp("alpha"), sp("  "), sp("gamma")}
	ids := []*string{sp("r0"), sp("r1"), nil, sp("r3"), sp("r4"), sp("r5"), sp("r6")}
	want := []outcome{
		{Index: 0, ID: "r0", Text: "alpha"},
		{Index: 1, Row: 1, ID: "r1", Reason: ReasonNullText},
		{Index: 2, Row: 2, Reason: ReasonBadID}, // a null ID is refused
		{Index: 3, Row: 3, ID: "r3", Reason: ReasonInvalidUTF8},
		{Index: 4, Row: 4, ID: "r4", Text: "alpha"},
		{Index: 5, Row: 5, ID: "r5", Reason: ReasonEmptyText},
		{Index: 6, Row: 6, ID: "r6", Text: "gamma"},
	}
	for kind, col := range textColumns(t, vals) {
		t.Run(kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.parquet")
			writeParquet(t, path, 3, []string{"id", "text"}, []arrow.Array{stringsArr(ids...), col})
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			r, _ := Open([]string{path}, ReadOptions{SkipEmpty: true, ParquetBatchRows: 2, Allocator: mem})
			got, fes := readAll(t, r)
			if len(fes) != 0 {
				t.Fatalf("file errors: %v", fes)
			}
			compareOutcomes(t, got, want)
		})
	}
}

func TestParquetUnusableColumns(t *testing.T) {
	dir := t.TempDir()
	intText := filepath.Join(dir, "int.parquet")
	writeParquet(t, intText, 2, []string{"id", "text"}, []arrow.Array{int64Arr(10, 11, 12), int64Arr(1, 2, 3)})
	noText := filepath.Join(dir, "notext.parquet")
	writeParquet(t, noText, 2, []string{"body"}, []arrow.Array{stringsArr(sp("x"), sp("y"))})

	r, _ := Open([]string{intText, noText}, ReadOptions{})
	got, fes := readAll(t, r)
	if len(fes) != 0 {
		t.Fatalf("file errors: %v", fes)
	}
	want := []outcome{
		{Index: 0, ID: "10", Reason: ReasonNotText},
		{Index: 1, Row: 1, ID: "11", Reason: ReasonNotText},
		{Index: 2, Row: 2, ID: "12", Reason: ReasonNotText},
		{Index: 3, ID: "#3", Reason: ReasonMissingField},
		{Index: 4, Row: 1, ID: "#4", Reason: ReasonMissingField},
	}
	compareOutcomes(t, got, want)
}

func TestParquetTruncatedAndCorrupt(t *testing.T) {
	dir := t.TempDir()
	n := 4000
	texts := make([]*string, n)
	for i := range texts {
		texts[i] = sp(fmt.Sprintf("text %d %s", i, strings.Repeat("x", i%50)))
	}
	good := filepath.Join(dir, "good.parquet")
	writeParquet(t, good, 1000, []string{"text"}, []arrow.Array{stringsArr(texts...)})
	b, _ := os.ReadFile(good)
	trunc := writeFile(t, dir, "trunc.parquet", b[:len(b)/2])
	notPQ := writeFile(t, dir, "garbage.parquet", []byte("PAR1 this is not parquet"))

	r, _ := Open([]string{trunc, notPQ, good}, ReadOptions{})
	got, fes := readAll(t, r)
	if len(fes) != 2 || fes[0].Source != trunc || fes[0].RowGroup != -1 || fes[1].Source != notPQ {
		t.Fatalf("got file errors %v; want the truncated and the garbage file", fes)
	}
	if len(got) != n || got[0].Index != 0 || got[n-1].Text != *texts[n-1] {
		t.Errorf("got %d records; want %d from the good file, indexed from 0", len(got), n)
	}
	if fes[0].Index != 0 || fes[1].Index != 0 {
		t.Errorf("file error indexes: got %d, %d; want 0, 0", fes[0].Index, fes[1].Index)
	}
	r, _ = Open([]string{good, trunc}, ReadOptions{StartIndex: int64(n)})
	if got, fes = readAll(t, r); len(got) != 0 || len(fes) != 1 || fes[0].Index != int64(n) {
		t.Errorf("resumed at the failing file: got %d records, %v; want its file error at index %d", len(got), fes, n)
	}
	r, _ = Open([]string{trunc, good}, ReadOptions{StartIndex: 1})
	if got, fes = readAll(t, r); len(got) != n-1 || len(fes) != 0 {
		t.Errorf("resumed past the failing file: got %d records, %v; want %d records and no file error", len(got), fes, n-1)
	}

	// Overwrite the data of row group 2 with garbage, keeping the footer.
	corrupt := writeFile(t, dir, "corrupt.parquet", b)
	f, _ := os.OpenFile(corrupt, os.O_RDWR, 0)
	r0, _ := Open([]string{good}, ReadOptions{})
	src, err := r0.open(good)
	if err != nil {
		t.Fatal(err)
	}
	cc, _ := src.(*parquetSource).pf.MetaData().RowGroup(2).ColumnChunk(0)
	off := cc.DataPageOffset()
	src.close()
	f.WriteAt(bytes.Repeat([]byte{0xee}, 64), off)
	f.Close()

	// The corrupt group's rows are errors naming the group and its rows;
	// the intact groups after it are read, and the rows count as the
	// footer's.
	r, _ = Open([]string{corrupt, good}, ReadOptions{})
	var details []string
	for {
		_, err := r.Next()
		var re *RowError
		if errors.As(err, &re) {
			details = append(details, re.Detail)
		} else if err != nil {
			break
		}
	}
	if p := r.Progress(); p.ParquetRows != int64(2*n) || p.Records != int64(2*n) {
		t.Errorf("progress after a corrupt row group: got %d rows, %d records; want %d of each (the footers')", p.ParquetRows, p.Records, 2*n)
	}
	if len(details) == 0 || !strings.Contains(details[0], "row group 2 (rows 2000-2999 of the file, 1000 rows)") {
		t.Errorf("got error details %.200q; want row group 2 and its rows named", details)
	}
	r, _ = Open([]string{corrupt, good}, ReadOptions{})
	got, fes = readAll(t, r)
	if len(fes) != 0 {
		t.Fatalf("got file errors %+v; want none: the corrupt group's rows are row errors", fes)
	}
	if len(got) != 2*n {
		t.Fatalf("got %d records; want %d (both files, every row)", len(got), 2*n)
	}
	for i, o := range got {
		bad := i >= 2000 && i < 3000
		if o.Index != int64(i) || (o.Reason == ReasonCorruptRows) != bad || (i < n && o.Row != int64(i)) {
			t.Fatalf("record %d: got %+v; want index %d, a %s row error only in rows 2000-2999", i, o, i, ReasonCorruptRows)
		}
	}
	if got[3000].Text != *texts[3000] {
		t.Errorf("row 3000: got %q; want %q (the group after the corrupt one)", got[3000].Text, *texts[3000])
	}
	// A resumed run inside the corrupt group starts there.
	r, _ = Open([]string{corrupt}, ReadOptions{StartIndex: 2500})
	if got, _ = readAll(t, r); len(got) != 1500 || got[0].Index != 2500 || got[0].Reason != ReasonCorruptRows || got[500].Reason != "" {
		t.Errorf("resumed at 2500: got %d records starting %+v; want 500 row errors then 1000 documents", len(got), got[0])
	}
}

func TestMultipleFilesIndexSkip(t *testing.T) {
	dir := t.TempDir()
	j1 := writeFile(t, dir, "a.jsonl", []byte("{\"text\":\"a0\"}\n\n{\"text\":\"a1\"}\n{bad\n"))
	texts := make([]*string, 10)
	for i := range texts {
		texts[i] = sp(fmt.Sprintf("p%d", i))
	}
	pq := filepath.Join(dir, "b.parquet")
	writeParquet(t, pq, 3, []string{"text"}, []arrow.Array{stringsArr(texts...)})
	j2 := writeFile(t, dir, "c.jsonl", []byte("{\"text\":\"c0\"}\n{\"text\":\"c1\"}\n"))
	files := []string{j1, pq, j2}

	r, _ := Open(files, ReadOptions{})
	all, _ := readAll(t, r)
	if len(all) != 15 {
		t.Fatalf("got %d records; want 15", len(all))
	}
	for i, o := range all {
		if o.Index != int64(i) {
			t.Errorf("record %d has index %d", i, o.Index)
		}
	}
	for _, tc := range []struct {
		opts ReadOptions
		keep func(int64) bool
	}{
		{ReadOptions{StartIndex: 7}, func(i int64) bool { return i >= 7 }},
		{ReadOptions{StartIndex: 14}, func(i int64) bool { return i >= 14 }},
	} {
		var want []outcome
		for _, o := range all {
			if tc.keep(o.Index) {
				want = append(want, o)
			}
		}
		r, _ := Open(files, tc.opts)
		got, _ := readAll(t, r)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: got %v; want %v", tc.opts, got, want)
		}
	}
}

func TestCountAndProgress(t *testing.T) {
	dir := t.TempDir()
	content := []byte("{\"text\":\"a\"}\n{\"text\":\"b\"}\n")
	j := writeFile(t, dir, "a.jsonl", content)
	pq := filepath.Join(dir, "b.parquet")
	writeParquet(t, pq, 2, []string{"text"}, []arrow.Array{stringsArr(sp("x"), sp("y"), sp("z"))})
	est, err := Count([]string{j, pq})
	if err != nil || est.ParquetRows != 3 || est.JSONLBytes != int64(len(content)) {
		t.Errorf("Count: got %+v, %v; want 3 rows and %d bytes", est, err, len(content))
	}
	if est, err := Count([]string{"-", filepath.Join(dir, "missing")}); err == nil || est.JSONLBytes != -1 {
		t.Errorf("Count with stdin and a missing file: got %+v, %v; want -1 bytes and an error", est, err)
	}
	r, _ := Open([]string{j, pq}, ReadOptions{})
	readAll(t, r)
	p := r.Progress()
	if want := (Progress{File: 2, Records: 5, ParquetRows: 3, JSONLBytes: int64(len(content))}); p != want {
		t.Errorf("Progress: got %+v; want %+v", p, want)
	}
}

// FuzzJSONL feeds arbitrary bytes as a JSONL file: every non-blank line must
// give exactly one record, in order, and nothing may panic.
func FuzzJSONL(f *testing.F) {
	f.Add([]byte(`{"id":"a","text":"ok"}` + "\n"))          // valid
	f.Add([]byte(`{"id":"a","text":"cut`))                  // truncated last line
	f.Add([]byte(`{"id":1,"text":7}` + "\n[]\nnull\n"))     // wrong types
	f.Add([]byte("{\"text\":\"\xff\xfe\"}\r\n\n  \n"))      // invalid UTF-8, CRLF, blank lines
	f.Add([]byte("\xef\xbb\xbf{\"_id\":{},\"text\":\"\"}")) // BOM, bad ID, empty text
	f.Add([]byte("\x1f\x8b"))                               // gzip magic alone: a truncated stream
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Open([]string{"-"}, ReadOptions{Stdin: bytes.NewReader(data), SkipEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		got, fes := readAll(t, r)
		if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
			return // read as gzip: a broken stream is a file error
		}
		if len(fes) != 0 {
			t.Fatalf("file errors on plain input: %v", fes)
		}
		var lines []int
		for i, l := range bytes.Split(data, []byte("\n")) {
			if i == 0 {
				l = bytes.TrimPrefix(l, []byte("\xef\xbb\xbf"))
			}
			if len(bytes.TrimSpace(l)) > 0 {
				lines = append(lines, i+1)
			}
		}
		if len(got) != len(lines) {
			t.Fatalf("got %d records; want %d", len(got), len(lines))
		}
		for i, o := range got {
			if o.Index != int64(i) || o.Line != lines[i] {
				t.Fatalf("record %d: index %d line %d; want line %d", i, o.Index, o.Line, lines[i])
			}
		}
	})
}

// TestJSONLLoneSurrogates: encoding/json would turn an unpaired surrogate
// escape into U+FFFD silently; the reader lists the row instead, and leaves
// pairs, escaped backslashes and a real U+FFFD alone.
func TestJSONLLoneSurrogates(t *testing.T) {
	lines := []string{
		`{"id":"hi","text":"a \ud83d b"}`,
		`{"id":"lo","text":"a \udE00"}`,
		`{"id":"hihi","text":"\ud83d\ud83d"}`,
		`{"id":"pair","text":"\ud83d\ude00 \u00e9"}`,
		`{"id":"bs","text":"\\ud83d"}`,
		`{"id":"fffd","text":"\ufffd ` + "\ufffd" + `"}`,
		`{"id":"end","text":"\ud83d\\"}`,
	}
	path := writeFile(t, t.TempDir(), "s.jsonl", []byte(strings.Join(lines, "\n")+"\n"))
	r, err := Open([]string{path}, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, r)
	compareOutcomes(t, got, []outcome{
		{Index: 0, Line: 1, ID: "hi", Reason: ReasonInvalidUTF8},
		{Index: 1, Line: 2, ID: "lo", Reason: ReasonInvalidUTF8},
		{Index: 2, Line: 3, ID: "hihi", Reason: ReasonInvalidUTF8},
		{Index: 3, Line: 4, ID: "pair", Text: "\U0001F600 é"},
		{Index: 4, Line: 5, ID: "bs", Text: `\ud83d`},
		{Index: 5, Line: 6, ID: "fffd", Text: "\ufffd \ufffd"},
		{Index: 6, Line: 7, ID: "end", Reason: ReasonInvalidUTF8},
	})
	r, _ = Open([]string{path}, ReadOptions{})
	_, err = r.Next()
	var re *RowError
	if want := `unpaired UTF-16 surrogate escape \ud83d at byte 3 of the value`; !errors.As(err, &re) || !strings.HasSuffix(re.Detail, want) {
		t.Errorf("got %v; want a detail ending %q", err, want)
	}
}

// TestMaxTextBytes: the joined text (prefix, parts, newlines) is measured
// exactly; one byte over the limit is a text_too_long row.
func TestMaxTextBytes(t *testing.T) {
	lines := `{"id":"fits","title":"abc","text":"defg"}
{"id":"over","title":"abc","text":"defgh"}
{"id":"empty-title","title":"","text":"0123456789abcdefgh"}
`
	path := writeFile(t, t.TempDir(), "t.jsonl", []byte(lines))
	// "p: " + "abc" + "\n" + "defg" = 11 bytes
	r, err := Open([]string{path}, ReadOptions{TextFields: []string{"title", "text"}, Prefix: "p: ", MaxTextBytes: 11})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, r)
	compareOutcomes(t, got, []outcome{
		{Index: 0, Line: 1, ID: "fits", Text: "p: abc\ndefg"},
		{Index: 1, Line: 2, ID: "over", Reason: ReasonTextTooLong},
		{Index: 2, Line: 3, ID: "empty-title", Reason: ReasonTextTooLong},
	})
}

// TestPipeInputs reads JSONL (plain and gzip) from named pipes, as from
// <(zcat x.gz): every record arrives whole, and neither Count nor
// InputGuard opens the pipe before the Reader does. A Parquet file through
// a pipe is a clear file error.
func TestPipeInputs(t *testing.T) {
	var plain bytes.Buffer
	for i := range 300 {
		fmt.Fprintf(&plain, "{\"id\":\"%d\",\"text\":\"words %d\"}\n", i, i)
	}
	dir := t.TempDir()
	fifo := func(name string, content []byte) string {
		path := filepath.Join(dir, name)
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		go func() {
			f, err := os.OpenFile(path, os.O_WRONLY, 0) // blocks until the Reader opens it
			if err != nil {
				return
			}
			f.Write(content)
			f.Close()
		}()
		return path
	}
	for _, tc := range []struct {
		name    string
		content []byte
	}{{"plain.jsonl", plain.Bytes()}, {"gz.jsonl.gz", gzipBytes(t, plain.Bytes())}} {
		path := fifo(tc.name, tc.content)
		if est, err := Count([]string{path}); err != nil || est.JSONLBytes != -1 {
			t.Errorf("%s: Count = %+v, %v; want an unknown size", tc.name, est, err)
		}
		if g := files.InputGuard([]string{path}); !strings.Contains(g["input 1 "+path], "a pipe") {
			t.Errorf("%s: files.InputGuard = %v; want it marked as a pipe", tc.name, g)
		}
		r, err := Open([]string{path}, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, fes := readAll(t, r)
		if len(got) != 300 || len(fes) != 0 || got[0].Text != "words 0" || got[0].Reason != "" || got[299].ID != "299" {
			t.Errorf("%s: %d records, file errors %v, first %+v; want 300 whole records", tc.name, len(got), fes, got[0])
		}
	}
	path := fifo("table.parquet", []byte("PAR1 and more"))
	r, _ := Open([]string{path}, ReadOptions{})
	_, fes := readAll(t, r)
	if len(fes) != 1 || !strings.Contains(fes[0].Error(), "regular file") {
		t.Errorf("Parquet through a pipe: file errors %v; want one saying it must be a regular file", fes)
	}
}
