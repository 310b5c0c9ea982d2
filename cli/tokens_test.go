//go:build cgo

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
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

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/model/convert/converttest"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// The generated ColBERT model: a 2-layer random BERT (converttest.Tiny,
// real attention) with PyLate's markers added to its vocabulary, a Dense
// projection 16 → 8 without bias (PyLate's Dense), and PyLate's config: queries of 12
// tokens expanded with [MASK] (not attended), documents of 16, the
// skiplist "," and ".".
const (
	colbertQueryLen = 12
	colbertDocLen   = 16
	colbertDims     = 8
)

// colbertModel writes the generated ColBERT checkpoint as a safetensors
// directory (synapse converts it) and returns it with its projection.
func colbertModel(t *testing.T, dir string) (string, converttest.BERT, onnxtest.Dense) {
	t.Helper()
	b := converttest.Tiny()
	b.Added = []string{"[Q] ", "[D] "}
	p := filepath.Join(dir, "tiny-colbert")
	if err := b.WriteDir(p); err != nil {
		t.Fatal(err)
	}
	dense, err := onnxtest.WriteST(p, onnxtest.ST{Dense: []onnxtest.Dense{{In: b.Hidden, Out: colbertDims, NoBias: true, Activation: "torch.nn.modules.linear.Identity", Seed: 35}}})
	if err != nil {
		t.Fatal(err)
	}
	// PyLate names its own Dense class in modules.json.
	mods, err := os.ReadFile(filepath.Join(p, "modules.json"))
	if err != nil {
		t.Fatal(err)
	}
	mods = bytes.ReplaceAll(mods, []byte("sentence_transformers.models.Dense"), []byte("pylate.models.Dense.Dense"))
	if err := os.WriteFile(filepath.Join(p, "modules.json"), mods, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`{"query_prefix": "[Q] ", "document_prefix": "[D] ", "query_length": %d, "document_length": %d,
		"do_query_expansion": true, "attend_to_expansion_tokens": false, "skiplist_words": [",", "."], "similarity_fn_name": "MaxSim"}`, colbertQueryLen, colbertDocLen)
	if err := os.WriteFile(filepath.Join(p, "config_sentence_transformers.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b, dense[0]
}

// colbertCorpus writes n documents of onnxtest.Words with "," and "."
// among them and returns each one's token ids (the vocabulary's, without
// synapse's tokenizer).
func colbertCorpus(t *testing.T, path string, n int, seed uint64) map[string][]int32 {
	t.Helper()
	vocab := converttest.Vocab()
	idOf := func(w string) int32 { return int32(slices.Index(vocab, w)) }
	rng := rand.New(rand.NewPCG(seed, 35))
	words := append(slices.Clone(onnxtest.Words), ",", ".")
	ids := map[string][]int32{}
	var docs []map[string]any
	for d := range n {
		ws := make([]string, 1+rng.IntN(40))
		doc := make([]int32, len(ws))
		for i := range ws {
			ws[i] = words[rng.IntN(len(words))]
			doc[i] = idOf(ws[i])
		}
		id := fmt.Sprintf("d%03d", d)
		ids[id] = doc
		docs = append(docs, map[string]any{"id": id, "text": strings.Join(ws, " ")})
	}
	writeJSONL(t, path, docs)
	return ids
}

// colbertVectors computes, in float64 apart from synapse, the token vectors
// PyLate's ColBERT gives for ids (the marked chunk, expansion included)
// whose first attend tokens are attended: each token's hidden state
// through the projection, L2-normalised; the tokens in skip left out.
func colbertVectors(b converttest.BERT, d onnxtest.Dense, ids []int32, attend int, skip map[int32]bool) [][]float64 {
	var out [][]float64
	for j, h := range b.HiddenStatesAttend(ids, attend) {
		if skip[ids[j]] {
			continue
		}
		v := make([]float64, d.Out)
		var n float64
		for o := range v {
			for i, x := range h {
				v[o] += float64(d.W[o*d.In+i]) * x
			}
			n += v[o] * v[o]
		}
		for o := range v {
			v[o] /= math.Sqrt(n)
		}
		out = append(out, v)
	}
	return out
}

// tokenRow is one row of a multi-vector output.
type tokenRow struct {
	ID                   string
	Chunk                int32
	TokenStart, TokenEnd int32
	NTokens              int32
	Vectors              [][]float32
}

// readTokens reads an Arrow IPC multi-vector output of float32 or float16
// token vectors.
func readTokens(t *testing.T, path string) (*arrow.Schema, []tokenRow) {
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
	var rows []tokenRow
	for b := range r.NumRecords() {
		rec, err := r.RecordBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		i32 := func(name string) []int32 { return col(name).(*array.Int32).Int32Values() }
		ids := col(output.ColID).(*array.String)
		lists := col(output.ColTokenVectors).(*array.List)
		fsl := lists.ListValues().(*array.FixedSizeList)
		dims := int(fsl.DataType().(*arrow.FixedSizeListType).Len())
		value := func(k int) float32 {
			switch v := fsl.ListValues().(type) {
			case *array.Float32:
				return v.Value(k)
			case *array.Float16:
				return v.Value(k).Float32()
			}
			t.Fatalf("token vectors of %s", fsl.ListValues().DataType())
			return 0
		}
		for i := range int(rec.NumRows()) {
			row := tokenRow{ID: ids.Value(i), Chunk: i32(output.ColChunk)[i], TokenStart: i32(output.ColTokenStart)[i],
				TokenEnd: i32(output.ColTokenEnd)[i], NTokens: i32(output.ColNTokens)[i]}
			a, e := lists.ValueOffsets(i)
			for tok := a; tok < e; tok++ {
				v := make([]float32, dims)
				for d := range v {
					v[d] = value(int(tok)*dims + d)
				}
				row.Vectors = append(row.Vectors, v)
			}
			rows = append(rows, row)
		}
	}
	return r.Schema(), rows
}

// TestEmbedTokens: every row's token vectors equal PyLate's, computed in
// float64 from the generated checkpoint's weights apart from synapse
// (cosine ≥ 0.9999 per token, the same tokens): documents as [CLS] [D]
// window [SEP] in windows of document_length, "," and "." left out;
// queries as [CLS] [Q] query [SEP] expanded with [MASK] to query_length,
// the expansion outside the attention mask and every vector kept; float16
// gives the same vectors to float16's precision.
func TestEmbedTokens(t *testing.T) {
	work := t.TempDir()
	model, b, dense := colbertModel(t, work)
	env := append(ortEnv(t), "SYNAPSE_MODELS="+filepath.Join(work, "models"))
	in := filepath.Join(work, "c.jsonl")
	docs := colbertCorpus(t, in, 30, 1)
	vocab := b.Vocab()
	cls, sep, mask, q, d := int32(2), int32(3), int32(4), int32(slices.Index(vocab, "[Q] ")), int32(slices.Index(vocab, "[D] "))
	skip := map[int32]bool{int32(slices.Index(vocab, ",")): true, int32(slices.Index(vocab, ".")): true}
	for _, tt := range []struct {
		name   string
		args   []string
		minCos float64
	}{
		{"documents", nil, 0.9999},
		{"queries", []string{"--as-query"}, 0.9999},
		{"documents float16", []string{"--dtype", "float16"}, 0.999},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(work, strings.ReplaceAll(tt.name, " ", "_")+".arrow")
			args := append([]string{"embed", in, "-m", model, "-o", out, "-q", "--vectors", "tokens", "--workers", "1", "--threads", "1"}, tt.args...)
			runSynapse(t, env, args...).wantCode(t, exitOK)
			_, rows := readTokens(t, out)
			query := slices.Contains(tt.args, "--as-query")
			next, checked := map[string]int32{}, 0
			for _, r := range rows {
				toks := docs[r.ID]
				if r.TokenStart != next[r.ID] {
					t.Fatalf("%s chunk %d starts at token %d; want %d", r.ID, r.Chunk, r.TokenStart, next[r.ID])
				}
				next[r.ID] = r.TokenEnd
				ids := slices.Concat([]int32{cls, d}, toks[r.TokenStart:r.TokenEnd], []int32{sep})
				attend, rowSkip := len(ids), skip
				if query {
					ids[1], rowSkip = q, nil
					for len(ids) < colbertQueryLen {
						ids = append(ids, mask)
					}
				}
				if int(r.NTokens) != len(ids) {
					t.Fatalf("%s chunk %d: n_tokens %d; want %d", r.ID, r.Chunk, r.NTokens, len(ids))
				}
				want := colbertVectors(b, dense, ids, attend, rowSkip)
				if len(r.Vectors) != len(want) {
					t.Fatalf("%s chunk %d: %d token vectors; want %d", r.ID, r.Chunk, len(r.Vectors), len(want))
				}
				for j := range want {
					if c := cosine64(r.Vectors[j], want[j]); !(c >= tt.minCos) {
						t.Errorf("%s chunk %d token %d: cosine %.6f; want ≥ %v", r.ID, r.Chunk, j, c, tt.minCos)
					}
					checked++
				}
			}
			for id, toks := range docs {
				want := int32(len(toks))
				if query {
					want = min(want, colbertQueryLen-3)
				}
				if next[id] != want {
					t.Errorf("%s: chunks end at token %d; want %d", id, next[id], want)
				}
			}
			if checked == 0 {
				t.Fatal("no token vectors checked")
			}
			if tt.name == "documents" {
				sameJSONLTokens(t, env, args, out, rows)
			}
		})
	}
}

// sameJSONLTokens runs args again into a .jsonl output and checks that its
// token_vectors member holds the Arrow rows' vectors, a list of lists.
func sameJSONLTokens(t *testing.T, env, args []string, arrowOut string, rows []tokenRow) {
	t.Helper()
	jl := strings.TrimSuffix(arrowOut, ".arrow") + ".jsonl"
	args = slices.Clone(args)
	args[slices.Index(args, arrowOut)] = jl
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
			ChunkID string      `json:"chunk_id"`
			Vectors [][]float32 `json:"token_vectors"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if row.ChunkID != output.ChunkID(rows[i].ID, rows[i].Chunk) || !slices.EqualFunc(row.Vectors, rows[i].Vectors, slices.Equal) {
			t.Fatalf("JSONL line %d: %s; want the Arrow row %+v", i, line, rows[i])
		}
	}
}

// TestEmbedTokensRefused: a model without a ColBERT projection, an old
// worker (drill), a dense run of a ColBERT model and the options token
// vectors cannot take are refused before any work with exit 2 and the
// reason.
func TestEmbedTokensRefused(t *testing.T) {
	work := t.TempDir()
	in := filepath.Join(work, "c.jsonl")
	colbertCorpus(t, in, 3, 1)
	model, _, _ := colbertModel(t, work)
	plain := lateModel(t)
	env := append(ortEnv(t), "SYNAPSE_MODELS="+filepath.Join(work, "models"))
	tokens := []string{"--vectors", "tokens"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no projection", append([]string{"-m", plain}, tokens...), "has no ColBERT projection"},
		{"old worker", append([]string{"-m", model, "--chaos", "old-worker=1"}, tokens...), "these workers do not announce"},
		{"dense run of a ColBERT model", []string{"-m", model}, "is a multi-vector (ColBERT) model"},
		{"as-query alone", []string{"-m", model, "--as-query"}, "--as-query needs --vectors tokens"},
		{"int8", append([]string{"-m", model, "--dtype", "int8"}, tokens...), "--vectors tokens with --dtype int8"},
		{"dims", append([]string{"-m", model, "--dims", "4"}, tokens...), "--vectors tokens with --dims"},
		{"late chunking", append([]string{"-m", model, "--late-chunking", "--chunk-tokens", "4"}, tokens...), "--vectors tokens with --late-chunking"},
		{"pooling", append([]string{"-m", model, "--pooling", "cls"}, tokens...), "--vectors tokens with --pooling cls"},
		{"no-normalize", append([]string{"-m", model, "--no-normalize"}, tokens...), "--vectors tokens with --no-normalize"},
		{"query chunks", append([]string{"-m", model, "--as-query", "--chunk-tokens", "4"}, tokens...), "--as-query and --chunk-tokens"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(work, fmt.Sprintf("o%d.arrow", i))
			res := runSynapse(t, env, append([]string{"embed", in, "-o", out, "--workers", "1", "--threads", "1"}, tt.args...)...)
			res.wantCode(t, exitUsage)
			if !strings.Contains(res.stderr, tt.want) {
				t.Errorf("stderr %q; want it to say %q", res.stderr, tt.want)
			}
			if strings.Contains(res.stdout, "embedded") {
				t.Errorf("stdout %q: want no work done", res.stdout)
			}
		})
	}
}

// TestSearchTokens: synapse search over synapse embed --vectors tokens
// outputs (the corpus as documents, the queries with --as-query) ranks
// documents by MaxSim computed by brute force in float64 from the same
// files, a document by its best chunk, ties by id; dense queries are
// refused.
func TestSearchTokens(t *testing.T) {
	work := t.TempDir()
	model, _, _ := colbertModel(t, work)
	env := append(ortEnv(t), "SYNAPSE_MODELS="+filepath.Join(work, "models"))
	in := filepath.Join(work, "c.jsonl")
	colbertCorpus(t, in, 60, 2)
	qin := filepath.Join(work, "q.jsonl")
	writeJSONL(t, qin, []map[string]any{{"id": "q0", "text": "protein cell"}, {"id": "q1", "text": "the gene study, results"}, {"id": "q2", "text": "hello world"}})
	embed := func(in, out string, more ...string) {
		runSynapse(t, env, append([]string{"embed", in, "-m", model, "-o", out, "-q", "--vectors", "tokens", "--workers", "1", "--threads", "1"}, more...)...).wantCode(t, exitOK)
	}
	corpus, queries := filepath.Join(work, "c.arrow"), filepath.Join(work, "q.arrow")
	embed(in, corpus)
	embed(qin, queries, "--as-query")
	run := filepath.Join(work, "run.trec")
	const k = 10
	runSynapse(t, nil, "search", "--queries", queries, "--corpus", corpus, "-k", fmt.Sprint(k), "-o", run).wantCode(t, exitOK)
	got := readTREC(t, run)
	_, crows := readTokens(t, corpus)
	_, qrows := readTokens(t, queries)
	for _, q := range qrows {
		if len(q.Vectors) != colbertQueryLen {
			t.Fatalf("query %s: %d token vectors; want %d", q.ID, len(q.Vectors), colbertQueryLen)
		}
		best := map[string]float64{}
		for _, c := range crows {
			var s float64
			for _, qv := range q.Vectors {
				m := math.Inf(-1)
				for _, cv := range c.Vectors {
					var dot float64
					for i := range qv {
						dot += float64(qv[i]) * float64(cv[i])
					}
					m = max(m, dot)
				}
				s += m
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
		if len(got[q.ID]) != k {
			t.Fatalf("query %s: %d hits; want %d", q.ID, len(got[q.ID]), k)
		}
		for i, h := range got[q.ID] {
			if h.doc != want[i].doc || math.Abs(h.score-want[i].score) > 1e-5*max(1, want[i].score) {
				t.Errorf("query %s rank %d: %s %.6f; want %s %.6f", q.ID, i+1, h.doc, h.score, want[i].doc, want[i].score)
			}
		}
	}
	dense := filepath.Join(work, "dq.arrow")
	runSynapse(t, ortEnv(t), "embed", qin, "-m", lateModel(t), "-o", dense, "-q", "--workers", "1", "--threads", "1").wantCode(t, exitOK)
	res := runSynapse(t, nil, "search", "--queries", dense, "--corpus", corpus, "-o", filepath.Join(work, "x.trec"))
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "embed the queries with --vectors tokens --as-query") {
		t.Errorf("stderr %q; want it to say how to embed the queries", res.stderr)
	}
}

// TestEmbedTokensResumeShardsPrevious: a token-vector run killed after its
// first checkpoint and resumed writes the bytes of an uninterrupted run;
// two shards merged give its rows; --previous of it reuses every document;
// a dense run refuses it as --previous, a query run refuses a document
// output, naming the output kinds.
func TestEmbedTokensResumeShardsPrevious(t *testing.T) {
	work := t.TempDir()
	model, _, _ := colbertModel(t, work)
	in := filepath.Join(work, "c.jsonl")
	colbertCorpus(t, in, 1500, 3)
	env := append(ortEnv(t), "SYNAPSE_MODELS="+filepath.Join(work, "models"))
	args := func(out string, more ...string) []string {
		return append([]string{"embed", in, "-m", model, "-o", out, "--vectors", "tokens", "--workers", "1", "--threads", "1", "--batch-tokens", "48"}, more...)
	}
	clean := filepath.Join(work, "clean.arrow")
	runSynapse(t, env, args(clean, "-q")...).wantCode(t, exitOK)
	_, want := readTokens(t, clean)

	out := filepath.Join(work, "killed.arrow")
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
		_, got := readTokens(t, out)
		sameTokens(t, "resumed token run vs an uninterrupted one", got, want)
		t.Errorf("resumed output: %d bytes, not the uninterrupted run's %d", len(b), len(a))
	}

	sharded := filepath.Join(work, "sh.arrow")
	for i := range 2 {
		runSynapse(t, env, args(sharded, "-q", "--shard", fmt.Sprintf("%d/2", i))...).wantCode(t, exitOK)
	}
	merged := filepath.Join(work, "merged.arrow")
	runSynapse(t, nil, "merge", sharded, "-o", merged, "-q").wantCode(t, exitOK)
	_, got := readTokens(t, merged)
	sameTokens(t, "two token shards merged vs one run", got, want)

	inc := filepath.Join(work, "inc.arrow")
	res = runSynapse(t, env, args(inc, "--previous", clean)...)
	res.wantCode(t, exitOK)
	_, got = readTokens(t, inc)
	sameTokens(t, "--previous of the same token run", got, want)
	if !strings.Contains(res.stdout, "1500 reused") {
		t.Errorf("summary:\n%s\nwant it to say 1500 reused", res.stdout)
	}
	res = runSynapse(t, env, "embed", in, "-m", lateModel(t), "-o", filepath.Join(work, "dense.arrow"), "--workers", "1", "--threads", "1", "--previous", clean)
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, `output: previous "tokens", this run ""`) {
		t.Errorf("dense run with a token --previous: stderr %q; want it to name the output kinds", res.stderr)
	}
	res = runSynapse(t, env, args(filepath.Join(work, "q.arrow"), "--as-query", "--previous", clean)...)
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, `output: previous "tokens", this run "tokens-query"`) {
		t.Errorf("query run with a document --previous: stderr %q; want it to name the output kinds", res.stderr)
	}
}

// sameTokens fails unless two token outputs hold the same rows, bit for bit.
func sameTokens(t *testing.T, what string, got, want []tokenRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows; want %d", what, len(got), len(want))
	}
	bits := func(r tokenRow) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %d %d %d %d:", r.ID, r.Chunk, r.TokenStart, r.TokenEnd, r.NTokens)
		for _, v := range r.Vectors {
			for _, x := range v {
				fmt.Fprintf(&b, " %08x", math.Float32bits(x))
			}
		}
		return b.String()
	}
	for i := range got {
		if g, w := bits(got[i]), bits(want[i]); g != w {
			t.Fatalf("%s: row %d: got %s; want %s", what, i, g, w)
		}
	}
}
