package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/synapse-embed/synapse/model/testmodels"
)

// TestEmbedIDs: a row without an id field is named #INDEX, a real id of
// that form is refused, and a repeated id is a duplicate_id row; the
// summary says so, and the output holds each id once.
func TestEmbedIDs(t *testing.T) {
	dir := t.TempDir()
	docs := testmodels.Corpus(6)
	var b bytes.Buffer
	for _, row := range []map[string]any{
		{"id": "a", "text": docs[0].Text},
		{"text": docs[1].Text}, // #1
		{"id": "a", "text": docs[2].Text},
		{"id": "#1", "text": docs[3].Text},
		{"id": "", "text": docs[4].Text},
		{"id": nil, "text": docs[5].Text},
		{"id": "b", "text": docs[5].Text},
	} {
		line, _ := json.Marshal(row)
		b.Write(append(line, '\n'))
	}
	in := filepath.Join(dir, "ids.jsonl")
	os.WriteFile(in, b.Bytes(), 0o644)
	out := filepath.Join(dir, "out.arrow")
	res := runSynapse(t, nil, "embed", in, "-m", tinyModel(t), "-o", out, "--workers", "1")
	res.wantCode(t, exitPartial)
	if read, ok, failed := res.counts(t); read != 7 || ok != 3 || failed != 4 {
		t.Errorf("summary: %d = %d + %d; want 7 = 3 embedded + 4 in errors", read, ok, failed)
	}
	for _, want := range []string{"1 rows without an id field were named #INDEX", "1 rows repeat the id of an earlier row of the run: duplicate_id"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, res.stdout)
		}
	}
	var got []string
	for _, e := range readErrors(t, out+".errors.jsonl") {
		got = append(got, fmt.Sprintf("%d %s", *e.Line, e.Reason))
	}
	if want := "3 duplicate_id 4 bad_id 5 bad_id 6 bad_id"; strings.Join(got, " ") != want {
		t.Errorf("errors file: %v; want %s", got, want)
	}
	ids := map[string]bool{}
	_, rows := readOutput(t, out)
	for _, r := range rows {
		ids[r.ID] = true
	}
	if len(ids) != 3 || !ids["a"] || !ids["#1"] || !ids["b"] {
		t.Errorf("output ids %v; want a, #1 (the row without an id) and b", ids)
	}
}

// TestEmbedCorruptRowGroup: a Parquet file of 3 row groups of 100 rows
// whose middle group cannot be decoded: its 100 rows are errors naming the
// group and its rows, the groups after it are embedded, and the summary
// counts the 300 rows the footer has.
func TestEmbedCorruptRowGroup(t *testing.T) {
	dir := t.TempDir()
	docs := testmodels.Corpus(300)
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	for _, d := range docs {
		bld.Field(0).(*array.StringBuilder).Append(d.ID)
		bld.Field(1).(*array.StringBuilder).Append(d.Title)
	}
	in := filepath.Join(dir, "c.parquet")
	writeRecordGroups(t, in, bld.NewRecordBatch(), 100)
	pf, err := file.OpenParquetFile(in, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := pf.NumRowGroups(); n != 3 {
		t.Fatalf("%d row groups; want 3", n)
	}
	cc, _ := pf.MetaData().RowGroup(1).ColumnChunk(1)
	off := cc.DataPageOffset()
	pf.Close()
	f, _ := os.OpenFile(in, os.O_RDWR, 0)
	f.WriteAt(bytes.Repeat([]byte{0xee}, 64), off)
	f.Close()

	out := filepath.Join(dir, "out.arrow")
	res := runSynapse(t, nil, "embed", in, "-m", tinyModel(t), "-o", out, "--workers", "1")
	res.wantCode(t, exitPartial)
	if read, ok, failed := res.counts(t); read != 300 || ok != 200 || failed != 100 {
		t.Errorf("summary: %d = %d + %d; want 300 = 200 embedded + 100 in errors", read, ok, failed)
	}
	errs := readErrors(t, out+".errors.jsonl")
	if len(errs) != 100 || *errs[0].Row != 100 || *errs[99].Row != 199 || errs[0].Reason != "corrupt_row_group" ||
		!strings.Contains(errs[0].Detail, "row group 1 (rows 100-199") {
		t.Fatalf("errors file: %d lines, first %+v; want rows 100-199 as corrupt_row_group naming row group 1", len(errs), errs[0])
	}
	_, rows := readOutput(t, out)
	if len(rows) == 0 || rows[len(rows)-1].ID != docs[299].ID {
		t.Errorf("output ends with %+v; want the last row group's rows (%s)", rows[len(rows)-1:], docs[299].ID)
	}
}
