package cli

import (
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/synapse-embed/synapse/io/objstore/s3test"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/model/testmodels"
)

// Tests of the input formats and the checks made on inputs before any
// work: CSV and TSV read as the same corpus in JSON Lines is (equal
// vectors), their quoting, an unknown extension refused by name, and a
// text or id field the input does not have refused with the fields it has.

// writeDelimited writes rows (the first the header) as CSV, or TSV when
// comma is '\t', through encoding/csv (RFC 4180 quoting); gzip-compressed
// when path ends in .gz.
func writeDelimited(t *testing.T, path string, comma rune, rows [][]string) {
	t.Helper()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Comma = comma
	if err := w.WriteAll(rows); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	if strings.HasSuffix(path, ".gz") {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(data)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		data = z.Bytes()
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeArrowIPC writes string columns (rows[0] names them) as an Arrow
// IPC file of record batches of at most batch rows.
func writeArrowIPC(t *testing.T, path string, rows [][]string, batch int) {
	t.Helper()
	var fields []arrow.Field
	for _, name := range rows[0] {
		fields = append(fields, arrow.Field{Name: name, Type: arrow.BinaryTypes.String})
	}
	sc := arrow.NewSchema(fields, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(sc))
	if err != nil {
		t.Fatal(err)
	}
	for start := 1; start < len(rows); start += batch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		for _, r := range rows[start:min(start+batch, len(rows))] {
			for k, v := range r {
				b.Field(k).(*array.StringBuilder).Append(v)
			}
		}
		rec := b.NewRecordBatch()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		b.Release()
	}
	if err := errors.Join(w.Close(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

// csvCorpus is the generated corpus and a few documents whose fields need
// quoting (the delimiters, quotes, newlines), as JSON objects and as rows
// with a header.
func csvCorpus(n int) ([]map[string]any, [][]string) {
	var docs []map[string]any
	for _, d := range testmodels.Corpus(n) {
		docs = append(docs, d.Map())
	}
	docs = append(docs,
		map[string]any{"_id": "quoted", "title": `a "quoted" title, with a comma`, "text": "first line\nsecond line\nthird\tline"},
		map[string]any{"_id": "empty-title", "title": "", "text": "the text alone"},
		map[string]any{"_id": "x,y", "title": "commas, everywhere", "text": `ends with a quote "`})
	rows := [][]string{{"_id", "title", "text"}}
	for _, d := range docs {
		rows = append(rows, []string{d["_id"].(string), d["title"].(string), d["text"].(string)})
	}
	return docs, rows
}

func TestEmbedCSVParity(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t)
	docs, rows := csvCorpus(40)
	inputs := map[string]func(string){
		"c.jsonl":  func(p string) { writeJSONL(t, p, docs) },
		"c.csv":    func(p string) { writeDelimited(t, p, ',', rows) },
		"c.tsv":    func(p string) { writeDelimited(t, p, '\t', rows) },
		"c.csv.gz": func(p string) { writeDelimited(t, p, ',', rows) },
		"c.tsv.gz": func(p string) { writeDelimited(t, p, '\t', rows) },
		"c.arrow":  func(p string) { writeArrowIPC(t, p, rows, 16) },
	}
	outs := map[string][]outRow{}
	for _, name := range []string{"c.jsonl", "c.csv", "c.tsv", "c.csv.gz", "c.tsv.gz", "c.arrow"} {
		in := filepath.Join(dir, name)
		inputs[name](in)
		out := filepath.Join(dir, name+".arrow")
		res := runSynapse(t, nil, "embed", in, "-m", model, "-o", out, "--text-field", "title", "--text-field", "text", "--with-text", "--workers", "1")
		res.wantCode(t, exitOK)
		if r, e, f := res.counts(t); r != len(docs) || e != len(docs) || f != 0 {
			t.Errorf("%s: summary read/embedded/failed %d/%d/%d; want %d/%d/0", name, r, e, f, len(docs), len(docs))
		}
		_, outs[name] = readOutput(t, out)
	}
	want := outs["c.jsonl"]
	byID := rowsByID(want)
	if got := byID["quoted"]; len(got) != 1 || got[0].Text != "a \"quoted\" title, with a comma\nfirst line\nsecond line\nthird\tline" {
		t.Errorf("the quoted document's chunks %+v", got)
	}
	for name, got := range outs {
		if len(got) != len(want) {
			t.Errorf("%s: %d rows; the JSONL input gives %d", name, len(got), len(want))
			continue
		}
		for i := range got {
			if got[i].ID != want[i].ID || got[i].Text != want[i].Text || got[i].Hash != want[i].Hash || !slices.Equal(got[i].Emb, want[i].Emb) {
				t.Errorf("%s: row %d (%s chunk %d) differs from the JSONL input's (%s chunk %d)", name, i, got[i].ID, got[i].Chunk, want[i].ID, want[i].Chunk)
				break
			}
		}
	}
}

// TestEmbedCSVBadRows: rows encoding/csv cannot parse and rows with another
// field count than the header are malformed_csv rows of the errors file,
// named by their first line; the good rows around them are embedded, the
// ids as the file holds them. A byte order mark before the header is not
// part of the first column's name.
func TestEmbedCSVBadRows(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t)
	in := filepath.Join(dir, "bad.csv")
	data := "\xef\xbb\xbfid,text\n" +
		"a,\"spans\ntwo lines, \"\"quoted\"\"\"\n" + // lines 2-3
		"b,\"a bare \"quote\" inside\"\n" + // line 4: extraneous quote
		"c,one,two\n" + // line 5: three fields
		"\n" + // line 6: blank, not a record
		"d,\"\"\n" + // line 7: empty text
		",no id\n" + // line 8: empty id
		"e,last\n" // line 9
	if err := os.WriteFile(in, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bad.arrow")
	res := runSynapse(t, nil, "embed", in, "-m", model, "-o", out, "--with-text", "--workers", "1")
	res.wantCode(t, exitPartial)
	if r, e, f := res.counts(t); r != 6 || e != 3 || f != 3 {
		t.Errorf("summary read/embedded/failed %d/%d/%d; want 6/3/3", r, e, f)
	}
	var got []string
	for _, e := range readErrors(t, out+".errors.jsonl") {
		got = append(got, strings.Join([]string{strings.TrimPrefix(e.Source, dir+"/"), strconv.Itoa(*e.Line), e.Reason}, " "))
	}
	want := []string{"bad.csv 4 malformed_csv", "bad.csv 5 malformed_csv", "bad.csv 8 bad_id"}
	if !slices.Equal(got, want) {
		t.Errorf("errors %q; want %q", got, want)
	}
	_, rows := readOutput(t, out)
	texts := map[string]string{}
	for _, r := range rows {
		texts[r.ID] = r.Text
	}
	if texts["a"] != "spans\ntwo lines, \"quoted\"" || texts["d"] != "" || texts["e"] != "last" || len(texts) != 3 {
		t.Errorf("embedded texts %q", texts)
	}
}

// TestEmbedInputRefusedBeforeWork: an input extension synapse does not
// read, and a text or id field an input does not have, stop the run with
// exit 2 before any work: no output, no errors file, the message naming
// the file, the field, the fields it has and the flag to use.
// writeRefusedInputs writes TestEmbedInputRefusedBeforeWork's inputs:
// files with columns doc_id, heading, body in each format, JSON Lines files
// without some fields, files of extensions synapse does not read.
func writeRefusedInputs(t *testing.T, p func(string) string) {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "doc_id", Type: arrow.BinaryTypes.String},
		{Name: "heading", Type: arrow.BinaryTypes.String}, {Name: "body", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	for i := range 3 {
		b.Field(i).(*array.StringBuilder).AppendValues([]string{"d1", "d2"}, nil)
	}
	writeRecord(t, p("corpus.parquet"), b.NewRecordBatch())
	b.Release()
	writeDelimited(t, p("corpus.csv"), ',', [][]string{{"doc_id", "heading", "body"}, {"d1", "h", "b"}})
	writeArrowIPC(t, p("corpus.arrow"), [][]string{{"doc_id", "heading", "body"}, {"d1", "h", "b"}}, 1)
	writeDelimited(t, p("corpus.tsv.gz"), '\t', [][]string{{"doc_id", "heading", "body"}, {"d1", "h", "b"}})
	var many []map[string]any
	for i := range 150 {
		many = append(many, map[string]any{"id": strconv.Itoa(i % 10), "title": "t", "text": "x"})
	}
	writeJSONL(t, p("many.jsonl"), many)
	writeJSONL(t, p("few.jsonl"), []map[string]any{{"id": "1", "text": "x"}, {"id": "2", "text": "y", "extra": 1}})
	// "body" in row 2 only: the run goes on, the other rows are missing_field rows.
	writeJSONL(t, p("some.jsonl"), []map[string]any{{"id": "1", "text": "x"}, {"id": "2", "body": "y"}})
	for _, name := range []string{"notes.txt", "stream.arrows", "table.xlsx"} {
		if err := os.WriteFile(p(name), []byte(`{"id":"1","text":"json inside"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEmbedInputRefusedBeforeWork(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	writeRefusedInputs(t, p)

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"parquet text", []string{p("corpus.parquet")},
			p("corpus.parquet") + ` has no column "text"; its columns are doc_id, heading, body: use --text-field`},
		{"parquet id", []string{p("corpus.parquet"), "--text-field", "heading", "--text-field", "body", "--id-field", "id"},
			p("corpus.parquet") + ` has no column "id"; its columns are doc_id, heading, body: use --id-field`},
		{"csv text", []string{p("corpus.csv"), "--text-field", "heading", "--text-field", "title"},
			p("corpus.csv") + ` has no column "title"; its columns are doc_id, heading, body: use --text-field`},
		{"tsv.gz id", []string{p("corpus.tsv.gz"), "--text-field", "body", "--id-field", "_id"},
			p("corpus.tsv.gz") + ` has no column "_id"; its columns are doc_id, heading, body: use --id-field`},
		{"jsonl first 100 rows", []string{p("many.jsonl"), "--text-field", "body"},
			p("many.jsonl") + ` has no field "body" in its first 100 rows; they have id, text, title: use --text-field`},
		{"jsonl id, fewer rows", []string{p("some.jsonl"), p("few.jsonl"), "--text-field", "text", "--id-field", "doc_id"},
			p("some.jsonl") + ` has no field "doc_id" in its first 2 rows; they have body, id, text: use --id-field`},
		{"jsonl second input", []string{p("many.jsonl"), p("few.jsonl"), "--text-field", "title"},
			p("few.jsonl") + ` has no field "title" in its first 2 rows; they have extra, id, text: use --text-field`},
		{"text extension", []string{p("notes.txt")}, `input ` + p("notes.txt") + `: unknown input format ".txt": synapse reads .parquet, .arrow (Arrow IPC), .jsonl`},
		{"arrow text", []string{p("corpus.arrow"), "--text-field", "heading", "--text-field", "text"},
			p("corpus.arrow") + ` has no column "text"; its columns are doc_id, heading, body: use --text-field`},
		{"arrow id", []string{p("corpus.arrow"), "--text-field", "body", "--id-field", "id"},
			p("corpus.arrow") + ` has no column "id"; its columns are doc_id, heading, body: use --id-field`},
		{"arrow stream", []string{p("stream.arrows")}, `input ` + p("stream.arrows") + `: the Arrow IPC stream format is not read`},
		{"xlsx after a good input", []string{p("few.jsonl"), p("table.xlsx")}, `unknown input format ".xlsx"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := p(strings.ReplaceAll(tc.name, " ", "-") + ".arrow")
			res := runSynapse(t, nil, append([]string{"embed", "-m", model, "-o", out}, tc.args...)...)
			res.wantCode(t, exitUsage)
			if !strings.Contains(res.stderr, tc.want) {
				t.Errorf("stderr %q; want %q", res.stderr, tc.want)
			}
			for _, f := range []string{out, out + ".errors.jsonl"} {
				if _, err := os.Stat(f); err == nil {
					t.Errorf("%s written by a refused run", f)
				}
			}
		})
	}

	t.Run("some rows lack the field", func(t *testing.T) {
		out := p("some.arrow")
		res := runSynapse(t, nil, "embed", p("some.jsonl"), "-m", model, "-o", out, "--text-field", "body", "-q")
		res.wantCode(t, exitPartial)
		errs := readErrors(t, out+".errors.jsonl")
		if len(errs) != 1 || errs[0].Reason != "missing_field" {
			t.Errorf("errors %+v; want one missing_field row", errs)
		}
	})
}

// TestGenerateRerankInputsRefusedBeforeWork: generate checks --text-field,
// rerank its query fields, and refuses CSV rows, before any work.
func TestGenerateRerankInputsRefusedBeforeWork(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	writeRefusedInputs(t, p)
	t.Run("generate", func(t *testing.T) { // checked before the model is loaded
		out := p("gen.jsonl")
		res := runSynapse(t, nil, "generate", p("corpus.csv"), "-m", model, "-o", out, "--text-field", "prompt")
		res.wantCode(t, exitUsage)
		if want := p("corpus.csv") + ` has no column "prompt"; its columns are doc_id, heading, body: use --text-field`; !strings.Contains(res.stderr, want) {
			t.Errorf("stderr %q; want %q", res.stderr, want)
		}
	})

	t.Run("rerank csv", func(t *testing.T) {
		writeDelimited(t, p("pairs.csv"), ',', [][]string{{"query_id", "query", "doc_id", "text"}, {"q", "a", "d", "b"}})
		out := p("rerank.arrow")
		res := runSynapse(t, nil, "rerank", p("pairs.csv"), "-m", model, "-o", out)
		res.wantCode(t, exitUsage)
		if want := "input " + p("pairs.csv") + ": rerank reads its query rows from Parquet or JSON Lines, not CSV, TSV or Arrow IPC"; !strings.Contains(res.stderr, want) {
			t.Errorf("stderr %q; want %q", res.stderr, want)
		}
	})

	t.Run("rerank query field", func(t *testing.T) {
		writeJSONL(t, p("grouped.jsonl"), []map[string]any{{"qid": "q1", "query": "a", "candidates": []any{map[string]any{"id": "d", "text": "b"}}}})
		res := runSynapse(t, nil, "rerank", p("grouped.jsonl"), "-m", model, "-o", p("rerank.arrow"))
		res.wantCode(t, exitUsage)
		if want := p("grouped.jsonl") + ` has no field "query_id" in its first row; they have candidates, qid, query: use --query-id-field`; !strings.Contains(res.stderr, want) {
			t.Errorf("stderr %q; want %q", res.stderr, want)
		}
	})
}

// TestEmbedCSVShards: a sharded run over CSV, TSV and Arrow IPC files gives
// each file whole to one shard (a quoted field may hold a newline, so a byte range
// cannot be cut safely), and the merged parts are the single run's rows
// and errors file.
func TestEmbedCSVShards(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t)
	_, rows := csvCorpus(30)
	bad := [][]string{rows[0]} // other ids than a.csv's, a short row among them
	for i, r := range rows[1:6] {
		bad = append(bad, []string{"c-" + r[0], r[1], r[2]})
		if i == 3 {
			bad = append(bad, []string{"short row"})
		}
	}
	inputs := []string{filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.tsv.gz"), filepath.Join(dir, "c.csv"), filepath.Join(dir, "d.arrow")}
	writeDelimited(t, inputs[0], ',', append(rows[:1:1], rows[1:15]...))
	writeDelimited(t, inputs[1], '\t', append(rows[:1:1], rows[15:]...))
	arrowRows := [][]string{rows[0]}
	for _, r := range rows[1:11] {
		arrowRows = append(arrowRows, []string{"d-" + r[0], r[1], r[2]})
	}
	writeArrowIPC(t, inputs[3], arrowRows, 4)
	writeDelimited(t, inputs[2], ',', bad)
	embed := func(extra ...string) embedResult {
		args := append([]string{"embed"}, inputs...)
		return runSynapse(t, nil, append(append(args, "-m", model, "--workers", "1", "-q", "--id-field", "_id"), extra...)...)
	}
	single := filepath.Join(dir, "single.arrow")
	embed("-o", single).wantCode(t, exitPartial)
	out := filepath.Join(dir, "out.arrow")
	for i := range 3 {
		if res := embed("-o", out, "--shard", strconv.Itoa(i)+"/3"); res.code != exitOK && res.code != exitPartial {
			res.wantCode(t, exitPartial)
		}
	}
	merged := filepath.Join(dir, "merged.arrow")
	runSynapse(t, nil, "merge", out, "-o", merged).wantCode(t, exitPartial)
	_, want := readOutput(t, single)
	_, got := readOutput(t, merged)
	sameRows(t, "merged vs single run", got, want)
	wantErrs, _ := os.ReadFile(single + ".errors.jsonl")
	gotErrs, _ := os.ReadFile(merged + ".errors.jsonl")
	if !bytes.Equal(gotErrs, wantErrs) || !bytes.Contains(wantErrs, []byte(`"line":6,"index":37,"reason":"malformed_csv"`)) {
		t.Errorf("merged errors file differs from the single run's, or lacks the short row:\n%s\nwant:\n%s", gotErrs, wantErrs)
	}
	for f := range inputs {
		takers := 0
		for i := range 3 {
			m, err := output.ReadManifest(filepath.Join(dir, "out.shard-"+strconv.Itoa(i)+"-of-3.json"))
			if err != nil {
				t.Fatal(err)
			}
			if in := m.Inputs[f]; !in.Skip {
				takers++
				if want := map[bool]string{true: "arrow", false: "csv"}[f == 3]; in.Kind != want {
					t.Errorf("%s: part kind %q; want %s", inputs[f], in.Kind, want)
				}
			}
		}
		if takers != 1 {
			t.Errorf("%s read by %d shards; want 1", inputs[f], takers)
		}
	}
}

// TestS3CSV: CSV, .tsv.gz and Arrow IPC objects in a bucket are read as
// the same files on disk are (equal vectors), and their header or schema
// is checked before any work there too.
func TestS3CSV(t *testing.T) {
	srv := s3test.Start(t, "corpus")
	dir := t.TempDir()
	model := tinyModel(t)
	_, rows := csvCorpus(20)
	inputs := []string{filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.tsv.gz"), filepath.Join(dir, "c.arrow")}
	writeDelimited(t, inputs[0], ',', append(rows[:1:1], rows[1:12]...))
	writeDelimited(t, inputs[1], '\t', append(rows[:1:1], rows[12:]...))
	arrowRows := [][]string{rows[0]}
	for _, r := range rows[1:9] {
		arrowRows = append(arrowRows, []string{"c-" + r[0], r[1], r[2]})
	}
	writeArrowIPC(t, inputs[2], arrowRows, 3)
	objects := []string{"s3://corpus/in/a.csv", "s3://corpus/in/b.tsv.gz", "s3://corpus/in/c.arrow"}
	for _, in := range inputs {
		srv.PutFile(t, "corpus", "in/"+filepath.Base(in), in)
	}
	embed := func(out string, args ...string) embedResult {
		return runSynapse(t, srv.Env(), append([]string{"embed", "-m", model, "--workers", "1", "-q", "-o", out}, args...)...)
	}
	local, remote := filepath.Join(dir, "local.arrow"), filepath.Join(dir, "remote.arrow")
	embed(local, append([]string{"--text-field", "title", "--text-field", "text"}, inputs...)...).wantCode(t, exitOK)
	embed(remote, append([]string{"--text-field", "title", "--text-field", "text"}, objects...)...).wantCode(t, exitOK)
	_, want := readOutput(t, local)
	_, got := readOutput(t, remote)
	if len(want) == 0 {
		t.Fatal("no rows")
	}
	sameRows(t, "s3:// CSV vs local CSV", got, want)
	res := embed(filepath.Join(dir, "x.arrow"), "--text-field", "body", objects[1])
	res.wantCode(t, exitUsage)
	if w := objects[1] + ` has no column "body"; its columns are _id, title, text: use --text-field`; !strings.Contains(res.stderr, w) {
		t.Errorf("stderr %q; want %q", res.stderr, w)
	}
	res = embed(filepath.Join(dir, "x.arrow"), "--id-field", "id", objects[2])
	res.wantCode(t, exitUsage)
	if w := objects[2] + ` has no column "id"; its columns are _id, title, text: use --id-field`; !strings.Contains(res.stderr, w) {
		t.Errorf("stderr %q; want %q", res.stderr, w)
	}
}
