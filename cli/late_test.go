//go:build cgo

package cli

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/synapse-embed/synapse/engine"
	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// lateModel writes a generated ONNX encoder of a 24-token context (a
// window of 22 content tokens) and returns its directory.
func lateModel(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "late-encoder")
	enc := onnxtest.Tiny()
	enc.Positions, enc.Layers, enc.Pooled = 24, 1, false
	if _, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: enc}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// lateCorpus writes documents of onnxtest.Words, so that word i is token
// id 5+i (BertVocab: [PAD] [UNK] [CLS] [SEP] [MASK], then the words) and a
// test knows every document's ids without synapse's tokenizer.
func lateCorpus(t *testing.T, path string, n int) map[string][]int32 {
	rng := rand.New(rand.NewPCG(7, 35))
	ids := map[string][]int32{}
	var docs []map[string]any
	for d := range n {
		words := make([]string, rng.IntN(70))
		doc := make([]int32, len(words))
		for i := range words {
			w := rng.IntN(len(onnxtest.Words))
			words[i], doc[i] = onnxtest.Words[w], int32(5+w)
		}
		id := fmt.Sprintf("d%d", d)
		ids[id] = doc
		docs = append(docs, map[string]any{"id": id, "text": strings.Join(words, " ")})
	}
	writeJSONL(t, path, docs)
	return ids
}

// TestEmbedLateChunking: every chunk's vector equals, in float64 apart from
// synapse, the mean of its own tokens' states in the window holding it
// (ONNX Runtime's last_hidden_state of [CLS] window [SEP], windows of 22
// tokens sharing 6), normalised; the chunks tile each document.
func TestEmbedLateChunking(t *testing.T) {
	const room, overlap, chunk = 22, 6, 5
	dir := t.TempDir()
	model := lateModel(t)
	in := filepath.Join(dir, "c.jsonl")
	docs := lateCorpus(t, in, 25)
	out := filepath.Join(dir, "late.arrow")
	env := []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	runSynapse(t, env, "embed", in, "-m", model, "-o", out, "-q", "--late-chunking", "--chunk-tokens", fmt.Sprint(chunk),
		"--overlap", fmt.Sprint(overlap), "--workers", "1", "--threads", "1").wantCode(t, exitOK)
	_, rows := readOutput(t, out)
	if _, err := engine.OpenONNX(engine.ONNXOptions{Lib: testenv.ORTLib(t)}); err != nil { // ONNX Runtime's environment, for LastHiddenState
		t.Fatal(err)
	}
	graph := filepath.Join(model, "model.onnx")
	states := map[string][][]float64{} // window ids → states
	next := map[string]int32{}
	for _, r := range rows {
		toks := docs[r.ID]
		if r.TokenStart != next[r.ID] || r.TokenEnd-r.TokenStart > chunk || (len(toks) > 0 && r.TokenEnd <= r.TokenStart) {
			t.Fatalf("%s chunk %d: tokens [%d,%d); want to start at %d, at most %d tokens", r.ID, r.Chunk, r.TokenStart, r.TokenEnd, next[r.ID], chunk)
		}
		next[r.ID] = r.TokenEnd
		ws, we, own := lateWindowOf(len(toks), int(r.TokenStart), room, overlap)
		if int(r.TokenEnd) > we || int(r.TokenStart) < own {
			t.Fatalf("%s chunk %d [%d,%d) is not within window [%d,%d)'s own tokens from %d", r.ID, r.Chunk, r.TokenStart, r.TokenEnd, ws, we, own)
		}
		ids := slices.Concat([]int32{2}, toks[ws:we], []int32{3})
		key := fmt.Sprint(ids)
		if states[key] == nil {
			states[key] = onnxtest.LastHiddenState(t, graph, ids)
		}
		from, to := 1+int(r.TokenStart)-ws, 1+int(r.TokenEnd)-ws
		if len(toks) == 0 {
			from, to = 0, 2
		}
		want := meanRows(states[key][from:to])
		if c := cosine64(r.Emb, want); c < 0.9999 {
			t.Errorf("%s chunk %d: cosine %.6f to the pooled window states; want ≥ 0.9999\ngot  %v\nwant %v", r.ID, r.Chunk, c, r.Emb, want)
		}
	}
	for id, toks := range docs {
		if int(next[id]) != len(toks) {
			t.Errorf("%s: chunks end at token %d; want %d", id, next[id], len(toks))
		}
	}
}

// lateWindowOf is the window [ws, we) of a document of n tokens whose own
// tokens (from own) hold token s: windows of room tokens, step
// room-overlap, each owning the tokens after the previous one's end.
func lateWindowOf(n, s, room, overlap int) (ws, we, own int) {
	for start := 0; ; start += room - overlap {
		end := min(start+room, n)
		if s < end || end >= n {
			return start, end, own
		}
		own = end
	}
}

func meanRows(rows [][]float64) []float64 {
	out := make([]float64, len(rows[0]))
	for _, r := range rows {
		for d, x := range r {
			out[d] += x / float64(len(rows))
		}
	}
	return out
}

func cosine64(a []float32, b []float64) float64 {
	var dot, na, nb float64
	for i := range b {
		dot += float64(a[i]) * b[i]
		na += float64(a[i]) * float64(a[i])
		nb += b[i] * b[i]
	}
	return dot / math.Sqrt(na*nb)
}

// TestEmbedLateChunkingRefused: a model without token states (an ONNX
// graph with only sentence_embedding) and an old worker (drill) are refused
// before any work with exit 2 and the reason; so are the flags that cannot
// go with it.
func TestEmbedLateChunkingRefused(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	lateCorpus(t, in, 3)
	onnx := lateModel(t)
	pooledOnly := filepath.Join(t.TempDir(), "pooled-only")
	enc := onnxtest.Tiny()
	enc.NoHidden = true
	if _, err := onnxtest.WriteDir(pooledOnly, onnxtest.Dir{Encoder: enc}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"graph without last_hidden_state", []string{"-m", pooledOnly, "--chunk-tokens", "8"}, "return no token states"},
		{"old worker", []string{"-m", onnx, "--chunk-tokens", "8", "--chaos", "old-worker=1"}, "do not announce it"},
		{"no --chunk-tokens", []string{"-m", onnx}, "--late-chunking needs --chunk-tokens"},
		{"--truncate", []string{"-m", onnx, "--chunk-tokens", "8", "--truncate"}, "not --truncate"},
		{"cls pooling", []string{"-m", onnx, "--chunk-tokens", "8", "--pooling", "cls"}, "pools by cls"},
		{"chunk over the window", []string{"-m", onnx, "--chunk-tokens", "23"}, "larger than the model's window of 22"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprintf("o%d.arrow", i))
			res := runSynapse(t, []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}, append([]string{"embed", in, "-o", out, "--late-chunking", "--workers", "1", "--threads", "1"}, tt.args...)...)
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

// TestEmbedLateChunkingResumePrevious: a late-chunked run killed after
// its first checkpoint and resumed writes the rows of an uninterrupted
// run, and so do two shards merged; --previous of it reuses every document; a plain run refuses it as
// --previous (the settings' output kind differs).
func TestEmbedLateChunkingResumeShardsPrevious(t *testing.T) {
	dir := t.TempDir()
	model := lateModel(t)
	in := filepath.Join(dir, "c.jsonl")
	const n = 1500
	lateCorpus(t, in, n)
	env := []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	args := func(out string, more ...string) []string {
		return append([]string{"embed", in, "-m", model, "-o", out, "--late-chunking", "--chunk-tokens", "5", "--overlap", "4",
			"--workers", "1", "--threads", "1", "--batch-tokens", "48"}, more...)
	}
	clean := filepath.Join(dir, "clean.arrow")
	runSynapse(t, env, args(clean, "-q")...).wantCode(t, exitOK)
	_, want := readOutput(t, clean)

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
	_, got := readOutput(t, out)
	sameRows(t, "resumed late-chunked run vs an uninterrupted one", got, want)

	sharded := filepath.Join(dir, "sh.arrow")
	for i := range 2 {
		runSynapse(t, env, args(sharded, "-q", "--shard", fmt.Sprintf("%d/2", i))...).wantCode(t, exitOK)
	}
	merged := filepath.Join(dir, "merged.arrow")
	runSynapse(t, nil, "merge", sharded, "-o", merged, "-q").wantCode(t, exitOK)
	_, got = readOutput(t, merged)
	sameRows(t, "two late-chunked shards merged vs one run", got, want)

	inc := filepath.Join(dir, "inc.arrow")
	res = runSynapse(t, env, args(inc, "--previous", clean)...)
	res.wantCode(t, exitOK)
	_, got = readOutput(t, inc)
	sameRows(t, "--previous of the same late-chunked run", got, want)
	if !strings.Contains(res.stdout, fmt.Sprintf("%d reused", n)) {
		t.Errorf("summary:\n%s\nwant it to say %d reused", res.stdout, n)
	}
	res = runSynapse(t, env, "embed", in, "-m", model, "-o", filepath.Join(dir, "plain.arrow"), "--chunk-tokens", "5",
		"--overlap", "4", "--workers", "1", "--threads", "1", "--previous", clean)
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, `output: previous "late-chunking"`) {
		t.Errorf("stderr %q; want the refusal to name the output kind", res.stderr)
	}
}

// TestEmbedLateChunkingGGUF: a GGUF model (llama.cpp's per-token
// embeddings, pooling none) late-chunks too: its chunks tile every
// document, each vector unit length, and differ from plain chunks of the
// same spans (they saw their window).
func TestEmbedLateChunkingGGUF(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	writeJSONL(t, in, testCorpus(20))
	common := []string{"-m", tinyModel(t), "--text-field", "title", "--text-field", "text", "--chunk-tokens", "16", "--workers", "1", "--threads", "1", "-q"}
	late, plain := filepath.Join(dir, "late.arrow"), filepath.Join(dir, "plain.arrow")
	runSynapse(t, nil, append([]string{"embed", in, "-o", late, "--late-chunking"}, common...)...).wantCode(t, exitOK)
	runSynapse(t, nil, append([]string{"embed", in, "-o", plain}, common...)...).wantCode(t, exitOK)
	_, lr := readOutput(t, late)
	_, pr := readOutput(t, plain)
	if len(lr) != len(pr) {
		t.Fatalf("got %d late rows, %d plain; want the same chunks", len(lr), len(pr))
	}
	differ := 0
	for i, r := range lr {
		p := pr[i]
		if r.ID != p.ID || r.TokenStart != p.TokenStart || r.TokenEnd != p.TokenEnd {
			t.Fatalf("row %d: late %s [%d,%d), plain %s [%d,%d); want the same spans", i, r.ID, r.TokenStart, r.TokenEnd, p.ID, p.TokenStart, p.TokenEnd)
		}
		var sq float64
		for _, x := range r.Emb {
			sq += float64(x) * float64(x)
		}
		if math.Abs(sq-1) > 1e-4 {
			t.Errorf("row %d: squared norm %v; want 1", i, sq)
		}
		if cosine64(r.Emb, toF64(p.Emb)) < 0.9999 {
			differ++
		}
	}
	if differ == 0 {
		t.Error("every late-chunked vector equals its plain chunk's; want the window's context to change them")
	}
}

func toF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
