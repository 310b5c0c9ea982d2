//go:build cgo

package cli

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// `synapse embed` with ONNX models, run by ONNX Runtime workers with no
// llama.cpp libraries at hand.

// runONNX runs synapse with ONNX Runtime and an empty llama.cpp directory.
func runONNX(t *testing.T, args ...string) embedResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Binary(t), args...)
	cmd.Env = append(os.Environ(), "SYNAPSE_ORT_LIB="+testenv.ORTLib(t), "SYNAPSE_LLAMA_LIB="+t.TempDir())
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
		t.Fatalf("synapse %s: still running after 2 minutes\nstderr:\n%s", strings.Join(args, " "), errb.String())
	}
	return embedResult{out.String(), errb.String(), code}
}

// TestEmbedONNXReference embeds the reference texts with the ONNX fixture
// (fp32 and its dynamic-int8 variant) and compares chunk 0 with the
// transformers vectors; the module's tokenizer.json tokenizer must give the
// reference ids first.
func TestEmbedONNXReference(t *testing.T) {
	items := readReference(t)
	dir := testenv.Fixture(t, "models", "ref-bert-embed-onnx")
	tok, err := tokenize.LoadHF(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	pre, suf := tok.Affixes()
	for i, it := range items {
		ids := tok.Tokenize(it.Text, tokenize.Options{}).IDs()
		want := append(append(slices.Clone(pre), ids[:min(len(ids), 510)]...), suf...)
		if !slices.Equal(want, it.IDs) {
			t.Fatalf("item %d %.30q: chunk 0 ids %v; want reference ids %v", i, it.Text, want, it.IDs)
		}
	}
	work := t.TempDir()
	var docs []map[string]any
	for i, it := range items {
		docs = append(docs, map[string]any{"id": fmt.Sprintf("ref-%02d", i), "text": it.Text})
	}
	in := filepath.Join(work, "ref.jsonl")
	writeJSONL(t, in, docs)
	for _, tc := range []struct {
		model string
		min   float64
	}{{dir, 0.9999}, {filepath.Join(dir, "model_quantized.onnx"), 0.997}} {
		t.Run(filepath.Base(tc.model), func(t *testing.T) {
			out := filepath.Join(work, filepath.Base(tc.model)+".arrow")
			runONNX(t, "embed", in, "-m", tc.model, "-o", out, "--chunk-tokens", "510", "-q").wantCode(t, exitOK)
			_, rows := readOutput(t, out)
			got := rowsByID(rows)
			worst := 1.0
			for i, it := range items {
				chunks := got[fmt.Sprintf("ref-%02d", i)]
				if len(chunks) == 0 || chunks[0].Chunk != 0 {
					t.Fatalf("item %d: no chunk 0", i)
				}
				worst = min(worst, testenv.Cosine(chunks[0].Emb, it.Embedding))
				if n := norm(chunks[0].Emb); math.Abs(n-1) > 1e-5 {
					t.Errorf("item %d: norm %v; want 1", i, n)
				}
			}
			if worst < tc.min {
				t.Errorf("lowest cosine to transformers %.7f; want ≥ %g", worst, tc.min)
			}
			t.Logf("%d texts, lowest cosine to transformers %.7f", len(items), worst)
		})
	}
}

// TestEmbedONNXGenerated embeds with a generated ONNX model directory (no
// fixtures, no Python) and checks every vector against what the graph
// computes: the mean of its token rows over [CLS] chunk [SEP], normalized.
func TestEmbedONNXGenerated(t *testing.T) {
	work := t.TempDir()
	model := filepath.Join(work, "model")
	enc, err := onnxtest.WriteDir(model, onnxtest.Dir{Encoder: onnxtest.Tiny()})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.LoadHF(filepath.Join(model, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"Hello world", "The cell study results", "protein, gene and cells!", "a", "the the the the the the the the the the the the the the"}
	var docs []map[string]any
	for i, s := range texts {
		docs = append(docs, map[string]any{"id": fmt.Sprint(i), "text": s})
	}
	in, out := filepath.Join(work, "in.jsonl"), filepath.Join(work, "out.arrow")
	writeJSONL(t, in, docs)
	// 8-token chunks overlapping by 2: the long text makes several chunks.
	runONNX(t, "embed", in, "-m", model, "-o", out, "--chunk-tokens", "8", "--overlap", "2", "-q").wantCode(t, exitOK)
	_, rows := readOutput(t, out)
	pre, suf := tok.Affixes()
	checked := 0
	for _, r := range rows {
		var i int
		fmt.Sscan(r.ID, &i)
		ids := tok.Tokenize(texts[i], tokenize.Options{}).IDs()
		seq := append(append(slices.Clone(pre), ids[r.TokenStart:r.TokenEnd]...), suf...)
		h := enc.HiddenStates(seq)
		want := make([]float32, enc.Hidden)
		var sq float64
		for d := range want {
			var s float64
			for _, row := range h {
				s += float64(row[d])
			}
			want[d] = float32(s / float64(len(h)))
			sq += float64(want[d]) * float64(want[d])
		}
		for d := range want {
			want[d] = float32(float64(want[d]) / math.Sqrt(sq))
		}
		for d := range want {
			if math.Abs(float64(r.Emb[d]-want[d])) > 1e-5 {
				t.Fatalf("doc %s chunk %d: got %v; want %v", r.ID, r.Chunk, r.Emb, want)
			}
		}
		checked++
	}
	if checked <= len(texts) {
		t.Errorf("%d chunks for %d texts; want the long text cut in several", checked, len(texts))
	}
}

// TestEmbedONNXInt8Neighbours: with a dynamically quantized (int8) graph a
// document's vectors never depend on the documents that share its request:
// bit for bit the same with 1 and 3 workers, in a corpus read in reverse
// order (other neighbours, other batches), and after a run killed part way
// is resumed.
func TestEmbedONNXInt8Neighbours(t *testing.T) {
	work := t.TempDir()
	dir := filepath.Join(work, "int8")
	if _, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: onnxtest.Encoder{Hidden: 16, Positions: 64, Seed: 3, Layers: 2}}); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "model_quantized.onnx")
	if _, err := onnx.QuantizeFile(filepath.Join(dir, "model.onnx"), model); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var docs []map[string]any
	for i := range 1500 { // 1 to 12 words: many documents of each length
		var w []string
		for range 1 + rng.IntN(12) {
			w = append(w, onnxtest.Words[rng.IntN(len(onnxtest.Words))])
		}
		docs = append(docs, map[string]any{"id": fmt.Sprint(i), "text": strings.Join(w, " ")})
	}
	in, rev := filepath.Join(work, "in.jsonl"), filepath.Join(work, "rev.jsonl")
	writeJSONL(t, in, docs)
	slices.Reverse(docs)
	writeJSONL(t, rev, docs)
	args := func(in, out string, more ...string) []string {
		return append([]string{"embed", in, "-m", model, "-o", out, "--batch-tokens", "96", "--threads", "1", "-q", "--dedup=false"}, more...)
	}
	embed := func(in, out string, more ...string) []outRow {
		runONNX(t, args(in, out, more...)...).wantCode(t, exitOK)
		_, rows := readOutput(t, out)
		return rows
	}
	want := embed(in, filepath.Join(work, "w1.arrow"), "--workers", "1")
	sameRows(t, "3 workers vs 1", embed(in, filepath.Join(work, "w3.arrow"), "--workers", "3"), want)
	byID := rowsByID(embed(rev, filepath.Join(work, "rev.arrow"), "--workers", "2"))
	for _, w := range want {
		sameRows(t, "reversed corpus, document "+w.ID, byID[w.ID], []outRow{w})
	}

	out := filepath.Join(work, "killed.arrow")
	cmd := exec.Command(testenv.Binary(t), args(in, out, "--workers", "2", "--chaos", "delay=3ms")...)
	cmd.Env = append(os.Environ(), "SYNAPSE_ORT_LIB="+testenv.ORTLib(t), "SYNAPSE_LLAMA_LIB="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	waitCheckpoint(t, out, exited)
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	sameRows(t, "resumed vs uninterrupted", embed(in, out, "--workers", "2", "--resume"), want)
}

// TestEmbedONNXBadArtifacts: models that cannot work fail the job with a
// clear message naming the file and the reason.
func TestEmbedONNXBadArtifacts(t *testing.T) {
	work := t.TempDir()
	in := filepath.Join(work, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "1", "text": "hello world"}})
	mk := func(name string, d onnxtest.Dir, edit func(dir string)) string {
		dir := filepath.Join(work, name)
		if _, err := onnxtest.WriteDir(dir, d); err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			edit(dir)
		}
		return dir
	}
	writeGraph := func(m onnx.Model) func(string) {
		return func(dir string) {
			if err := m.WriteFile(filepath.Join(dir, "model.onnx")); err != nil {
				t.Fatal(err)
			}
		}
	}
	wrongInputs := onnxtest.Tiny().Model()
	wrongInputs.Graph.Inputs[0].Name = "pixel_values"
	wrongInputs.Graph.Inputs = append(wrongInputs.Graph.Inputs, onnx.Value{Name: "input_ids", Tensor: true, Elem: onnx.Int64,
		Dims: []onnx.Dim{{Param: "b"}, {Param: "s"}}})
	wrongInputs.Graph.Nodes[0].Inputs[1] = "pixel_values"
	brokenGraph := onnxtest.Tiny().Model()
	brokenGraph.Graph.Nodes[0].Inputs[0] = "missing_tensor"
	tests := []struct {
		name  string
		model string
		want  []string
	}{
		{"no tokenizer.json", mk("notok", onnxtest.Dir{Encoder: onnxtest.Tiny(), Omit: []string{"tokenizer.json"}}, nil),
			[]string{"tokenizer.json", "not a usable model"}},
		{"not an ONNX file", mk("garbage", onnxtest.Dir{Encoder: onnxtest.Tiny()}, func(dir string) {
			os.WriteFile(filepath.Join(dir, "model.onnx"), []byte("not a model"), 0o644)
		}), []string{"model.onnx", "not an ONNX model"}},
		{"wrong inputs", mk("inputs", onnxtest.Dir{Encoder: onnxtest.Tiny()}, writeGraph(wrongInputs)),
			[]string{"unsupported", "pixel_values"}},
		{"graph fails to load", mk("broken", onnxtest.Dir{Encoder: onnxtest.Tiny()}, writeGraph(brokenGraph)),
			[]string{"artifact_invalid", "missing_tensor"}},
		{"variants but no model.onnx", mk("variants", onnxtest.Dir{Encoder: onnxtest.Tiny(), Graph: "model_fp16.onnx"}, func(dir string) {
			onnxtest.Tiny().Model().WriteFile(filepath.Join(dir, "model_quantized.onnx"))
		}), []string{"model_fp16.onnx", "model_quantized.onnx", "name the one"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runONNX(t, "embed", in, "-m", tt.model, "-o", filepath.Join(work, "out.arrow"), "-q")
			res.wantCode(t, exitUsage) // an unusable model: a configuration error
			for _, w := range tt.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr %q; want it to mention %q", res.stderr, w)
				}
			}
		})
	}
}
