package corpus

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/record"
)

func TestWriteSyntheticParquet(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.parquet")
	const n = SyntheticRowGroup + 1000
	for _, p := range []string{a, b} {
		if err := WriteSyntheticParquet(p, n, 42); err != nil {
			t.Fatal(err)
		}
	}
	var docs [2][]outcome
	for i, p := range []string{a, b} {
		r, _ := Open([]string{p}, ReadOptions{TextFields: []string{"title", "text"}})
		var fes []*record.FileError
		docs[i], fes = readAll(t, r)
		if len(docs[i]) != n || len(fes) != 0 {
			t.Fatalf("got %d records, %v; want %d documents", len(docs[i]), fes, n)
		}
	}
	// The rows, not the bytes: arrow-go writes the page encoding statistics
	// of the footer in map order.
	if !reflect.DeepEqual(docs[0], docs[1]) {
		t.Errorf("two files with seed 42 differ")
	}
	got := docs[0]
	long := 0
	for i, o := range got {
		if o.Reason != "" || o.ID != "synth-"+strconv.Itoa(i) || o.Index != int64(i) {
			t.Fatalf("record %d: %+v", i, o)
		}
		if len(o.Text) > 5000 {
			long++
		}
	}
	if long < n/100 || long > n/25 {
		t.Errorf("%d long documents of %d; want about 1 in 50", long, n)
	}
}

// TestSyntheticMillion reads a 1,000,000-row synthetic corpus and checks that
// the heap stays small. It takes minutes and about 1 GB of disk: run it with
// SYNAPSE_DATAIO_BIG=1.
func TestSyntheticMillion(t *testing.T) {
	if os.Getenv("SYNAPSE_DATAIO_BIG") == "" {
		t.Skip("set SYNAPSE_DATAIO_BIG=1 to read a 1,000,000-row corpus")
	}
	path := filepath.Join(t.TempDir(), "big.parquet")
	if err := WriteSyntheticParquet(path, 1_000_000, 1); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	r, _ := Open([]string{path}, ReadOptions{})
	var n int64
	var peak uint64
	var ms runtime.MemStats
	for {
		_, err := r.Next()
		if err != nil {
			break
		}
		if n++; n%50000 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}
	t.Logf("%d rows from a %d MB file; peak heap in use %d MB", n, st.Size()>>20, peak>>20)
	if n != 1_000_000 || peak > 256<<20 {
		t.Errorf("got %d rows, peak heap %d MB; want 1000000 rows under 256 MB", n, peak>>20)
	}
}

func scifact(b *testing.B) string {
	return testenv.Fixture(b, "corpora", "scifact", "corpus.jsonl")
}

func benchRead(b *testing.B, files []string, opts ReadOptions) {
	var size int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			b.Skip(err)
		}
		size += st.Size()
	}
	b.SetBytes(size)
	docs := 0
	for b.Loop() {
		r, err := Open(files, opts)
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, err := r.Next()
			if err != nil {
				break
			}
			docs++
		}
		r.Close()
	}
	b.ReportMetric(float64(docs)/b.Elapsed().Seconds(), "docs/s")
}

// BenchmarkReadJSONL reads the scifact corpus (5,183 documents, 7.6 MB).
func BenchmarkReadJSONL(b *testing.B) {
	benchRead(b, []string{scifact(b)}, ReadOptions{TextFields: []string{"title", "text"}})
}

// BenchmarkReadParquet reads the scifact corpus converted to Parquet
// (string columns, 1,024-row row groups).
func BenchmarkReadParquet(b *testing.B) {
	path := filepath.Join(b.TempDir(), "scifact.parquet")
	scifactParquet(b, scifact(b), path)
	benchRead(b, []string{path}, ReadOptions{TextFields: []string{"title", "text"}})
}

// BenchmarkReadCSV reads the scifact corpus converted to CSV (RFC 4180
// quoting by encoding/csv), for a ratio against BenchmarkReadJSONL.
func BenchmarkReadCSV(b *testing.B) {
	path := filepath.Join(b.TempDir(), "scifact.csv")
	scifactCSV(b, scifact(b), path)
	benchRead(b, []string{path}, ReadOptions{TextFields: []string{"title", "text"}})
}

// BenchmarkReadArrow reads the scifact corpus converted to an Arrow IPC
// file (string columns, 1,024-row record batches).
func BenchmarkReadArrow(b *testing.B) {
	csvPath := filepath.Join(b.TempDir(), "scifact.csv")
	scifactCSV(b, scifact(b), csvPath)
	data, err := os.ReadFile(csvPath)
	if err != nil {
		b.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "scifact.arrow")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "_id", Type: arrow.BinaryTypes.String}, {Name: "title", Type: arrow.BinaryTypes.String},
		{Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(sc))
	if err != nil {
		b.Fatal(err)
	}
	for start := 1; start < len(rows); start += 1024 {
		cols := make([][]*string, 3)
		for _, r := range rows[start:min(start+1024, len(rows))] {
			for k := range cols {
				cols[k] = append(cols[k], sp(r[k]))
			}
		}
		arrs := []arrow.Array{stringsArr(cols[0]...), stringsArr(cols[1]...), stringsArr(cols[2]...)}
		rec := array.NewRecordBatch(sc, arrs, int64(len(cols[0])))
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	if err := errors.Join(w.Close(), f.Close()); err != nil {
		b.Fatal(err)
	}
	benchRead(b, []string{path}, ReadOptions{TextFields: []string{"title", "text"}})
}

func scifactCSV(b *testing.B, src, dst string) {
	f, err := os.Open(src)
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	out, err := os.Create(dst)
	if err != nil {
		b.Fatal(err)
	}
	w := csv.NewWriter(out)
	w.Write([]string{"_id", "title", "text"})
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var d struct {
			ID    string `json:"_id"`
			Title string `json:"title"`
			Text  string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			b.Fatal(err)
		}
		w.Write([]string{d.ID, d.Title, d.Text})
	}
	w.Flush()
	if err := errors.Join(w.Error(), out.Close()); err != nil {
		b.Fatal(err)
	}
}

func scifactParquet(b *testing.B, src, dst string) {
	f, err := os.Open(src)
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	var ids, titles, texts []*string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var d struct {
			ID    string `json:"_id"`
			Title string `json:"title"`
			Text  string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			b.Fatal(err)
		}
		ids, titles, texts = append(ids, sp(d.ID)), append(titles, sp(d.Title)), append(texts, sp(d.Text))
	}
	writeParquet(b, dst, 1024, []string{"_id", "title", "text"},
		[]arrow.Array{stringsArr(ids...), stringsArr(titles...), stringsArr(texts...)})
}

// TestWriteSyntheticVersion: a later version of a synthetic corpus keeps
// the rows it does not change byte for byte, changes, deletes and adds
// about the shares asked, and --shuffle only reorders them.
func TestWriteSyntheticVersion(t *testing.T) {
	dir := t.TempDir()
	read := func(s Synthetic) map[string]string {
		p := filepath.Join(dir, "v.parquet")
		if err := WriteSynthetic(p, s); err != nil {
			t.Fatal(err)
		}
		r, _ := Open([]string{p}, ReadOptions{TextFields: []string{"title", "text"}})
		docs, fes := readAll(t, r)
		if len(fes) != 0 {
			t.Fatal(fes)
		}
		m := map[string]string{}
		for _, d := range docs {
			m[d.ID] = d.Text
		}
		return m
	}
	const n = 5000
	v1 := read(Synthetic{Rows: n, Seed: 1})
	v2 := Synthetic{Rows: n, Seed: 1, Changed: 0.1, Deleted: 0.05, Added: 0.02, ChangeSeed: 7}
	got := read(v2)
	var changed, deleted, added int
	for id, text := range v1 {
		switch g, ok := got[id]; {
		case !ok:
			deleted++
		case g != text:
			changed++
		}
	}
	for id := range got {
		if _, ok := v1[id]; !ok {
			added++
		}
	}
	if changed < n*8/100 || changed > n*12/100 || deleted < n*3/100 || deleted > n*7/100 || added != n*2/100 {
		t.Errorf("%d changed, %d deleted, %d added of %d; want about 10%%, 5%% and 2%%", changed, deleted, added, n)
	}
	v2.Shuffle = true
	if shuffled := read(v2); !reflect.DeepEqual(shuffled, got) {
		t.Error("--shuffle changed the rows, not only their order")
	}
}
