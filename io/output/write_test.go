package output

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/record"
)

const testDims = 8

var testMeta = map[string]string{"synapse.model": "ref-bert-embed.gguf", "synapse.dims": "8", "synapse.version": "test"}

// testDoc is the deterministic result of document i: i%4 chunks, and an
// error record instead of rows when i%4 == 0.
func testDoc(i int64) (EmbedRows, []*record.RowError) {
	d := record.Doc{Source: "corpus.jsonl", Line: int(i) + 1, Index: i, ID: "doc-" + strconv.FormatInt(i, 10)}
	n := int(i % 4)
	if n == 0 {
		return nil, []*record.RowError{d.Error(record.ReasonEmptyText, "empty")}
	}
	rows := make(EmbedRows, n)
	for c := range rows {
		emb := make([]float32, testDims)
		for k := range emb {
			emb[k] = float32(i)*0.5 + float32(c) + float32(k)/10
		}
		rows[c] = EmbedRow{ID: d.ID, Chunk: int32(c), TokenStart: int32(c * 10), TokenEnd: int32(c*10 + 12),
			ByteStart: int32(c * 40), ByteEnd: int32(c*40 + 50), CPStart: int32(c * 40), CPEnd: int32(c*40 + 50), NTokens: 12, Embedding: emb}
	}
	var errs []*record.RowError
	if i%7 == 3 {
		errs = append(errs, d.ChunkError(n, "worker_crashed", "worker exited", "last log line"))
	}
	return rows, errs
}

func putDocs(t testing.TB, w *Writer, from, to int64) {
	t.Helper()
	for i := from; i < to; i++ {
		rows, errs := testDoc(i)
		if err := w.Put(i, i, rows, errs); err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
	}
}

// readArrowFile returns the rows of an Arrow IPC file, its batch lengths and
// schema, under a checked allocator.
func readArrowFile(t *testing.T, path string) (EmbedRows, []int64, *arrow.Schema) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows EmbedRows
	var lens []int64
	for i := range r.NumRecords() {
		rec, err := r.RecordBatch(i)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, recordRows(rec)...)
		lens = append(lens, rec.NumRows())
	}
	return rows, lens, r.Schema()
}

// recordRows converts a record batch of the output schema back to Rows.
func recordRows(rec arrow.RecordBatch) EmbedRows {
	ids := rec.Column(0).(*array.String)
	col := func(i int) *array.Int32 { return rec.Column(i).(*array.Int32) }
	emb := rec.Column(10).(*array.FixedSizeList)
	vals := emb.ListValues().(*array.Float32)
	dims := int(emb.DataType().(*arrow.FixedSizeListType).Len())
	var rows EmbedRows
	for i := range int(rec.NumRows()) {
		e := append([]float32(nil), vals.Float32Values()[(emb.Offset()+i)*dims:(emb.Offset()+i+1)*dims]...)
		rows = append(rows, EmbedRow{ID: ids.Value(i), Chunk: col(1).Value(i), TokenStart: col(3).Value(i), TokenEnd: col(4).Value(i),
			ByteStart: col(5).Value(i), ByteEnd: col(6).Value(i), CPStart: col(7).Value(i), CPEnd: col(8).Value(i), NTokens: col(9).Value(i), Embedding: e})
	}
	return rows
}

func wantRows(from, to int64) EmbedRows {
	var rows EmbedRows
	for i := from; i < to; i++ {
		r, _ := testDoc(i)
		rows = append(rows, r...)
	}
	return rows
}

func TestWriterArrow(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.arrow")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	w, err := Create(out, WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 16, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	putDocs(t, w, 0, 100)
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("before Commit: stat %s: got %v; want not exist", out, err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, lens, sc := readArrowFile(t, out)
	if !reflect.DeepEqual(rows, wantRows(0, 100)) {
		t.Errorf("got %d rows; want %d, equal", len(rows), len(wantRows(0, 100)))
	}
	for i, n := range lens[:len(lens)-1] {
		if n < 16 || n > 16+2 {
			t.Errorf("batch %d has %d rows; want 16 to 18 (cut at a document end)", i, n)
		}
	}
	if !sc.Equal(EmbedSchema(testDims, nil)) {
		t.Errorf("got schema %s; want %s", sc, EmbedSchema(testDims, nil))
	}
	for k, v := range testMeta {
		if got, ok := sc.Metadata().GetValue(k); !ok || got != v {
			t.Errorf("metadata %q: got %q; want %q", k, got, v)
		}
	}
	if got := sc.Field(sc.FieldIndices(ColEmbedding)[0]).Type.String(); got != "fixed_size_list<item: float32>[8]" {
		t.Errorf("embedding type: got %s", got)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	if want := []string{out, out + ".errors.jsonl"}; !reflect.DeepEqual(names, want) {
		t.Errorf("files after Commit: got %v; want %v", names, want)
	}
	if err := w.Put(100, 100, nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Commit: got %v; want ErrClosed", err)
	}
}

func TestWriterParquet(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.parquet")
	w, err := Create(out, WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 32})
	if err != nil {
		t.Fatal(err)
	}
	putDocs(t, w, 0, 90)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, meta := readParquetFile(t, out)
	if !reflect.DeepEqual(rows, wantRows(0, 90)) {
		t.Errorf("got %d rows; want %d, equal", len(rows), len(wantRows(0, 90)))
	}
	for k, v := range testMeta {
		if got := meta[k]; got != v {
			t.Errorf("metadata %q: got %q; want %q", k, got, v)
		}
	}
}

// readParquetFile returns the rows and key-value metadata of a Parquet output.
func readParquetFile(t *testing.T, path string) (EmbedRows, map[string]string) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	meta := map[string]string{}
	for _, kv := range pf.MetaData().KeyValueMetadata() {
		meta[kv.Key] = *kv.Value
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1000}, mem)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	var rows EmbedRows
	for rr.Next() {
		rows = append(rows, recordRows(rr.RecordBatch())...)
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return rows, meta
}

func TestWriterErrorsFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.arrow")
	errPath := out + ".errs"
	w, err := Create(out, WriterOptions{Schema: EmbedSchema(testDims, nil), ErrorsPath: errPath})
	if err != nil {
		t.Fatal(err)
	}
	jd := record.Doc{Source: "a.jsonl", Line: 3, Index: 2, ID: "x"}
	pd := record.Doc{Source: "b.parquet", Row: 0, Index: 5}
	errs := []*record.RowError{jd.Error(record.ReasonMalformedJSON, "json: bad"), jd.ChunkError(1, "oom", "out of memory", "tail")}
	if err := w.Put(2, 2, nil, errs); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(5, 5, nil, []*record.RowError{pd.Error(record.ReasonNullText, "null")}); err != nil {
		t.Fatal(err)
	}
	if err := w.PutFileError(&record.FileError{Source: "c.parquet", RowGroup: 3, Index: 5, Err: io.ErrUnexpectedEOF}); !errors.Is(err, ErrOutOfOrder) {
		t.Errorf("PutFileError at a done index: got %v; want ErrOutOfOrder", err)
	}
	if err := w.PutFileError(&record.FileError{Source: "c.parquet", RowGroup: 3, Index: 6, Err: io.ErrUnexpectedEOF}); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(errPath)
	want := `{"source":"a.jsonl","line":3,"index":2,"id":"x","reason":"malformed_json","detail":"json: bad"}
{"source":"a.jsonl","line":3,"index":2,"id":"x","reason":"oom","detail":"out of memory","chunk":1,"worker_log":"tail"}
{"source":"b.parquet","row":0,"index":5,"reason":"null_text","detail":"null"}
{"source":"c.parquet","row_group":3,"index":6,"reason":"file_error","detail":"unexpected EOF"}
`
	if string(b) != want {
		t.Errorf("errors file:\ngot  %s\nwant %s", b, want)
	}
	rows, _, _ := readArrowFile(t, out)
	if len(rows) != 0 {
		t.Errorf("got %d rows; want 0", len(rows))
	}
}

func TestWriterPutChecks(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(filepath.Join(dir, "o.arrow"), WriterOptions{Schema: EmbedSchema(testDims, nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	putDocs(t, w, 0, 3)
	if err := w.Put(2, 2, nil, nil); !errors.Is(err, ErrOutOfOrder) {
		t.Errorf("Put(2) after 2: got %v; want ErrOutOfOrder", err)
	}
	if err := w.Put(3, 3, EmbedRows{{Embedding: make([]float32, 3)}}, nil); err == nil {
		t.Errorf("Put with 3 dims: got no error; want one")
	}
	if _, err := Create(filepath.Join(dir, "p.arrow"), WriterOptions{}); err == nil {
		t.Errorf("Create with 0 dims: got no error; want one")
	}
}

func TestWriterAbort(t *testing.T) {
	for _, name := range []string{"o.arrow", "o.parquet"} {
		dir := t.TempDir()
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		w, err := Create(filepath.Join(dir, name), WriterOptions{Schema: EmbedSchema(testDims, nil), BatchRows: 4, Allocator: mem})
		if err != nil {
			t.Fatal(err)
		}
		putDocs(t, w, 0, 20)
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 0 {
			t.Errorf("%s: files after Abort: %v; want none", name, names)
		}
		mem.AssertSize(t, 0)
	}
}

// The helper process: resumes or starts a checkpointed run on
// DATAIO_HELPER_OUT, puts documents up to DATAIO_HELPER_KILL_AT and kills
// itself with SIGKILL, leaving the files as a crash would.
func TestHelperProcess(t *testing.T) {
	out := os.Getenv("DATAIO_HELPER_OUT")
	if out == "" {
		t.Skip("helper process only")
	}
	killAt, _ := strconv.ParseInt(os.Getenv("DATAIO_HELPER_KILL_AT"), 10, 64)
	opts := WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 16}
	if os.Getenv("DATAIO_HELPER_TICK") != "" {
		tickEveryPut(&opts)
	}
	w, st, err := OpenCheckpointed(out, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	putDocs(t, w, st.NextIndex, killAt)
	if os.Getenv("DATAIO_HELPER_IN_COMMIT") != "" {
		killInCommit(w, out)
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the kill is asynchronous
}

// killInCommit commits w and SIGKILLs the process when the final output
// is complete in its temporary file, before it is renamed into place.
func killInCommit(w *Writer, out string) {
	testHookBeforePublish = func() {
		if m, _ := filepath.Glob(out + files.TempMarker + "*"); len(m) == 0 {
			fmt.Fprintln(os.Stderr, "no temporary file beside", out)
			os.Exit(4)
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the kill is asynchronous
	}
	w.Commit()
	fmt.Fprintln(os.Stderr, "commit finished before the kill")
	os.Exit(3)
}

// crashAt runs the helper process until it has put documents up to killAt
// and killed itself.
func crashAt(t *testing.T, out string, killAt int64, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "DATAIO_HELPER_OUT="+out, "DATAIO_HELPER_KILL_AT="+strconv.FormatInt(killAt, 10))
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper: got %v (%s); want killed by SIGKILL", err, stderr.Bytes())
	}
}

// uninterrupted writes documents [0, n) in one checkpointed run and returns
// the output's rows and batch lengths and the errors file.
func uninterrupted(t *testing.T, n int64, name string) (EmbedRows, []int64, []byte, []byte) {
	out := filepath.Join(t.TempDir(), name)
	w, st, err := OpenCheckpointed(out, WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 16})
	if err != nil || st.Resumed {
		t.Fatalf("OpenCheckpointed: %+v, %v", st, err)
	}
	putDocs(t, w, 0, n)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, lens, _ := readArrowFile(t, out)
	errs, _ := os.ReadFile(out + ".errors.jsonl")
	raw, _ := os.ReadFile(out)
	return rows, lens, errs, raw
}

func TestCheckpointResume(t *testing.T) {
	const n = 300
	wantR, wantLens, wantErrs, wantRaw := uninterrupted(t, n, "ref.arrow")
	if !reflect.DeepEqual(wantR, wantRows(0, n)) {
		t.Fatalf("uninterrupted checkpointed run: rows differ from the input")
	}
	for _, tc := range []struct {
		name   string
		kills  []int64
		damage func(t *testing.T, out string) // applied after the kills
	}{
		{"killed once", []int64{137}, nil},
		{"killed twice", []int64{50, 211}, nil},
		{"killed before the first batch", []int64{3}, nil},
		{"torn batch after the checkpoint", []int64{137}, tearPartial},
		{"killed at the end", []int64{n}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.arrow")
			for _, k := range tc.kills {
				crashAt(t, out, k)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after a crash: stat %s: %v; want not exist", out, err)
			}
			if tc.damage != nil {
				tc.damage(t, out)
			}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			w, st, err := OpenCheckpointed(out, WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 16, Allocator: mem})
			if err != nil {
				t.Fatal(err)
			}
			last := tc.kills[len(tc.kills)-1]
			if !st.Resumed || st.NextIndex > last || (last > 40 && st.NextIndex < last-20) {
				t.Errorf("resume state %+v after a kill at %d; want NextIndex a little below it", st, last)
			}
			if got := int64(len(wantRows(0, st.NextIndex))); st.Rows != got {
				t.Errorf("resume state rows %d; want %d", st.Rows, got)
			}
			putDocs(t, w, st.NextIndex, n)
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			rows, lens, _ := readArrowFile(t, out)
			errs, _ := os.ReadFile(out + ".errors.jsonl")
			if !reflect.DeepEqual(rows, wantR) || !reflect.DeepEqual(lens, wantLens) || !bytes.Equal(errs, wantErrs) {
				t.Errorf("resumed output differs: %d rows in batches %v, %d error bytes; want %d rows in %v, %d bytes",
					len(rows), lens, len(errs), len(wantR), wantLens, len(wantErrs))
			}
			if raw, _ := os.ReadFile(out); !bytes.Equal(raw, wantRaw) {
				t.Errorf("resumed Arrow file is not byte-for-byte the uninterrupted one")
			}
			names, _ := filepath.Glob(filepath.Join(filepath.Dir(out), "*"))
			if want := []string{out, out + ".errors.jsonl"}; !reflect.DeepEqual(names, want) {
				t.Errorf("files after Commit: got %v; want %v", names, want)
			}
		})
	}
}

// tearPartial appends half a record batch to the partial stream and half a
// line to the partial errors file, as a kill in the middle of a write would.
func tearPartial(t *testing.T, out string) {
	rows, _ := testDoc(999)
	sc := EmbedSchema(testDims, testMeta)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	if err := rows.AppendTo(b); err != nil {
		t.Fatal(err)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	s := &streamSink{bw: bufio.NewWriter(&buf), mem: memory.DefaultAllocator}
	if err := s.write(rec); err != nil {
		t.Fatal(err)
	}
	s.bw.Flush()
	appendTo(t, PartialPath(out), buf.Bytes()[:buf.Len()/2])
	appendTo(t, out+".errors.jsonl.partial", []byte(`{"source":"x","li`))
}

func appendTo(t *testing.T, path string, b []byte) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(b)
	f.Close()
}

// tickEveryPut makes opts checkpoint by time after every Put: its clock
// moves a second at every reading.
func tickEveryPut(opts *WriterOptions) {
	var now time.Time
	opts.CheckpointEvery = time.Second
	opts.Now = func() time.Time { now = now.Add(time.Second); return now }
}

// TestCheckpointByTime: a writer checkpointing after every document (by
// its clock) resumes exactly where it was killed, and its output, in every
// format, is byte for byte that of a run checkpointing every BatchRows
// rows only: Commit joins the open pieces into the batches they cut.
func TestCheckpointByTime(t *testing.T) {
	const n = 150
	for _, name := range []string{"out.arrow", "out.parquet", "out.jsonl"} {
		ref := filepath.Join(t.TempDir(), name)
		w, _, err := OpenCheckpointed(ref, WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 16})
		if err != nil {
			t.Fatal(err)
		}
		putDocs(t, w, 0, n)
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		wantRaw, _ := os.ReadFile(ref)
		wantErrs, _ := os.ReadFile(ref + ".errors.jsonl")
		for _, kills := range [][]int64{{37}, {5, 6, 90}, {16}, {n}} {
			t.Run(fmt.Sprintf("%s/killed at %v", name, kills), func(t *testing.T) {
				out := filepath.Join(t.TempDir(), name)
				for _, k := range kills {
					crashAt(t, out, k, "DATAIO_HELPER_TICK=1")
				}
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				opts := WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 16, Allocator: mem}
				tickEveryPut(&opts)
				w, st, err := OpenCheckpointed(out, opts)
				if err != nil {
					t.Fatal(err)
				}
				last := kills[len(kills)-1]
				if st.NextIndex != last {
					t.Errorf("resumed at %d; want %d (a checkpoint after every document)", st.NextIndex, last)
				}
				if got := int64(len(wantRows(0, last))); st.Rows != got || w.CheckpointedRows() != got {
					t.Errorf("resume state rows %d, checkpointed %d; want %d", st.Rows, w.CheckpointedRows(), got)
				}
				putDocs(t, w, st.NextIndex, n)
				if err := w.Commit(); err != nil {
					t.Fatal(err)
				}
				raw, _ := os.ReadFile(out)
				errs, _ := os.ReadFile(out + ".errors.jsonl")
				if !bytes.Equal(raw, wantRaw) || !bytes.Equal(errs, wantErrs) {
					t.Errorf("output %d bytes, errors %d bytes; want the uninterrupted run's %d and %d, byte for byte",
						len(raw), len(errs), len(wantRaw), len(wantErrs))
				}
			})
		}
	}
}

func TestCheckpointParquetOutput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.parquet")
	crashAt(t, out, 77) // the helper writes with the format of out's extension
	w, st, err := OpenCheckpointed(out, WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 16})
	if err != nil || !st.Resumed {
		t.Fatalf("OpenCheckpointed: %+v, %v", st, err)
	}
	putDocs(t, w, st.NextIndex, 120)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, meta := readParquetFile(t, out)
	if !reflect.DeepEqual(rows, wantRows(0, 120)) || meta["synapse.model"] != testMeta["synapse.model"] {
		t.Errorf("got %d rows, metadata %v; want %d rows and the run's metadata", len(rows), meta, len(wantRows(0, 120)))
	}
}

func TestCheckpointRefusals(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.arrow")
	crashAt(t, out, 100)
	opts := WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 16}

	other := map[string]string{"synapse.model": "another.gguf"}
	for name, o := range map[string]WriterOptions{
		"metadata":   {Schema: EmbedSchema(testDims, other), BatchRows: 16},
		"dims":       {Schema: EmbedSchema(testDims+1, testMeta), BatchRows: 16},
		"batch rows": {Schema: EmbedSchema(testDims, testMeta), BatchRows: 32},
	} {
		if _, _, err := OpenCheckpointed(out, o); !errors.Is(err, ErrResumeMismatch) {
			t.Errorf("other %s: got %v; want ErrResumeMismatch", name, err)
		}
	}

	w, _, err := OpenCheckpointed(out, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenCheckpointed(out, opts); err == nil {
		t.Errorf("second OpenCheckpointed while the first is open: got no error; want one")
	}
	if err := RemoveResumeFiles(out, "", ""); err == nil {
		t.Errorf("RemoveResumeFiles while a writer holds them: got no error; want one")
	}
	if _, err := os.Stat(PartialPath(out)); err != nil {
		t.Errorf("the running writer's partial file is gone: %v", err)
	}
	w.Abort()

	var cp checkpointFile
	b, _ := os.ReadFile(CheckpointPath(out))
	json.Unmarshal(b, &cp)
	if err := os.Truncate(PartialPath(out), cp.StreamBytes-1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenCheckpointed(out, opts); !errors.Is(err, ErrCheckpointCorrupt) {
		t.Errorf("partial shorter than the checkpoint: got %v; want ErrCheckpointCorrupt", err)
	}
	if err := RemoveResumeFiles(out, "", ""); err != nil {
		t.Fatal(err)
	}
	w, st, err := OpenCheckpointed(out, opts)
	if err != nil || st.Resumed {
		t.Fatalf("after RemoveResumeFiles: got %+v, %v; want a fresh run", st, err)
	}
	if err := w.Discard(); err != nil {
		t.Fatal(err)
	}
	if names, _ := filepath.Glob(filepath.Join(filepath.Dir(out), "*")); len(names) != 0 {
		t.Errorf("files after Discard: %v; want none", names)
	}
}

// TestCheckpointGuard refuses a resume whose ResumeGuard differs from the
// interrupted run's, naming the key, and accepts the same guard.
func TestCheckpointGuard(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.arrow")
	guard := map[string]string{"input 1 a.jsonl": "10 bytes", "input 2 b.jsonl": "20 bytes"}
	opts := WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 16, ResumeGuard: guard}
	w, _, err := OpenCheckpointed(out, opts)
	if err != nil {
		t.Fatal(err)
	}
	putDocs(t, w, 0, 40)
	w.Abort()

	for name, tc := range map[string]struct {
		guard map[string]string
		want  string
	}{
		"changed": {map[string]string{"input 1 a.jsonl": "10 bytes", "input 2 b.jsonl": "21 bytes"},
			`input 2 b.jsonl was "20 bytes" in the interrupted run; it is "21 bytes" now`},
		"added": {map[string]string{"input 1 a.jsonl": "10 bytes", "input 2 b.jsonl": "20 bytes", "input 3 c.jsonl": "1 bytes"},
			`input 3 c.jsonl is "1 bytes" in this run and not recorded`},
		"dropped": {map[string]string{"input 1 a.jsonl": "10 bytes"},
			`input 2 b.jsonl was "20 bytes" in the interrupted run and is not set`},
		"none": {nil, `input 1 a.jsonl was "10 bytes"`},
	} {
		o := opts
		o.ResumeGuard = tc.guard
		_, _, err := OpenCheckpointed(out, o)
		if !errors.Is(err, ErrResumeMismatch) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s guard: got %v; want ErrResumeMismatch saying %q", name, err, tc.want)
		}
	}
	o := opts
	meta := maps.Clone(testMeta)
	meta["synapse.model"] = "another.gguf"
	o.Schema = EmbedSchema(testDims, meta)
	if _, _, err := OpenCheckpointed(out, o); !errors.Is(err, ErrResumeMismatch) || !strings.Contains(err.Error(), "synapse.model was") {
		t.Errorf("other metadata: got %v; want ErrResumeMismatch naming synapse.model", err)
	}

	w, st, err := OpenCheckpointed(out, opts)
	if err != nil || !st.Resumed || st.NextIndex == 0 {
		t.Fatalf("same guard: %+v, %v; want a resume past document 0", st, err)
	}
	putDocs(t, w, st.NextIndex, 40)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if rows, _, _ := readArrowFile(t, out); !reflect.DeepEqual(rows, wantRows(0, 40)) {
		t.Errorf("resumed output: %d rows; want %d", len(rows), len(wantRows(0, 40)))
	}
}

func TestInputGuard(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.jsonl")
	if err := os.WriteFile(a, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	if err := os.Chtimes(a, when, when); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.jsonl")
	g := files.InputGuard([]string{a, "-", missing})
	want := map[string]string{
		"input 1 " + a:       "3 bytes, modified 2026-01-02T03:04:05.000000006Z",
		"input 2 -":          "standard input",
		"input 3 " + missing: "unreadable: no such file or directory",
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("files.InputGuard:\n got %v\nwant %v", g, want)
	}
	if err := os.WriteFile(a, []byte("{}\n{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(a, when, when); err != nil {
		t.Fatal(err)
	}
	if g2 := files.InputGuard([]string{a}); g2["input 1 "+a] == want["input 1 "+a] {
		t.Errorf("a rewritten input with the old modification time: guard unchanged (%q)", g2["input 1 "+a])
	}
}

// TestCheckpointErrorsOnly: records with only errors still advance the
// checkpoint (after BatchRows records), which keeps the caller's state and
// the replay group; a resume returns them.
func TestCheckpointErrorsOnly(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.arrow")
	put := 0
	opts := WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 16, State: func() any { return map[string]int{"put": put} }}
	w, _, err := OpenCheckpointed(out, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 40; i++ {
		d := record.Doc{Source: "c.jsonl", Line: int(i) + 1, Index: i}
		put++
		if err := w.Put(i, i-i%8, nil, []*record.RowError{d.Error(record.ReasonMalformedJSON, "bad")}); err != nil {
			t.Fatal(err)
		}
	}
	w.Abort()
	_, st, err := OpenCheckpointed(out, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Resumed || st.NextIndex != 32 || st.ReplayFrom != 24 || st.ErrorRecords != 32 || string(st.State) != `{"put":32}` {
		t.Errorf("resume state %+v (state %s); want next 32, replay from 24, 32 error records, state {\"put\":32}", st, st.State)
	}
}

// TestFormats: every output format reads back with the same rows; an
// unknown extension is an error naming it; TREC needs its columns.
func TestFormats(t *testing.T) {
	if _, err := FormatOf("out.csv"); !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), ".csv") {
		t.Errorf("FormatOf(out.csv) = %v; want ErrUnknownFormat naming .csv", err)
	}
	dir := t.TempDir()
	if _, err := Create(filepath.Join(dir, "o.trec"), WriterOptions{Schema: EmbedSchema(testDims, nil)}); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("TREC output of embedding rows: %v; want ErrUnknownFormat", err)
	}
	out := filepath.Join(dir, "o.jsonl")
	w, err := Create(out, WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 4})
	if err != nil {
		t.Fatal(err)
	}
	putDocs(t, w, 0, 10)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var want EmbedRows
	for i := int64(0); i < 10; i++ {
		rows, _ := testDoc(i)
		want = append(want, rows...)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d JSON lines; want %d", len(lines), len(want))
	}
	for i, line := range lines {
		if !strings.HasPrefix(line, `{"id":`) {
			t.Errorf("line %d: keys not in schema order: %s", i, line)
		}
		var got EmbedRow
		var raw struct {
			ID        string    `json:"id"`
			Chunk     int32     `json:"chunk"`
			NTokens   int32     `json:"n_tokens"`
			Embedding []float32 `json:"embedding"`
		}
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		got = EmbedRow{ID: raw.ID, Chunk: raw.Chunk, NTokens: raw.NTokens, Embedding: raw.Embedding}
		if got.ID != want[i].ID || got.Chunk != want[i].Chunk || !reflect.DeepEqual(got.Embedding, want[i].Embedding) {
			t.Errorf("line %d: got %+v; want %+v", i, got, want[i])
		}
	}
}

// TestCheckpointByTimeErrorRecordsEndBatch: a batch whose rows are all in
// open pieces when error records end it (BatchRows records) ends with an
// empty piece, and the output is that of a writer without time checkpoints.
func TestCheckpointByTimeErrorRecordsEndBatch(t *testing.T) {
	write := func(out string, tick bool) []byte {
		opts := WriterOptions{Schema: EmbedSchema(testDims, testMeta), BatchRows: 4}
		if tick {
			tickEveryPut(&opts)
		}
		w, _, err := OpenCheckpointed(out, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < 13; i++ {
			rows, errs := testDoc(i)
			if i%4 != 1 { // one document of rows in four: error records end the batches
				rows, errs = nil, []*record.RowError{{Source: "c.jsonl", Line: int(i) + 1, Index: i, Reason: "empty_text"}}
			}
			if err := w.Put(i, i, rows, errs); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	dir := t.TempDir()
	want := write(filepath.Join(dir, "rows.arrow"), false)
	if got := write(filepath.Join(dir, "time.arrow"), true); !bytes.Equal(got, want) {
		t.Errorf("checkpointed by time: %d bytes; want the %d of a writer checkpointing by rows, byte for byte", len(got), len(want))
	}
}
