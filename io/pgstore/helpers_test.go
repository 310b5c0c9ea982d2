package pgstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/jackc/pgx/v5"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/pgstore/pgtest"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/testmodels"
)

// Helpers of the end-to-end tests: the real synapse binary writing into a
// real PostgreSQL (pgtest), the generated tiny model and corpus.

func TestMain(m *testing.M) {
	code := m.Run()
	testmodels.RemoveAll()
	workDirs.Range(func(_, d any) bool { os.RemoveAll(d.(string)); return true })
	os.Exit(code)
}

// tinyModel is a one-layer, 32-wide BERT embedder (as the cli tests').
func tinyModel(t testing.TB) string {
	t.Helper()
	return testmodels.Model(t, "tiny", func(modelgen.Vocab) modelgen.BERT {
		return modelgen.BERT{Name: "synapse-embed-test", Layers: 1, Width: 32, Heads: 2, FFN: 64, Context: 512,
			Pooling: modelgen.PoolingMean, WeightType: gguf.GGMLTypeF32, Seed: 7, Vocab: testmodels.Vocab()}
	})
}

func corpus(n int) []map[string]any {
	var docs []map[string]any
	for _, d := range testmodels.Corpus(n) {
		docs = append(docs, d.Map())
	}
	return docs
}

// shortCorpus is corpus with texts of at most 12 words: many batches, fast.
func shortCorpus(n int) []map[string]any {
	docs := corpus(n)
	for _, d := range docs {
		if w := strings.Fields(d["text"].(string)); len(w) > 12 {
			d["text"] = strings.Join(w[:12], " ")
		}
	}
	return docs
}

func writeJSONL(t *testing.T, path string, docs []map[string]any) string {
	t.Helper()
	var b bytes.Buffer
	for _, d := range docs {
		line, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// result is one finished synapse run.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) wantCode(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d; want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

func command(ctx context.Context, t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, testenv.Binary(t), args...)
	cmd.Env = append(os.Environ(), "SYNAPSE_LLAMA_LIB="+testenv.LlamaLib(t))
	cmd.Dir = workDir(t) // the default errors file of a table output is written here
	return cmd
}

var workDirs sync.Map // top-level test name → its synapse runs' working directory

// workDir is the working directory of the synapse runs of a test and its
// subtests: a resumed run finds the interrupted one's errors file there.
func workDir(t testing.TB) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	if d, ok := workDirs.Load(name); ok {
		return d.(string)
	}
	d, err := os.MkdirTemp("", "pgstore-run-")
	if err != nil {
		t.Fatal(err)
	}
	workDirs.Store(name, d)
	return d
}

// run runs synapse to its end (at most three minutes: a hang, not a speed check).
func run(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := command(ctx, t, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("synapse %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		t.Fatalf("synapse %s: still running after 3 minutes\nstderr:\n%s", strings.Join(args, " "), errb.String())
	}
	return result{out.String(), errb.String(), code}
}

// tableURL is the server's URL of a table.
func tableURL(s *pgtest.Server, table string) string { return s.URL + "&table=" + table }

// row is one chunk as a table or a file holds it.
type row struct {
	id    string
	chunk int32
	emb   []float32
	hash  string
}

func (r row) String() string { return fmt.Sprintf("%s#%d %s", r.id, r.chunk, r.hash[:8]) }

// tableRows are a table's rows by chunk_id; each row's chunk_id is checked.
func tableRows(t *testing.T, conn *pgx.Conn, table string) map[string]row {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT chunk_id, id, chunk, embedding::real[], encode(doc_hash, 'hex') FROM "+pgx.Identifier{table}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]row{}
	for rows.Next() {
		var cid string
		var r row
		if err := rows.Scan(&cid, &r.id, &r.chunk, &r.emb, &r.hash); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%s#%d", r.id, r.chunk); cid != want {
			t.Errorf("chunk_id %q; want %q", cid, want)
		}
		if _, dup := out[cid]; dup {
			t.Errorf("chunk_id %s twice", cid)
		}
		out[cid] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// fileRows are an .arrow output's rows by ID#CHUNK.
func fileRows(t *testing.T, path string) map[string]row {
	t.Helper()
	out := map[string]row{}
	eachBatch(t, path, func(col func(string) arrow.Array, n int) {
		ids := col("id").(*array.String)
		chunks := col("chunk").(*array.Int32)
		embs := col("embedding").(*array.FixedSizeList)
		vals := embs.ListValues().(*array.Float32).Float32Values()
		hashes := col("doc_hash").(*array.FixedSizeBinary)
		dims := int(embs.DataType().(interface{ Len() int32 }).Len())
		for j := range n {
			rw := row{id: ids.Value(j), chunk: chunks.Value(j), emb: vals[j*dims : (j+1)*dims], hash: fmt.Sprintf("%x", hashes.Value(j))}
			out[fmt.Sprintf("%s#%d", rw.id, rw.chunk)] = rw
		}
	})
	return out
}

// eachBatch calls fn with each record batch of an .arrow output: its
// columns by name and its row count.
func eachBatch(t *testing.T, path string, fn func(col func(string) arrow.Array, rows int)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatch(i)
		if err != nil {
			t.Fatal(err)
		}
		sc := rec.Schema()
		fn(func(name string) arrow.Array { return rec.Column(sc.FieldIndices(name)[0]) }, int(rec.NumRows()))
	}
}

// sameRows compares two sets of rows, vectors bit for bit.
func sameRows(t *testing.T, got, want map[string]row) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d rows; want %d", len(got), len(want))
	}
	bad := 0
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("row %s missing", k)
		case g.id != w.id || g.chunk != w.chunk || g.hash != w.hash:
			t.Errorf("row %s: got %v; want %v", k, g, w)
		case !equalBits(g.emb, w.emb):
			t.Errorf("row %s: got vector %v; want %v", k, g.emb[:4], w.emb[:4])
		default:
			continue
		}
		if bad++; bad > 5 {
			t.Fatalf("more rows differ")
		}
	}
}

func equalBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] { // no NaN in an output
			return false
		}
	}
	return true
}

// embedFile embeds docs into an .arrow file: the reference of a table's rows.
func embedFile(t *testing.T, model, in string) map[string]row {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ref.arrow")
	run(t, "embed", in, "-m", model, "-o", out, "-q").wantCode(t, 0)
	return fileRows(t, out)
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
