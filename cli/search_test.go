package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"math/bits"
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

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/testmodels"
)

// End-to-end tests of `embed --dtype` and `synapse search`: real embed
// runs, their outputs read back with arrow-go and checked against the
// documented rules, and search runs checked against a float64 computation.

// vecFile is an embedding output read back: its rows' ids and vectors (the
// column's bytes, vector.Column layout), its column type and metadata.
type vecFile struct {
	ids   []string
	rows  [][]byte
	typ   arrow.DataType
	meta  arrow.Metadata
	dtype vector.Dtype
	dims  int
}

func readVecFile(t *testing.T, path string) vecFile {
	t.Helper()
	sc, err := output.FileSchema(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	f := vecFile{meta: sc.Metadata(), typ: sc.Field(sc.FieldIndices(output.ColEmbedding)[0]).Type}
	d, _ := f.meta.GetValue(vector.MetaDtype)
	f.dtype = vector.Dtype(d)
	ds, _ := f.meta.GetValue("synapse.dims")
	f.dims, _ = strconv.Atoi(ds)
	err = output.EachBatch(context.Background(), path, nil, func(rec arrow.RecordBatch) error {
		col, err := vector.ColumnOf(rec.Column(sc.FieldIndices(output.ColEmbedding)[0]), f.dtype, f.dims)
		if err != nil {
			return err
		}
		ids := rec.Column(0).(*array.String)
		for i := range col.Rows {
			f.ids = append(f.ids, strings.Clone(ids.Value(i)))
			f.rows = append(f.rows, slices.Clone(col.Row(i)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f vecFile) floats(i int) []float32 {
	return vector.Decode(nil, vector.Float32, f.dims, f.rows[i], nil)
}

func embedArgs(in, model, out string, extra ...string) []string {
	return append([]string{"embed", in, "-m", model, "-o", out, "--workers", "1", "-q"}, extra...)
}

// TestEmbedDtypes: every dtype's output is the float32 output under the
// documented rule, column type and metadata as documented; int8 shards
// merge to the single run; --previous refuses another dtype.
func TestEmbedDtypes(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "corpus.jsonl")
	writeJSONL(t, in, testCorpus(120))
	model := tinyModel(t)
	out := func(d string) string { return filepath.Join(dir, d+".arrow") }
	runSynapse(t, nil, embedArgs(in, model, out("float32"))...).wantCode(t, 0)
	f32 := readVecFile(t, out("float32"))
	for _, d := range vector.Dtypes[1:] {
		runSynapse(t, nil, embedArgs(in, model, out(string(d)), "--dtype", string(d), "--calibration-docs", "50")...).wantCode(t, 0)
		got := readVecFile(t, out(string(d)))
		if got.dtype != d || !arrow.TypeEqual(got.typ, d.ArrowType(f32.dims)) {
			t.Fatalf("%s: metadata dtype %q, column %s; want %s", d, got.dtype, got.typ, d.ArrowType(f32.dims))
		}
		var ranges *vector.Ranges
		if d.Ranged() {
			raw, _ := got.meta.GetValue(vector.MetaRanges)
			var err error
			if ranges, err = vector.ParseRanges(raw, f32.dims); err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			if src, _ := got.meta.GetValue(vector.MetaCalibration); !strings.Contains(src, "of the first 50 documents") {
				t.Errorf("%s: calibration %q; want the first 50 documents", d, src)
			}
		}
		q, err := vector.NewQuantizer(d, f32.dims, ranges)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.ids, f32.ids) {
			t.Fatalf("%s: other rows than float32's", d)
		}
		for i := range got.rows {
			if want := q.Append(nil, f32.floats(i)); !slices.Equal(got.rows[i], want) {
				t.Fatalf("%s: row %d: %v; want the rule applied to float32's: %v", d, i, got.rows[i], want)
			}
		}
	}
	// Shards calibrate on the same first documents of the whole input.
	for i := range 2 {
		runSynapse(t, nil, embedArgs(in, model, out("shard"), "--dtype", "int8", "--calibration-docs", "50", "--shard", fmt.Sprintf("%d/2", i))...).wantCode(t, 0)
	}
	runSynapse(t, nil, "merge", out("shard"), "-q").wantCode(t, 0)
	merged, single := readVecFile(t, out("shard")), readVecFile(t, out("int8"))
	mr, _ := merged.meta.GetValue(vector.MetaRanges)
	sr, _ := single.meta.GetValue(vector.MetaRanges)
	if mr != sr || !slices.EqualFunc(merged.rows, single.rows, slices.Equal) {
		t.Errorf("merged int8 shards differ from the single run (ranges equal: %v)", mr == sr)
	}
	// --previous: another dtype is refused, the same one reuses its ranges.
	r := runSynapse(t, nil, embedArgs(in, model, out("again"), "--previous", out("int8"))...)
	r.wantCode(t, 2)
	if !strings.Contains(r.stderr, `dtype: previous "int8", this run "float32"`) {
		t.Errorf("--previous of another dtype: stderr %q; want the dtype named", r.stderr)
	}
	runSynapse(t, nil, embedArgs(in, model, out("again"), "--dtype", "int8", "--previous", out("int8"))...).wantCode(t, 0)
	if again := readVecFile(t, out("again")); !slices.EqualFunc(again.rows, single.rows, slices.Equal) {
		t.Error("int8 run with --previous int8: other vectors than the previous output's")
	}
	// int8 on stdin cannot calibrate on the input.
	r = runSynapse(t, nil, embedArgs("-", model, out("stdin"), "--dtype", "int8")...)
	if r.wantCode(t, 2); !strings.Contains(r.stderr, "--calibration") {
		t.Errorf("int8 from stdin: stderr %q; want --calibration suggested", r.stderr)
	}
}

// readTREC reads a TREC run: per query, (doc, score) in rank order.
func readTREC(t *testing.T, path string) map[string][]searchHit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	run := map[string][]searchHit{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		s, _ := strconv.ParseFloat(fs[4], 64)
		if rank, _ := strconv.Atoi(fs[3]); rank != len(run[fs[0]])+1 {
			t.Fatalf("%s: rank %d after %d", path, rank, len(run[fs[0]]))
		}
		run[fs[0]] = append(run[fs[0]], searchHit{fs[2], s})
	}
	return run
}

type searchHit struct {
	doc   string
	score float64
}

// exactRun is the independent search: every query row against every
// corpus row in float64, a document's score its best chunk's, the k best
// by score then id.
func exactRun(q, c vecFile, k int, sim func(a, b []byte) float64) map[string][]searchHit {
	run := map[string][]searchHit{}
	for qi, qid := range q.ids {
		best := map[string]float64{}
		for ci, id := range c.ids {
			s := sim(q.rows[qi], c.rows[ci])
			if b, ok := best[id]; !ok || s > b {
				best[id] = s
			}
		}
		var hs []searchHit
		for id, s := range best {
			hs = append(hs, searchHit{id, s})
		}
		slices.SortFunc(hs, func(a, b searchHit) int {
			if a.score != b.score {
				return map[bool]int{true: -1, false: 1}[a.score > b.score]
			}
			return strings.Compare(a.doc, b.doc)
		})
		run[qid] = hs[:min(k, len(hs))]
	}
	return run
}

func sameRun(t *testing.T, what string, got, want map[string][]searchHit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d queries; want %d", what, len(got), len(want))
	}
	for q, ws := range want {
		gs := got[q]
		if len(gs) != len(ws) {
			t.Fatalf("%s: query %s: %d hits; want %d", what, q, len(gs), len(ws))
		}
		for i := range ws {
			if gs[i].doc != ws[i].doc || math.Abs(gs[i].score-ws[i].score) > 1e-5 {
				t.Fatalf("%s: query %s rank %d: %v; want %v", what, q, i+1, gs[i], ws[i])
			}
		}
	}
}

// TestSearchEmbedOutput: search over real embed outputs equals the exact
// computation; queries of another model are refused, the difference named.
func TestSearchEmbedOutput(t *testing.T) {
	dir := t.TempDir()
	in, qin := filepath.Join(dir, "corpus.jsonl"), filepath.Join(dir, "queries.jsonl")
	docs := testCorpus(60)
	writeJSONL(t, in, docs)
	var qs []map[string]any
	for i, d := range docs[:25] {
		qs = append(qs, map[string]any{"_id": fmt.Sprint("q", i), "text": strings.Join(strings.Fields(d["text"].(string))[:6], " ")})
	}
	writeJSONL(t, qin, qs)
	model := tinyModel(t)
	p := func(n string) string { return filepath.Join(dir, n) }
	runSynapseWithin(t, 10*time.Minute, nil, embedArgs(in, model, p("c.arrow"), "--chunk-tokens", "24")...).wantCode(t, 0)
	runSynapseWithin(t, 10*time.Minute, nil, embedArgs(in, model, p("c.bin.parquet"), "--chunk-tokens", "24", "--dtype", "binary")...).wantCode(t, 0)
	runSynapse(t, nil, embedArgs(qin, model, p("q.arrow"), "--prefix", "query: ")...).wantCode(t, 0)
	q, c, cb := readVecFile(t, p("q.arrow")), readVecFile(t, p("c.arrow")), readVecFile(t, p("c.bin.parquet"))
	res := runSynapse(t, nil, "search", "--queries", p("q.arrow"), "--corpus", p("c.arrow"), "-k", "20", "-o", p("run.trec"))
	res.wantCode(t, 0)
	if !strings.Contains(res.stdout, "float32, 1 pass, ") { // 25 queries × a few hundred chunks: one pass
		t.Errorf("search summary does not say `1 pass`:\n%s", res.stdout)
	}
	sameRun(t, "float32", readTREC(t, p("run.trec")), exactRun(q, c, 20, func(a, b []byte) float64 {
		x, y := vector.Decode(nil, vector.Float32, q.dims, a, nil), vector.Decode(nil, vector.Float32, q.dims, b, nil)
		var s float64
		for i := range x {
			s += float64(x[i]) * float64(y[i])
		}
		return s
	}))
	runSynapse(t, nil, "search", "--queries", p("q.arrow"), "--corpus", p("c.bin.parquet"), "-k", "20", "-o", p("bin.trec")).wantCode(t, 0)
	sign, _ := vector.NewQuantizer(vector.UBinary, q.dims, nil)
	sameRun(t, "binary", readTREC(t, p("bin.trec")), exactRun(q, cb, 20, func(a, b []byte) float64 {
		x := sign.Append(nil, vector.Decode(nil, vector.Float32, q.dims, a, nil))
		agree := 0
		for i := range x {
			agree += 8 - bits.OnesCount8(x[i]^b[i]^0x80) // binary's bytes have the top bit flipped
		}
		return float64(agree)
	}))
	// Queries of another model.
	other := testmodels.Model(t, "tiny-other", func(v modelgen.Vocab) modelgen.BERT {
		m := modelgen.BERT{Name: "other", Layers: 1, Width: 32, Heads: 2, FFN: 64, Context: 512, Pooling: modelgen.PoolingMean, WeightType: gguf.GGMLTypeF32, Seed: 8, Vocab: v}
		return m
	})
	runSynapse(t, nil, embedArgs(qin, other, p("q-other.arrow"))...).wantCode(t, 0)
	r := runSynapse(t, nil, "search", "--queries", p("q-other.arrow"), "--corpus", p("c.arrow"), "-o", p("x.trec"))
	if r.wantCode(t, 2); !strings.Contains(r.stderr, "model_digest") {
		t.Errorf("queries of another model: stderr %q; want model_digest named", r.stderr)
	}
	for _, args := range [][]string{
		{"--corpus", p("c.arrow"), "-o", p("x.trec")},                                                     // no queries
		{"--queries", p("q.arrow"), "--corpus", p("c.arrow"), "-o", p("x.csv")},                           // format
		{"--queries", p("c.arrow"), "--corpus", p("c.arrow"), "-o", p("x.trec")},                          // multi-chunk queries
		{"--queries", p("q.arrow"), "--corpus", p("c.arrow"), "--rescore", "4", "-o", p("x.trec")},        // float corpus
		{"--queries", p("q.arrow"), "--corpus", p("corpus.jsonl"), "-o", p("x.trec")},                     // not an embed output
		{"--queries", p("q.arrow"), "--corpus", p("c.arrow"), "-o", p("x.trec"), "--qrels", p("nothere")}, // qrels
	} {
		if r := runSynapse(t, nil, append([]string{"search"}, args...)...); r.code != 2 {
			t.Errorf("search %v: exit %d; want 2\n%s", args, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(p("x.trec")); err == nil {
		t.Error("a refused search wrote its output")
	}
}

// TestSearchRecallSciFact measures what binary and int8 lose against exact
// float32 search on SciFact titles, and what --rescore 4 wins back, at a
// size that fits make test: the first 300 documents and 60 test queries,
// embedded by a one-layer model of MiniLM's width (384, 12 heads, 1536
// FFN) with the fixture's BERT vocabulary. Each output is embedded once
// and shared by the four searches. TestSearchRecallSciFactFull (make
// test-recall) is the six-layer MiniLM over 1,000 documents.
func TestSearchRecallSciFact(t *testing.T) {
	model := testmodels.File(t, "minilm-l1-bge.gguf", func(path string) error {
		v, err := modelgen.VocabFromGGUF(testenv.Fixture(t, "models", "ref-bert-embed.gguf"))
		if err != nil {
			return err
		}
		m := modelgen.MiniLM(v)
		m.Name, m.Layers = "synapse-minilm-l1-random", 1
		return m.Write(path)
	})
	// Floors: measured 0.165 (binary), 0.458 (binary --rescore 4), 0.505
	// (int8) and 0.922 (int8 --rescore 4), the same in two runs (one
	// worker: llama.cpp is deterministic on one CPU); they sit about 0.06
	// to 0.12 below, for other CPUs' rounding, which moves near-ties. Chance
	// is 10/300 = 0.033 for a search whose scores are noise (a broken bit
	// order, wrong ranges) and 40/300 = 0.133 when its 40 candidates are
	// noise and the rescore exact: every floor is well above both.
	searchRecall(t, model, 300, 60, recallFloors{binary: 0.10, binaryRescore: 0.35, int8: 0.40, int8Rescore: 0.80})
}

// TestSearchRecallSciFactFull is TestSearchRecallSciFact with the
// six-layer MiniLM-shaped model over the first 1,000 documents and 100
// queries: about four times the CPU (138 against 35 CPU-s), so it runs in
// make test-recall (which sets SYNAPSE_RECALL_FULL=1; .ci/run calls it),
// not in make test.
func TestSearchRecallSciFactFull(t *testing.T) {
	if os.Getenv("SYNAPSE_RECALL_FULL") == "" {
		t.Skip("set SYNAPSE_RECALL_FULL=1 (make test-recall) for the 1,000-document run")
	}
	// Floors: measured 0.129, 0.332, 0.418 and 0.773 (random weights make
	// anisotropic vectors whose signs carry little, hence binary's low
	// figure); the floors sit below them by a margin for other CPUs'
	// rounding and catch a broken bit order, range or candidate set, which
	// fall far below.
	searchRecall(t, minilmModel(t), 1000, 100, recallFloors{binary: 0.05, binaryRescore: 0.25, int8: 0.30, int8Rescore: 0.65})
}

// recallFloors are the least recall@10 against exact float32 search that a
// recall test accepts.
type recallFloors struct{ binary, binaryRescore, int8, int8Rescore float64 }

// searchRecall embeds the first docs SciFact titles as float32, int8
// (calibrated on the float32 output: the same ranges as calibrating on the
// whole input) and binary, and the first queries test queries as float32;
// it reports recall@10 of each quantized search against the float32 search
// and fails below the floors.
func searchRecall(t *testing.T, model string, docs, queries int, floors recallFloors) {
	dir := filepath.Join(testenv.Fixtures(t), "corpora", "scifact")
	tmp := t.TempDir()
	in, qin := filepath.Join(tmp, "corpus.jsonl"), filepath.Join(tmp, "queries.jsonl")
	headLines(t, filepath.Join(dir, "corpus.jsonl"), in, docs)
	headLines(t, filepath.Join(dir, "queries-test.jsonl"), qin, queries)
	p := func(n string) string { return filepath.Join(tmp, n) }
	fields := []string{"--text-field", "title", "--id-field", "_id"}
	runSynapseWithin(t, 10*time.Minute, nil, embedArgs(qin, model, p("q.arrow"), "--id-field", "_id")...).wantCode(t, 0)
	runSynapseWithin(t, 10*time.Minute, nil, embedArgs(in, model, p("float32.arrow"), fields...)...).wantCode(t, 0)
	runSynapseWithin(t, 10*time.Minute, nil, embedArgs(in, model, p("int8.arrow"), append(fields, "--dtype", "int8", "--calibration", p("float32.arrow"))...)...).wantCode(t, 0)
	runSynapseWithin(t, 10*time.Minute, nil, embedArgs(in, model, p("binary.arrow"), append(fields, "--dtype", "binary")...)...).wantCode(t, 0)
	search := func(out string, args ...string) map[string][]searchHit {
		runSynapse(t, nil, append([]string{"search", "--queries", p("q.arrow"), "-k", "10", "-o", p(out)}, args...)...).wantCode(t, 0)
		return readTREC(t, p(out))
	}
	exact := search("f.trec", "--corpus", p("float32.arrow"))
	if len(exact) != queries {
		t.Fatalf("float32 search: %d queries; want %d", len(exact), queries)
	}
	recall := func(run map[string][]searchHit) float64 {
		var hit, all int
		for q, ws := range exact {
			got := map[string]bool{}
			for _, h := range run[q] {
				got[h.doc] = true
			}
			for _, w := range ws {
				all++
				if got[w.doc] {
					hit++
				}
			}
		}
		return float64(hit) / float64(all)
	}
	for _, c := range []struct {
		name  string
		args  []string
		floor float64
	}{
		{"binary", []string{"--corpus", p("binary.arrow")}, floors.binary},
		{"binary --rescore 4", []string{"--corpus", p("binary.arrow"), "--rescore", "4", "--rescore-with", p("float32.arrow")}, floors.binaryRescore},
		{"int8", []string{"--corpus", p("int8.arrow")}, floors.int8},
		{"int8 --rescore 4", []string{"--corpus", p("int8.arrow"), "--rescore", "4", "--rescore-with", p("float32.arrow")}, floors.int8Rescore},
	} {
		r := recall(search(strings.ReplaceAll(c.name, " ", "_")+".trec", c.args...))
		t.Logf("recall@10 of %s against exact float32: %.3f (floor %.2f)", c.name, r, c.floor)
		if r < c.floor {
			t.Errorf("recall@10 of %s: %.3f; want ≥ %.2f", c.name, r, c.floor)
		}
	}
}

func headLines(t *testing.T, src, dst string, n int) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(dst, []byte(strings.Join(lines[:min(n, len(lines))], "")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// minilmModel is the MiniLM-shaped model (modelgen.MiniLM: 6 layers, 384
// wide, random weights) with the fixture's BERT vocabulary.
func minilmModel(t *testing.T) string {
	t.Helper()
	return testmodels.File(t, "minilm-bge.gguf", func(path string) error {
		r := runSynapse(t, nil, "gen-model", "--kind", "minilm", "--vocab-from", testenv.Fixture(t, "models", "ref-bert-embed.gguf"), "--out", path)
		if r.code != 0 {
			return fmt.Errorf("gen-model: %s", r.stderr)
		}
		return nil
	})
}

// TestExampleSciFact runs examples/scifact/run.sh on a generated data set
// of SciFact's layout (corpus.jsonl with _id, title and text,
// queries-test.jsonl, qrels/test.tsv) with generated models: every step
// succeeds, the runs it writes hold every query, and the dense search's
// --qrels figures are what eval prints for its run file.
func TestExampleSciFact(t *testing.T) {
	data, out := t.TempDir(), t.TempDir()
	docs := testCorpus(40)
	writeJSONL(t, filepath.Join(data, "corpus.jsonl"), docs)
	var qs []map[string]any
	var qrels strings.Builder
	qrels.WriteString("query-id\tcorpus-id\tscore\n")
	for i, d := range docs[:8] {
		qs = append(qs, map[string]any{"_id": fmt.Sprint("q", i), "text": d["title"]})
		fmt.Fprintf(&qrels, "q%d\t%v\t1\n", i, d["_id"])
	}
	writeJSONL(t, filepath.Join(data, "queries-test.jsonl"), qs)
	if err := os.MkdirAll(filepath.Join(data, "qrels"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "qrels", "test.tsv"), []byte(qrels.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", repoPath("examples", "scifact", "run.sh"), data, tinyModel(t), testmodels.Reranker(t), out)
	cmd.Env = append(os.Environ(), "SYNAPSE="+testenv.Binary(t), "SYNAPSE_LLAMA_LIB="+testenv.LlamaLib(t))
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh: %v\n%s", err, b)
	}
	for _, run := range []string{"dense.trec", "binary.trec", "reranked.trec"} {
		if got := readTREC(t, filepath.Join(out, run)); len(got) != len(qs) {
			t.Errorf("%s: %d queries; want %d", run, len(got), len(qs))
		}
	}
	ev := runSynapse(t, nil, "eval", "--run", filepath.Join(out, "dense.trec"), "--qrels", filepath.Join(data, "qrels", "test.tsv"))
	ev.wantCode(t, 0)
	// The dense search is the script's first to print metrics.
	ndcg := regexp.MustCompile(`(?m)^nDCG@10 .*$`)
	if want, got := ndcg.FindString(ev.stdout), ndcg.FindString(string(b)); want == "" || got != want {
		t.Errorf("the dense search's --qrels printed %q; eval of its run prints %q\n%s", got, want, b)
	}
}

// TestEmbedDtypeResume: an int8 run calibrated on the input's first
// documents, killed once it has checkpointed, resumes to the bytes and
// ranges of an uninterrupted run (the resumed run calibrates on the same
// documents, and a resume under other ranges would be refused by the
// settings digest).
func TestEmbedDtypeResume(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "titles.jsonl")
	resumeCorpus(t, in, 3000)
	args := func(out string, extra ...string) []string {
		return append([]string{"embed", in, "-m", tinyModel(t), "-o", out, "--batch-tokens", "160", "--workers", "2", "--threads", "1",
			"-q", "--dtype", "int8", "--calibration-docs", "200"}, extra...)
	}
	clean := filepath.Join(dir, "clean.arrow")
	runSynapse(t, nil, args(clean)...).wantCode(t, exitPartial)
	out := filepath.Join(dir, "killed.arrow")
	cmd := synapseCmd(context.Background(), t, nil, args(out, "--chaos", "delay=4ms")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	waitCheckpoint(t, out, exited)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	if _, err := os.Stat(output.CheckpointPath(out)); err != nil {
		t.Fatalf("no checkpoint after the kill: %v\nstderr:\n%s", err, stderr.String())
	}
	res := runSynapse(t, nil, slices.DeleteFunc(args(out, "--resume"), func(a string) bool { return a == "-q" })...)
	res.wantCode(t, exitPartial)
	if !strings.Contains(res.stdout, "in this run, the rest by the interrupted run") {
		t.Errorf("the resumed run does not say it resumed:\n%s", res.stdout)
	}
	want, got := readVecFile(t, clean), readVecFile(t, out)
	wr, _ := want.meta.GetValue(vector.MetaRanges)
	gr, _ := got.meta.GetValue(vector.MetaRanges)
	if wr == "" || gr != wr {
		t.Errorf("resumed ranges %.80s…; want the uninterrupted run's %.80s…", gr, wr)
	}
	if !slices.Equal(got.ids, want.ids) || !slices.EqualFunc(got.rows, want.rows, bytes.Equal) {
		t.Errorf("resumed int8 rows differ from the uninterrupted run's (%d rows; want %d)", len(got.rows), len(want.rows))
	}
}
