package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/testmodels"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// Helpers shared by the end-to-end tests of this package: running the
// built binary (testenv.Binary) and the CLI in process, the generated and
// fixture models, writing corpora, and reading outputs and errors files.
// Helpers that one test file alone uses stay in that file.

// repoPath names a file of the repository from this package's directory
// (cli), where go test runs its tests.
func repoPath(rel ...string) string {
	return filepath.Join(append([]string{".."}, rel...)...)
}

// embedResult is one finished `synapse` run.
type embedResult struct {
	stdout, stderr string
	code           int
}

// synapseCmd is a synapse command with the llama.cpp libraries and extra env.
func synapseCmd(ctx context.Context, t testing.TB, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, testenv.Binary(t), args...)
	cmd.Env = append(os.Environ(), "SYNAPSE_LLAMA_LIB="+testenv.LlamaLib(t))
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// runSynapse runs synapse to its end (at most two minutes).
func runSynapse(t *testing.T, env []string, args ...string) embedResult {
	t.Helper()
	return runSynapseWithin(t, 2*time.Minute, env, args...)
}

// runSynapseWithin runs synapse to its end, failing the test if it takes
// longer than limit (a hang, not a speed check: limits are generous).
func runSynapseWithin(t *testing.T, limit time.Duration, env []string, args ...string) embedResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := synapseCmd(ctx, t, env, args...)
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
		t.Fatalf("synapse %s: still running after %v\nstderr:\n%s", strings.Join(args, " "), limit, errb.String())
	}
	return embedResult{out.String(), errb.String(), code}
}

// wantCode fails the test unless the run exited with code.
func (r embedResult) wantCode(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d; want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

var summaryRE = regexp.MustCompile(`rows read\s+(\d+) = (\d+) embedded \+ (\d+) in errors`)

// counts parses the summary's "rows read N = E embedded + F in errors".
func (r embedResult) counts(t *testing.T) (read, embedded, failed int) {
	t.Helper()
	m := summaryRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no rows-read line in the summary:\n%s", r.stdout)
	}
	read, _ = strconv.Atoi(m[1])
	embedded, _ = strconv.Atoi(m[2])
	failed, _ = strconv.Atoi(m[3])
	if read != embedded+failed {
		t.Errorf("summary: rows read %d; want embedded %d + failed %d", read, embedded, failed)
	}
	return read, embedded, failed
}

// tinyModel is a one-layer, 32-wide BERT embedder with mean pooling and
// the generated vocabulary (testmodels.Vocab), written once per test process.
func tinyModel(t testing.TB) string {
	t.Helper()
	return testmodels.Model(t, "tiny", func(modelgen.Vocab) modelgen.BERT { return tinyBERT() })
}

// tinyBERT is the model tinyModel writes.
func tinyBERT() modelgen.BERT {
	return modelgen.BERT{Name: "synapse-embed-test", Layers: 1, Width: 32, Heads: 2, FFN: 64, Context: 512,
		Pooling: modelgen.PoolingMean, WeightType: gguf.GGMLTypeF32, Seed: 7, Vocab: testmodels.Vocab()}
}

func TestMain(m *testing.M) {
	code := m.Run()
	testmodels.RemoveAll()
	os.Exit(code)
}

// refModel is the reference BERT fixture.
func refModel(t *testing.T) string {
	t.Helper()
	return testenv.Fixture(t, "models", "ref-bert-embed.gguf")
}

// writeJSONL writes one JSON object per line.
func writeJSONL(t *testing.T, path string, docs []map[string]any) {
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
}

// writeParquet writes string columns id and text with pqarrow.
func writeParquet(t *testing.T, path string, ids, texts []string) {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "text", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues(ids, nil)
	b.Field(1).(*array.StringBuilder).AppendValues(texts, nil)
	writeRecord(t, path, b.NewRecordBatch())
}

func writeRecord(t *testing.T, path string, rec arrow.RecordBatch) {
	t.Helper()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(rec.Schema(), f, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil { // closes f too
		t.Fatal(err)
	}
}

// testCorpus returns the first n generated documents (testmodels.Corpus: _id,
// title and text, SciFact's shape), whose words the tiny model's
// vocabulary holds.
func testCorpus(n int) []map[string]any {
	var docs []map[string]any
	for _, d := range testmodels.Corpus(n) {
		docs = append(docs, d.Map())
	}
	return docs
}

// outRow is one output row.
type outRow struct {
	ID, ChunkID                                              string
	Chunk, TokenStart, TokenEnd, ByteStart, ByteEnd, NTokens int32
	CPStart, CPEnd                                           int32
	Text                                                     string // "" without a text column
	Emb                                                      []float32
	Hash                                                     [output.DocHashSize]byte
}

// readOutput reads an Arrow IPC or Parquet output under a checked allocator
// (no leak) and returns its schema and rows.
func readOutput(t *testing.T, path string) (*arrow.Schema, []outRow) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []outRow
	if format, _ := output.FormatOf(path); format == output.FormatParquet {
		tbl, err := pqarrow.ReadTable(context.Background(), f, nil, pqarrow.ArrowReadProperties{}, mem)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		defer tbl.Release()
		tr := array.NewTableReader(tbl, 1000)
		defer tr.Release()
		for tr.Next() {
			rows = appendRows(t, rows, tr.RecordBatch())
		}
		return tbl.Schema(), rows
	}
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	defer r.Close()
	for i := range r.NumRecords() {
		rec, err := r.RecordBatch(i)
		if err != nil {
			t.Fatalf("read %s batch %d: %v", path, i, err)
		}
		rows = appendRows(t, rows, rec)
	}
	return r.Schema(), rows
}

func appendRows(t *testing.T, rows []outRow, rec arrow.RecordBatch) []outRow {
	t.Helper()
	col := func(name string) arrow.Array {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("output has %d columns %q; want 1", len(idx), name)
		}
		return rec.Column(idx[0])
	}
	i32 := func(name string) []int32 { return col(name).(*array.Int32).Int32Values() }
	ids := col(output.ColID).(*array.String)
	fsl := col(output.ColEmbedding).(*array.FixedSizeList)
	dims := int(fsl.DataType().(*arrow.FixedSizeListType).Len())
	vals := fsl.ListValues().(*array.Float32).Float32Values()
	chunk, ts, te := i32(output.ColChunk), i32(output.ColTokenStart), i32(output.ColTokenEnd)
	bs, be, nt := i32(output.ColByteStart), i32(output.ColByteEnd), i32(output.ColNTokens)
	cs, ce := i32(output.ColCPStart), i32(output.ColCPEnd)
	chunkIDs := col(output.ColChunkID).(*array.String)
	var texts *array.String
	if idx := rec.Schema().FieldIndices(output.ColText); len(idx) == 1 {
		texts = rec.Column(idx[0]).(*array.String)
	}
	hashes := col(output.ColDocHash).(*array.FixedSizeBinary)
	for i := range int(rec.NumRows()) {
		off := (fsl.Offset() + i) * dims
		r := outRow{ID: ids.Value(i), ChunkID: chunkIDs.Value(i), Chunk: chunk[i], TokenStart: ts[i], TokenEnd: te[i],
			ByteStart: bs[i], ByteEnd: be[i], CPStart: cs[i], CPEnd: ce[i], NTokens: nt[i], Emb: slices.Clone(vals[off : off+dims])}
		if texts != nil {
			r.Text = texts.Value(i)
		}
		copy(r.Hash[:], hashes.Value(i))
		rows = append(rows, r)
	}
	return rows
}

// errLine is one line of the errors file.
type errLine struct {
	Source    string `json:"source"`
	Line      *int   `json:"line"`
	Row       *int64 `json:"row"`
	RowGroup  *int   `json:"row_group"`
	Index     int64  `json:"index"`
	ID        string `json:"id"`
	Reason    string `json:"reason"`
	Detail    string `json:"detail"`
	Chunk     *int   `json:"chunk"`
	DocID     string `json:"doc_id"`
	Candidate *int   `json:"candidate"`
	WorkerLog string `json:"worker_log"`
}

func readErrors(t *testing.T, path string) []errLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []errLine
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e errLine
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("errors file line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// rowsByID groups output rows by document id, chunks in order.
func rowsByID(rows []outRow) map[string][]outRow {
	m := map[string][]outRow{}
	for _, r := range rows {
		m[r.ID] = append(m[r.ID], r)
	}
	return m
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// sameRows fails unless two outputs are equal in every column, bit for bit.
func sameRows(t *testing.T, what string, got, want []outRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows; want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		ge, we := g.Emb, w.Emb
		g.Emb, w.Emb = nil, nil
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Fatalf("%s: row %d: got %+v; want %+v", what, i, g, w)
		}
		for k := range ge {
			if math.Float32bits(ge[k]) != math.Float32bits(we[k]) {
				t.Fatalf("%s: row %d (%s chunk %d): embedding[%d] = %v; want %v", what, i, g.ID, g.Chunk, k, ge[k], we[k])
			}
		}
	}
}

type refItem struct {
	Text      string    `json:"text"`
	IDs       []int32   `json:"ids"`
	IDsPlain  []int32   `json:"ids_plain"`
	Embedding []float32 `json:"embedding"`
}

func readReference(t *testing.T) []refItem {
	t.Helper()
	data, err := os.ReadFile(testenv.Fixture(t, "reference", "embed.json"))
	if err != nil {
		testenv.MissingFixture(t, "reference: %v", err)
	}
	var ref struct {
		Pooling   string    `json:"pooling"`
		Normalize bool      `json:"normalize"`
		Items     []refItem `json:"items"`
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	if ref.Pooling != "mean" || !ref.Normalize {
		t.Fatalf("reference pooling %q normalize %v; want mean, true", ref.Pooling, ref.Normalize)
	}
	return ref.Items
}

// poisonedCorpus is a 12-document corpus, the test model, a token found in
// one document only (for an abort-on-token or hang-on-token drill) and that
// document's index.
func poisonedCorpus(t *testing.T) (docs []map[string]any, model string, poison int32, bad int) {
	t.Helper()
	docs = testCorpus(12)
	var texts []string
	for _, d := range docs {
		texts = append(texts, d["text"].(string))
	}
	model = tinyModel(t)
	poison, bad = poisonToken(t, model, texts)
	return docs, model, poison, bad
}

// poisonToken returns a token id found in exactly one of texts (the
// smallest such id above 1000, deterministic) and that text's index.
func poisonToken(t *testing.T, model string, texts []string) (int32, int) {
	t.Helper()
	tok, err := tokenize.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	docsOf := map[int32]map[int]bool{}
	for i, s := range texts {
		for _, tk := range tok.Tokenize(s, tokenize.Options{}).Tokens {
			if docsOf[tk.ID] == nil {
				docsOf[tk.ID] = map[int]bool{}
			}
			docsOf[tk.ID][i] = true
		}
	}
	best, doc := int32(-1), -1
	for id, docs := range docsOf {
		if len(docs) == 1 && id > 1000 && (best < 0 || id < best) {
			best = id
			for d := range docs {
				doc = d
			}
		}
	}
	if best < 0 {
		t.Fatal("no token appears in exactly one document")
	}
	return best, doc
}

// waitCheckpoint waits until the run's checkpoint records progress, or
// fails the test after a deadline (or when the run ends first).
func waitCheckpoint(t *testing.T, out string, exited <-chan struct{}) {
	t.Helper()
	deadline := time.After(90 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-deadline:
			t.Fatal("no checkpoint within 90s")
		case <-exited:
			t.Fatal("the run ended before its first checkpoint; make the corpus bigger or slower")
		case <-tick.C:
		}
		var cp struct {
			NextIndex int64 `json:"next_index"`
		}
		data, err := os.ReadFile(output.CheckpointPath(out))
		if err == nil && json.Unmarshal(data, &cp) == nil && cp.NextIndex > 0 {
			return
		}
	}
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), append([]string{"synapse"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeRecordGroups writes rec as Parquet with row groups of the given length.
func writeRecordGroups(t testing.TB, path string, rec arrow.RecordBatch, rowGroup int64) {
	t.Helper()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := newParquetWriter(f, rec.Schema(), rowGroup)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// newParquetWriter writes Parquet with the given row group length.
func newParquetWriter(f *os.File, sc *arrow.Schema, rowGroup int64) (*pqarrow.FileWriter, error) {
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rowGroup))
	return pqarrow.NewFileWriter(sc, f, props, pqarrow.DefaultWriterProps())
}

// embedding is a synapse embed process started by startEmbedding.
type embedding struct {
	cmd    *exec.Cmd
	exited chan error       // the process's exit, once its standard error has ended
	log    *strings.Builder // its standard error; read only after exited
}

// startEmbedding starts cmd (a synapse embed) and waits, a minute at most,
// until it says "embedding with": its workers are up and it reads its input.
func startEmbedding(t *testing.T, cmd *exec.Cmd) *embedding {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e := &embedding{cmd: cmd, exited: make(chan error, 1), log: new(strings.Builder)}
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			e.log.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "embedding with") {
				close(started)
			}
		}
		e.exited <- cmd.Wait()
	}()
	select {
	case <-started:
	case err := <-e.exited:
		t.Fatalf("synapse exited before it started embedding: %v\n%s", err, e.log)
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-e.exited
		t.Fatal("no start within a minute")
	}
	return e
}

// interrupt sends sig and fails the test unless synapse exits within the
// given time with the interrupted exit code; situation says what it was
// doing, for the failure's message.
func (e *embedding) interrupt(t *testing.T, sig syscall.Signal, within time.Duration, situation string) {
	t.Helper()
	if err := e.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.exited:
	case <-time.After(within):
		e.cmd.Process.Kill()
		<-e.exited
		t.Fatalf("still running %v after %v %s\n%s", within, sig, situation, e.log)
	}
	if code := e.cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Errorf("exit code %d; want %d\n%s", code, exitInterrupted, e.log)
	}
}

// writeTexts writes texts as a JSONL input in dir, ids their indexes.
func writeTexts(t *testing.T, dir, name string, texts []string) string {
	t.Helper()
	var docs []map[string]any
	for i, s := range texts {
		docs = append(docs, map[string]any{"id": fmt.Sprint(i), "text": s})
	}
	p := filepath.Join(dir, name)
	writeJSONL(t, p, docs)
	return p
}

// checkSTCosines compares an output's vectors (ids: the texts' indexes)
// with sentence-transformers' want: min cosine ≥ 0.9999.
func checkSTCosines(t *testing.T, name string, got vecFile, want [][]float64) {
	t.Helper()
	if len(got.ids) != len(want) {
		t.Fatalf("%s: %d vectors; want %d", name, len(got.ids), len(want))
	}
	worst := 1.0
	for i, id := range got.ids {
		var k int
		fmt.Sscan(id, &k)
		worst = min(worst, cosine64(got.floats(i), want[k]))
	}
	t.Logf("%s: min cosine %.7f to sentence-transformers over %d texts", name, worst, len(want))
	if worst < 0.9999 {
		t.Errorf("%s: min cosine %.6f to sentence-transformers; want ≥ 0.9999", name, worst)
	}
}

// setJSON sets key to value in the JSON object file p.
func setJSON(t *testing.T, p, key string, value any) {
	t.Helper()
	var m map[string]any
	b, err := os.ReadFile(p)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatal(err)
	}
	m[key] = value
	if b, err = json.Marshal(m); err == nil {
		err = os.WriteFile(p, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// wantRefusedUncached runs embed and models add on the model directory:
// each must exit 2 with stderr naming every word, and the model cache (in
// work) must stay empty.
func wantRefusedUncached(t *testing.T, work, model string, words ...string) {
	t.Helper()
	store := filepath.Join(work, "models")
	env := append(ortEnv(t), "SYNAPSE_MODELS="+store) // a refused directory is checked after the engine libraries
	in := filepath.Join(work, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "a", "text": "the cell"}})
	for _, args := range [][]string{{"embed", in, "-m", model, "-o", filepath.Join(work, "out.arrow")}, {"models", "add", model}} {
		r := runSynapse(t, env, args...)
		r.wantCode(t, exitUsage)
		for _, w := range words {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("synapse %s: stderr does not name %q:\n%s", args[0], w, r.stderr)
			}
		}
	}
	s, err := modelcache.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := s.Entries(); len(entries) != 0 {
		t.Errorf("cache entries %v; want none", entries)
	}
}

// readConvertReference reads model/convert/testdata/name.reference.json
// (what transformers computed for that checkpoint) into ref.
func readConvertReference(t *testing.T, name string, ref any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "model", "convert", "testdata", name+".reference.json"))
	if err == nil {
		err = json.Unmarshal(b, ref)
	}
	if err != nil {
		t.Fatal(err)
	}
}
