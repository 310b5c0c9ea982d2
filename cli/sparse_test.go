//go:build cgo

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// sparseModel writes a generated BERT masked-LM (onnxtest's encoder, one
// dense layer, BERT's MLM head; logits its only output, as a
// BertForMaskedLM export) of a 24-token context and returns its directory
// and encoder.
func sparseModel(t *testing.T) (string, onnxtest.Encoder) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mlm")
	enc := onnxtest.Tiny()
	enc.Positions, enc.Layers, enc.Pooled, enc.NoHidden, enc.MLM = 24, 1, false, true, true
	enc, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	return dir, enc
}

// spladeOf is SPLADE's vector of one sequence, in float64 from the
// model's weights apart from synapse: w_v = max over the tokens of
// log(1 + relu(logit_tv)), where > 0; with k > 0 the k largest (ties: the
// smaller index); by index.
func spladeOf(enc onnxtest.Encoder, ids []int32, k int) ([]uint32, []float64) {
	w := make([]float64, enc.Vocab)
	for _, row := range enc.MLMLogits(ids) {
		for v, x := range row {
			w[v] = max(w[v], math.Log1p(max(0, x)))
		}
	}
	var ix []uint32
	for v, x := range w {
		if x > 0 {
			ix = append(ix, uint32(v))
		}
	}
	if k > 0 && len(ix) > k {
		slices.SortStableFunc(ix, func(a, b uint32) int {
			switch {
			case w[a] > w[b]:
				return -1
			case w[a] < w[b]:
				return 1
			}
			return int(a) - int(b)
		})
		ix = slices.Clone(ix[:k])
		slices.Sort(ix)
	}
	vals := make([]float64, len(ix))
	for i, v := range ix {
		vals[i] = w[v]
	}
	return ix, vals
}

// sparseRow is one row of a sparse output.
type sparseRow struct {
	ID, ChunkID          string
	Chunk                int32
	TokenStart, TokenEnd int32
	NTokens              int32
	Text                 string
	Indices              []uint32
	Values               []float32
}

// readSparse reads an Arrow IPC sparse output.
func readSparse(t *testing.T, path string) (*arrow.Schema, []sparseRow) {
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
		t.Fatalf("read %s: %v", path, err)
	}
	defer r.Close()
	var rows []sparseRow
	for b := range r.NumRecords() {
		rec, err := r.RecordBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) arrow.Array {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) != 1 {
				t.Fatalf("output has %d columns %q; want 1", len(idx), name)
			}
			return rec.Column(idx[0])
		}
		i32 := func(name string) []int32 { return col(name).(*array.Int32).Int32Values() }
		ids, cids := col(output.ColID).(*array.String), col(output.ColChunkID).(*array.String)
		ix, vals := col(output.ColSparseIndices).(*array.List), col(output.ColSparseValues).(*array.List)
		ixv, valv := ix.ListValues().(*array.Uint32).Uint32Values(), vals.ListValues().(*array.Float32).Float32Values()
		chunk, ts, te, nt := i32(output.ColChunk), i32(output.ColTokenStart), i32(output.ColTokenEnd), i32(output.ColNTokens)
		var texts *array.String
		if idx := rec.Schema().FieldIndices(output.ColText); len(idx) == 1 {
			texts = rec.Column(idx[0]).(*array.String)
		}
		for i := range int(rec.NumRows()) {
			a, e := ix.ValueOffsets(i)
			va, ve := vals.ValueOffsets(i)
			row := sparseRow{ID: ids.Value(i), ChunkID: cids.Value(i), Chunk: chunk[i], TokenStart: ts[i], TokenEnd: te[i], NTokens: nt[i],
				Indices: slices.Clone(ixv[a:e]), Values: slices.Clone(valv[va:ve])}
			if texts != nil {
				row.Text = texts.Value(i)
			}
			rows = append(rows, row)
		}
	}
	return r.Schema(), rows
}

// TestEmbedSparse: every chunk's sparse vector is SPLADE's, computed in
// float64 from the generated masked-LM's weights apart from synapse
// (weights within 1e-5, indices equal), for plain chunks of 8 tokens, with
// --sparse-top-k and with --truncate; the rows carry embed's columns; the
// JSONL output holds the same vectors as {"indices","values"}.
func TestEmbedSparse(t *testing.T) {
	dir := t.TempDir()
	model, enc := sparseModel(t)
	in := filepath.Join(dir, "c.jsonl")
	docs := lateCorpus(t, in, 25)
	env := []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	for _, tt := range []struct {
		name  string
		topK  int
		chunk int
		more  []string
	}{
		{"every weight", 0, 8, nil},
		{"top 6", 6, 8, nil},
		{"truncated, top 3", 3, 8, []string{"--truncate"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".arrow")
			args := append([]string{"embed", in, "-m", model, "-o", out, "-q", "--vectors", "sparse", "--chunk-tokens", fmt.Sprint(tt.chunk),
				"--sparse-top-k", fmt.Sprint(tt.topK), "--workers", "1", "--threads", "1", "--with-text"}, tt.more...)
			runSynapse(t, env, args...).wantCode(t, exitOK)
			sc, rows := readSparse(t, out)
			if sc.HasField(output.ColEmbedding) {
				t.Errorf("schema %v has an embedding column", sc)
			}
			checked, next := 0, map[string]int32{}
			for _, r := range rows {
				toks := docs[r.ID]
				if r.TokenStart != next[r.ID] || r.ChunkID != output.ChunkID(r.ID, r.Chunk) || int(r.NTokens) != int(r.TokenEnd-r.TokenStart)+2 {
					t.Fatalf("%s chunk %d: tokens [%d,%d), %d tokens, chunk_id %s", r.ID, r.Chunk, r.TokenStart, r.TokenEnd, r.NTokens, r.ChunkID)
				}
				next[r.ID] = r.TokenEnd
				ids := slices.Concat([]int32{2}, toks[r.TokenStart:r.TokenEnd], []int32{3})
				ix, want := spladeOf(enc, ids, tt.topK)
				if !slices.Equal(r.Indices, ix) {
					t.Fatalf("%s chunk %d: indices %v; want %v", r.ID, r.Chunk, r.Indices, ix)
				}
				for j := range ix {
					if d := math.Abs(float64(r.Values[j]) - want[j]); d > 1e-5 {
						t.Errorf("%s chunk %d term %d: %g; want %g", r.ID, r.Chunk, ix[j], r.Values[j], want[j])
					}
				}
				if tt.topK > 0 && len(ix) != tt.topK || tt.topK == 0 && len(ix) == enc.Vocab {
					t.Errorf("%s chunk %d: %d terms", r.ID, r.Chunk, len(ix))
				}
				checked++
			}
			truncated := len(tt.more) > 0
			for id, toks := range docs {
				if want := int32(len(toks)); !truncated && next[id] != want || truncated && next[id] != min(want, int32(tt.chunk)) {
					t.Errorf("%s: chunks end at token %d of %d", id, next[id], len(toks))
				}
			}
			if checked == 0 {
				t.Fatal("no rows")
			}
			if tt.topK != 6 {
				return
			}
			// JSON Lines: the same vectors, as {"indices":[…],"values":[…]}.
			jl := strings.TrimSuffix(out, ".arrow") + ".jsonl"
			args[5] = jl
			runSynapse(t, env, args...).wantCode(t, exitOK)
			data, err := os.ReadFile(jl)
			if err != nil {
				t.Fatal(err)
			}
			lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
			if len(lines) != len(rows) {
				t.Fatalf("%d JSONL rows; want %d", len(lines), len(rows))
			}
			for i, line := range lines {
				var row struct {
					ChunkID string `json:"chunk_id"`
					Sparse  struct {
						Indices []uint32  `json:"indices"`
						Values  []float32 `json:"values"`
					} `json:"sparse"`
					Indices any `json:"sparse_indices"`
				}
				if err := json.Unmarshal(line, &row); err != nil {
					t.Fatalf("line %d: %v", i, err)
				}
				if row.ChunkID != rows[i].ChunkID || !slices.Equal(row.Sparse.Indices, rows[i].Indices) || !slices.Equal(row.Sparse.Values, rows[i].Values) || row.Indices != nil {
					t.Fatalf("JSONL line %d: %s; want the Arrow row %+v", i, line, rows[i])
				}
			}
		})
	}
}

// TestEmbedSparseRefused: a model without masked-LM logits, an old worker
// (drill) and the options sparse vectors cannot take are refused before
// any work with exit 2 and the reason.
func TestEmbedSparseRefused(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	lateCorpus(t, in, 3)
	model, _ := sparseModel(t)
	dense := lateModel(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no masked-LM logits", []string{"-m", dense}, "has no masked-LM logits output"},
		{"old worker", []string{"-m", model, "--chaos", "old-worker=1"}, "do not announce it"},
		{"negative top-k", []string{"-m", model, "--sparse-top-k", "-1"}, "--sparse-top-k -1 must not be negative"},
		{"late chunking", []string{"-m", model, "--late-chunking", "--chunk-tokens", "4"}, "--vectors sparse with --late-chunking"},
		{"dtype", []string{"-m", model, "--dtype", "int8"}, "--dtype int8"},
		{"dims", []string{"-m", model, "--dims", "4"}, "--vectors sparse with --dims"},
		{"pooling", []string{"-m", model, "--pooling", "cls"}, "--vectors sparse with --pooling cls"},
		{"unknown kind", []string{"-m", model, "--vectors", "bogus"}, `--vectors "bogus": want dense, sparse or tokens`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprintf("o%d.arrow", i))
			res := runSynapse(t, []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}, append([]string{"embed", in, "-o", out, "--vectors", "sparse", "--workers", "1", "--threads", "1"}, tt.args...)...)
			res.wantCode(t, exitUsage)
			if !strings.Contains(res.stderr, tt.want) {
				t.Errorf("stderr %q; want it to say %q", res.stderr, tt.want)
			}
			if strings.Contains(res.stdout, "embedded") {
				t.Errorf("stdout %q: want no work done", res.stdout)
			}
		})
	}
	res := runSynapse(t, nil, "embed", in, "-m", dense, "-o", filepath.Join(dir, "d.arrow"), "--sparse-top-k", "3")
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "--sparse-top-k needs --vectors sparse") {
		t.Errorf("stderr %q; want it to say --sparse-top-k needs --vectors sparse", res.stderr)
	}
}

// TestEmbedSparseResumeShardsPrevious: a sparse run killed after its first
// checkpoint and resumed writes the bytes of an uninterrupted run; two
// shards merged give its rows; --previous of it reuses every document; a
// dense run refuses it as --previous, and a sparse run refuses a dense one
// (and one of another --sparse-top-k), naming the difference.
func TestEmbedSparseResumeShardsPrevious(t *testing.T) {
	dir := t.TempDir()
	model, _ := sparseModel(t)
	in := filepath.Join(dir, "c.jsonl")
	lateCorpus(t, in, 1500)
	env := []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	args := func(out string, more ...string) []string {
		return append([]string{"embed", in, "-m", model, "-o", out, "--vectors", "sparse", "--sparse-top-k", "12", "--chunk-tokens", "6",
			"--workers", "1", "--threads", "1", "--batch-tokens", "48"}, more...)
	}
	clean := filepath.Join(dir, "clean.arrow")
	runSynapse(t, env, args(clean, "-q")...).wantCode(t, exitOK)
	_, want := readSparse(t, clean)

	out := filepath.Join(dir, "killed.arrow")
	cmd := synapseCmd(context.Background(), t, env, args(out, "--chaos", "delay=5ms", "-q")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	waitCheckpoint(t, out, exited)
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	res := runSynapse(t, env, args(out, "--resume")...)
	res.wantCode(t, exitOK)
	if !strings.Contains(res.stdout, "the rest by the interrupted run") {
		t.Errorf("the summary does not say the run was resumed:\n%s", res.stdout)
	}
	a, _ := os.ReadFile(clean)
	b, _ := os.ReadFile(out)
	if !bytes.Equal(a, b) {
		_, got := readSparse(t, out)
		sameSparse(t, "resumed sparse run vs an uninterrupted one", got, want)
		t.Errorf("resumed output: %d bytes, not the uninterrupted run's %d", len(b), len(a))
	}

	sharded := filepath.Join(dir, "sh.arrow")
	for i := range 2 {
		runSynapse(t, env, args(sharded, "-q", "--shard", fmt.Sprintf("%d/2", i))...).wantCode(t, exitOK)
	}
	merged := filepath.Join(dir, "merged.arrow")
	runSynapse(t, nil, "merge", sharded, "-o", merged, "-q").wantCode(t, exitOK)
	_, got := readSparse(t, merged)
	sameSparse(t, "two sparse shards merged vs one run", got, want)

	inc := filepath.Join(dir, "inc.arrow")
	res = runSynapse(t, env, args(inc, "--previous", clean)...)
	res.wantCode(t, exitOK)
	_, got = readSparse(t, inc)
	sameSparse(t, "--previous of the same sparse run", got, want)
	if !strings.Contains(res.stdout, "1500 reused") {
		t.Errorf("summary:\n%s\nwant it to say 1500 reused", res.stdout)
	}
	res = runSynapse(t, env, "embed", in, "-m", model, "-o", filepath.Join(dir, "k5.arrow"), "--vectors", "sparse", "--sparse-top-k", "5",
		"--chunk-tokens", "6", "--workers", "1", "--threads", "1", "--previous", clean)
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "sparse_top_k: previous 12, this run 5") {
		t.Errorf("--sparse-top-k 5 with a --previous of 12: stderr %q; want the difference named", res.stderr)
	}
	res = runSynapse(t, env, "embed", in, "-m", lateModel(t), "-o", filepath.Join(dir, "dense.arrow"), "--chunk-tokens", "6",
		"--workers", "1", "--threads", "1", "--previous", clean)
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, `output: previous "sparse", this run ""`) {
		t.Errorf("dense run with a sparse --previous: stderr %q; want it to name the output kinds", res.stderr)
	}
	denseOut := filepath.Join(dir, "dense-clean.arrow")
	runSynapse(t, env, "embed", in, "-m", lateModel(t), "-o", denseOut, "-q", "--workers", "1", "--threads", "1").wantCode(t, exitOK)
	res = runSynapse(t, env, args(filepath.Join(dir, "inc.arrow"), "--previous", denseOut)...)
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, `output: previous "", this run "sparse"`) {
		t.Errorf("sparse run with a dense --previous: stderr %q; want it to name the output kinds", res.stderr)
	}
}

// sameSparse fails unless two sparse outputs hold the same rows, bit for bit.
func sameSparse(t *testing.T, what string, got, want []sparseRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows; want %d", what, len(got), len(want))
	}
	for i := range got {
		if fmt.Sprintf("%+v", got[i]) != fmt.Sprintf("%+v", want[i]) || !slices.EqualFunc(got[i].Values, want[i].Values, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
			t.Fatalf("%s: row %d: got %+v; want %+v", what, i, got[i], want[i])
		}
	}
}

// TestSearchSparse: synapse search of sparse queries over a sparse corpus,
// both embedded by synapse embed --vectors sparse, ranks each query's
// documents by the sparse dot product of their best chunk, computed here
// from the two outputs' rows in float64 (ties by id); dense queries against
// the sparse corpus are refused.
func TestSearchSparse(t *testing.T) {
	dir := t.TempDir()
	model, _ := sparseModel(t)
	in := filepath.Join(dir, "c.jsonl")
	lateCorpus(t, in, 60)
	qin := filepath.Join(dir, "q.jsonl")
	writeJSONL(t, qin, []map[string]any{{"id": "q0", "text": "protein cell"}, {"id": "q1", "text": "the gene study"}, {"id": "q2", "text": "hello world"}})
	env := []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	embed := func(in, out string, more ...string) {
		runSynapse(t, env, append([]string{"embed", in, "-m", model, "-o", out, "-q", "--vectors", "sparse", "--chunk-tokens", "8",
			"--workers", "1", "--threads", "1"}, more...)...).wantCode(t, exitOK)
	}
	corpus, queries := filepath.Join(dir, "c.arrow"), filepath.Join(dir, "q.arrow")
	embed(in, corpus, "--sparse-top-k", "20")
	embed(qin, queries)
	run := filepath.Join(dir, "run.trec")
	const k = 10
	runSynapse(t, nil, "search", "--queries", queries, "--corpus", corpus, "-k", fmt.Sprint(k), "-o", run).wantCode(t, exitOK)
	got := readTREC(t, run)
	_, crow := readSparse(t, corpus)
	_, qrow := readSparse(t, queries)
	for _, q := range qrow {
		w := map[uint32]float64{}
		for j, ix := range q.Indices {
			w[ix] = float64(q.Values[j])
		}
		best := map[string]float64{}
		for _, c := range crow {
			var s float64
			for j, ix := range c.Indices {
				s += w[ix] * float64(c.Values[j])
			}
			if b, ok := best[c.ID]; !ok || s > b {
				best[c.ID] = s
			}
		}
		var want []searchHit
		for id, s := range best {
			want = append(want, searchHit{id, s})
		}
		slices.SortFunc(want, func(a, b searchHit) int {
			switch {
			case float32(a.score) > float32(b.score):
				return -1
			case float32(a.score) < float32(b.score):
				return 1
			}
			return strings.Compare(a.doc, b.doc)
		})
		want = want[:k]
		if len(got[q.ID]) != k {
			t.Fatalf("query %s: %d hits; want %d", q.ID, len(got[q.ID]), k)
		}
		for i, h := range got[q.ID] {
			if h.doc != want[i].doc || math.Abs(h.score-want[i].score) > 1e-5*max(1, want[i].score) {
				t.Errorf("query %s rank %d: %s %.6f; want %s %.6f", q.ID, i+1, h.doc, h.score, want[i].doc, want[i].score)
			}
		}
	}
	dense := filepath.Join(dir, "dq.arrow")
	runSynapse(t, env, "embed", qin, "-m", lateModel(t), "-o", dense, "-q", "--workers", "1", "--threads", "1").wantCode(t, exitOK)
	res := runSynapse(t, nil, "search", "--queries", dense, "--corpus", corpus, "-o", filepath.Join(dir, "x.trec"))
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "dense queries cannot search a sparse corpus") {
		t.Errorf("dense queries over a sparse corpus: stderr %q; want them refused", res.stderr)
	}
}

// TestEmbedSparseSpladeModules: a sentence-transformers SparseEncoder
// directory (modules.json: MLMTransformer, then SpladePooling) embeds with
// --vectors sparse exactly as the bare masked LM does when its
// SpladePooling is max + relu; one asking for sum or log1p_relu, and a
// dense run of it, are refused before any work, naming why.
func TestEmbedSparseSpladeModules(t *testing.T) {
	dir := t.TempDir()
	bare, _ := sparseModel(t)
	st := filepath.Join(dir, "st")
	if err := os.CopyFS(st, os.DirFS(bare)); err != nil {
		t.Fatal(err)
	}
	writeFile := func(t *testing.T, path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(st, "modules.json"), `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.sparse_encoder.models.MLMTransformer"},
		{"idx":1,"name":"1","path":"1_SpladePooling","type":"sentence_transformers.sparse_encoder.models.SpladePooling"}]`)
	pooling := filepath.Join(st, "1_SpladePooling", "config.json")
	writeFile(t, pooling, `{"pooling_strategy": "max", "activation_function": "relu", "word_embedding_dimension": null}`)
	in := filepath.Join(dir, "c.jsonl")
	lateCorpus(t, in, 12)
	env := []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	embed := func(model, out string, more ...string) embedResult {
		return runSynapse(t, env, append([]string{"embed", in, "-m", model, "-o", out, "-q", "--chunk-tokens", "8", "--workers", "1", "--threads", "1"}, more...)...)
	}
	embed(bare, filepath.Join(dir, "bare.arrow"), "--vectors", "sparse").wantCode(t, exitOK)
	embed(st, filepath.Join(dir, "st.arrow"), "--vectors", "sparse").wantCode(t, exitOK)
	_, want := readSparse(t, filepath.Join(dir, "bare.arrow"))
	schema, got := readSparse(t, filepath.Join(dir, "st.arrow"))
	sameSparse(t, "SparseEncoder directory", got, want)
	for _, key := range []string{"synapse.modules", "synapse.pooling"} { // not a Pooling(mean) the run does not apply
		if v, _ := schema.Metadata().GetValue(key); !strings.Contains(v, "splade-max") || strings.Contains(v, "Pooling(mean") {
			t.Errorf("%s %q; want the SPLADE pooling the run applies (splade-max)", key, v)
		}
	}

	res := embed(st, filepath.Join(dir, "dense.arrow"))
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "is a sparse encoder") || !strings.Contains(res.stderr, "--vectors sparse") {
		t.Errorf("a dense run: stderr %q; want it to say the model is a sparse encoder and to give --vectors sparse", res.stderr)
	}
	for _, cfg := range []string{`{"pooling_strategy": "sum"}`, `{"activation_function": "log1p_relu"}`} {
		writeFile(t, pooling, cfg)
		res := embed(st, filepath.Join(dir, "other.arrow"), "--vectors", "sparse")
		res.wantCode(t, exitUsage)
		if !strings.Contains(res.stderr, "synapse computes max over the tokens of log(1 + relu(logit)) only") || strings.Contains(res.stdout, "embedded") {
			t.Errorf("SpladePooling %s: stderr %q, stdout %q; want a refusal before any work", cfg, res.stderr, res.stdout)
		}
	}
}
