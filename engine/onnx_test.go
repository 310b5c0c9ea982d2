//go:build cgo

package engine

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/onnx"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/wire"
)

func openONNX(t testing.TB) *ONNX {
	t.Helper()
	e, err := OpenONNX(ONNXOptions{Lib: testenv.ORTLib(t)})
	if err != nil {
		t.Fatalf("OpenONNX: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// onnxLoad returns a LOAD of the model at path (a directory or .onnx file).
func onnxLoad(t testing.TB, path string, rc wire.RuntimeConfig) LoadRequest {
	t.Helper()
	files, err := hfmodel.Resolve(path)
	if err != nil {
		t.Fatal(err)
	}
	_, digest, err := hfmodel.Digest(files.Graph)
	if err != nil {
		t.Fatal(err)
	}
	rc.Embeddings = true
	return LoadRequest{Path: path, Digest: digest, Format: FormatONNX, Config: rc}
}

func writeEncoder(t testing.TB, enc onnxtest.Encoder) (string, onnxtest.Encoder) {
	t.Helper()
	dir := t.TempDir()
	enc, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	return dir, enc
}

// expected pools the generated encoder's hidden states as the engine should.
func expected(enc onnxtest.Encoder, ids []int32, pool string, normalize bool) []float32 {
	h := enc.HiddenStates(ids)
	out := make([]float32, enc.Hidden)
	switch pool {
	case PoolingCLS:
		copy(out, h[0])
	case PoolingLast:
		copy(out, h[len(h)-1])
	default:
		for d := range out {
			var s float64
			for _, row := range h {
				s += float64(row[d])
			}
			out[d] = float32(s / float64(len(h)))
		}
	}
	if normalize {
		l2normalize(out)
	}
	return out
}

// seqs are sequences of mixed lengths, several of the same length, over a
// vocabulary of at least 16 tokens.
var testSeqs = [][]int32{{2, 5, 3}, {2, 6, 7, 8, 3}, {2, 9, 3}, {4}, {2, 10, 11, 12, 13, 14, 15, 3}, {2, 5, 3}, {2, 7, 6, 9, 3}}

func TestONNXEmbedGenerated(t *testing.T) {
	e := openONNX(t)
	ctx := context.Background()
	encoders := map[string]onnxtest.Encoder{
		"int64 both outputs": onnxtest.Tiny(),
		"int32 inputs":       func() onnxtest.Encoder { x := onnxtest.Tiny(); x.Int32 = true; return x }(),
		"no token types":     func() onnxtest.Encoder { x := onnxtest.Tiny(); x.NoTokenTypes = true; return x }(),
		"hidden only":        func() onnxtest.Encoder { x := onnxtest.Tiny(); x.Pooled = false; return x }(),
	}
	for name, enc := range encoders {
		t.Run(name, func(t *testing.T) {
			dir, enc := writeEncoder(t, enc)
			for _, seqMax := range []int{0, 1} { // equal-length runs; one sequence per run
				info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{SeqMax: seqMax, Threads: 1}))
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if info.Dims != enc.Hidden {
					t.Errorf("dims: got %d; want %d", info.Dims, enc.Hidden)
				}
				for _, pool := range []string{"", PoolingMean, PoolingCLS, PoolingLast} {
					for _, norm := range []bool{false, true} {
						vecs, dims, err := e.Embed(ctx, info.Ref, pool, norm, testSeqs)
						if err != nil {
							t.Fatalf("Embed %q: %v", pool, err)
						}
						for i, s := range testSeqs {
							want := expected(enc, s, pool, norm)
							if d := maxDiff(vecs[i*dims:(i+1)*dims], want); d > 1e-5 {
								t.Errorf("seq_max %d pooling %q normalize %v sequence %d: max |Δ| %g\ngot  %v\nwant %v", seqMax, pool, norm, i, d, vecs[i*dims:(i+1)*dims], want)
							}
						}
					}
				}
			}
		})
	}
}

// TestONNXThreadPools loads the same encoder with 1 thread (no pool:
// spinning as ONNX Runtime has it), 2 threads and 0 (ONNX Runtime's one per
// core), both with spinning off (intraOpSpinning): every session must be
// created and give the expected vectors.
func TestONNXThreadPools(t *testing.T) {
	e := openONNX(t)
	ctx := context.Background()
	dir, enc := writeEncoder(t, onnxtest.Tiny())
	for _, threads := range []int{1, 2, 0} {
		info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{Threads: threads}))
		if err != nil {
			t.Fatalf("threads %d: Load: %v", threads, err)
		}
		vecs, dims, err := e.Embed(ctx, info.Ref, PoolingMean, true, testSeqs)
		if err != nil {
			t.Fatalf("threads %d: Embed: %v", threads, err)
		}
		for i, s := range testSeqs {
			if d := maxDiff(vecs[i*dims:(i+1)*dims], expected(enc, s, PoolingMean, true)); d > 1e-5 {
				t.Errorf("threads %d sequence %d: max |Δ| %g", threads, i, d)
			}
		}
	}
	for threads, want := range map[int]string{0: "0", 1: "1", 2: "0", 8: "0"} {
		if got := intraOpSpinning(threads); got != want {
			t.Errorf("intraOpSpinning(%d) = %q; want %q", threads, got, want)
		}
	}
}

func maxDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var m float64
	for i := range a {
		m = max(m, math.Abs(float64(a[i]-b[i])))
	}
	return m
}

func TestONNXRuns(t *testing.T) {
	m := &onnxModel{cfg: onnxConfig{tokensPerRun: 8, seqMax: 2}}
	got := m.runs(testSeqs, 0)
	// lengths: 0→3 1→5 2→3 3→1 4→8 5→3 6→5
	want := [][]int{{3}, {0, 2}, {5}, {1}, {6}, {4}}
	if len(got) != len(want) {
		t.Fatalf("runs: got %v; want %v", got, want)
	}
	for i := range want {
		if !equalInts(got[i], want[i]) {
			t.Fatalf("runs: got %v; want %v", got, want)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestONNXEmbedRequestErrors(t *testing.T) {
	e := openONNX(t)
	ctx := context.Background()
	dir, enc := writeEncoder(t, onnxtest.Tiny())
	info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{ContextSize: 16, Threads: 1}))
	if err != nil {
		t.Fatal(err)
	}
	long := make([]int32, 17)
	tests := []struct {
		name    string
		ref     string
		pooling string
		seqs    [][]int32
		code    wire.Code
	}{
		{"unknown ref", "nope", "", testSeqs, wire.CodeModelNotLoaded},
		{"empty sequence", info.Ref, "", [][]int32{{2}, {}}, wire.CodeBadRequest},
		{"over n_ctx", info.Ref, "", [][]int32{long}, wire.CodeBadRequest},
		{"id past the vocabulary", info.Ref, "", [][]int32{{2, int32(enc.Vocab), 3}}, wire.CodeBadRequest},
		{"negative id", info.Ref, "", [][]int32{{-1}}, wire.CodeBadRequest},
		{"pooling none", info.Ref, PoolingNone, testSeqs, wire.CodeBadRequest},
		{"pooling rank", info.Ref, PoolingRank, testSeqs, wire.CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := e.Embed(ctx, tt.ref, tt.pooling, true, tt.seqs)
			if got := wire.CodeOf(err); got != tt.code {
				t.Errorf("got %v (%s); want code %s", err, got, tt.code)
			}
		})
	}
	for name, err := range map[string]error{
		"rerank": func() error {
			_, err := e.Rerank(ctx, info.Ref, []RerankGroup{{Query: []int32{2}, Candidates: [][]int32{{3}}}})
			return err
		}(),
		"generate": func() error {
			_, err := e.Generate(ctx, info.Ref, []int32{2}, GenerateOptions{MaxTokens: 4})
			return err
		}(),
		"tokenize": func() error { _, err := e.Tokenize(ctx, info.Ref, "hello", true, false); return err }(),
	} {
		if got := wire.CodeOf(err); got != wire.CodeUnsupported {
			t.Errorf("%s: got %v; want unsupported", name, err)
		}
	}
}

// TestONNXLoadErrors: a bad artifact or config is a clear LOAD error with
// its code, and the engine keeps working.
func TestONNXLoadErrors(t *testing.T) {
	e := openONNX(t)
	ctx := context.Background()
	good, _ := writeEncoder(t, onnxtest.Tiny())
	write := func(name string, m onnx.Model) string {
		p := filepath.Join(t.TempDir(), name)
		if err := m.WriteFile(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := filepath.Join(t.TempDir(), "model.onnx")
	os.WriteFile(garbage, []byte("this is not a protobuf \x00\x01\x02"), 0o644)
	truncated := filepath.Join(t.TempDir(), "model.onnx")
	full := onnxtest.Tiny().Model().Marshal()
	os.WriteFile(truncated, full[:len(full)/2], 0o644)

	wrongInput := onnxtest.Tiny().Model()
	wrongInput.Graph.Inputs[0].Name = "pixel_values"
	wrongInput.Graph.Nodes[0].Inputs[1] = "pixel_values"
	wrongInput.Graph.Nodes[3].Inputs[0] = "pixel_values" // Shape
	noOutput := onnxtest.Tiny().Model()
	// (A 3-D output named logits would be a masked-LM's: TestONNXEmbedSparse.)
	noOutput.Graph.Outputs[0].Name, noOutput.Graph.Nodes[len(noOutput.Graph.Nodes)-4].Outputs[0] = "pooler_output", "pooler_output"
	noOutput.Graph.Outputs = noOutput.Graph.Outputs[:1]
	unknownOp := onnxtest.Tiny().Model()
	unknownOp.Graph.Nodes[len(unknownOp.Graph.Nodes)-1].Op = "NoSuchOp"
	badGraph := onnxtest.Tiny().Model()
	badGraph.Graph.Nodes[0].Inputs[0] = "missing_tensor"

	tests := []struct {
		name string
		req  LoadRequest
		code wire.Code
		want string // in the message
	}{
		{"digest mismatch", func() LoadRequest {
			r := onnxLoad(t, good, wire.RuntimeConfig{})
			r.Digest = "sha256:" + strings.Repeat("0", 64)
			return r
		}(), wire.CodeArtifactInvalid, "digest"},
		{"bad digest syntax", func() LoadRequest { r := onnxLoad(t, good, wire.RuntimeConfig{}); r.Digest = "md5:x"; return r }(), wire.CodeArtifactInvalid, "sha256"},
		{"missing file", LoadRequest{Path: filepath.Join(good, "nope.onnx"), Digest: "sha256:" + strings.Repeat("0", 64), Format: FormatONNX, Config: wire.RuntimeConfig{Embeddings: true}}, wire.CodeArtifactInvalid, "nope.onnx"},
		{"not protobuf", onnxLoad(t, garbage, wire.RuntimeConfig{}), wire.CodeArtifactInvalid, "ONNX"},
		{"truncated", onnxLoad(t, truncated, wire.RuntimeConfig{}), wire.CodeArtifactInvalid, ""},
		{"wrong inputs", onnxLoad(t, write("wrong.onnx", wrongInput), wire.RuntimeConfig{}), wire.CodeUnsupported, "pixel_values"},
		{"no usable output", onnxLoad(t, write("noout.onnx", noOutput), wire.RuntimeConfig{}), wire.CodeUnsupported, "last_hidden_state"},
		{"unknown operator", onnxLoad(t, write("op.onnx", unknownOp), wire.RuntimeConfig{}), wire.CodeUnsupported, "NoSuchOp"},
		{"graph fails to load", onnxLoad(t, write("bad.onnx", badGraph), wire.RuntimeConfig{}), wire.CodeArtifactInvalid, "missing_tensor"},
		{"n_ctx over the model's", onnxLoad(t, good, wire.RuntimeConfig{ContextSize: 33}), wire.CodeConfigInvalid, "n_ctx"},
		{"generation", func() LoadRequest {
			r := onnxLoad(t, good, wire.RuntimeConfig{})
			r.Config.Embeddings = false
			return r
		}(), wire.CodeUnsupported, "embeddings"},
		{"rank pooling", onnxLoad(t, good, wire.RuntimeConfig{Pooling: PoolingRank}), wire.CodeUnsupported, "rerank"},
		{"gguf format", func() LoadRequest { r := onnxLoad(t, good, wire.RuntimeConfig{}); r.Format = FormatGGUF; return r }(), wire.CodeUnsupported, "onnx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Load(ctx, tt.req)
			if got := wire.CodeOf(err); got != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v; want code %s mentioning %q", err, tt.code, tt.want)
			}
		})
	}
	if _, err := e.Load(ctx, onnxLoad(t, good, wire.RuntimeConfig{})); err != nil {
		t.Errorf("a good model after the bad ones: %v", err)
	}
}

// TestONNXReference embeds the reference texts with the fixture's fp32 and
// int8 graphs and compares them with the transformers vectors.
func TestONNXReference(t *testing.T) {
	var ref embedRef
	readJSON(t, &ref, "reference", "embed.json")
	e := openONNX(t)
	ctx := context.Background()
	dir := testenv.Fixture(t, "models", "ref-bert-embed-onnx")
	for _, tc := range []struct {
		graph string
		min   float64
	}{{"model.onnx", 0.9999}, {"model_quantized.onnx", 0.997}} {
		for _, pool := range []string{"", PoolingMean} { // the graph's sentence_embedding; mean over last_hidden_state
			t.Run(tc.graph+"/"+pool, func(t *testing.T) {
				info, err := e.Load(ctx, onnxLoad(t, filepath.Join(dir, tc.graph), wire.RuntimeConfig{Threads: 1, Pooling: pool}))
				if err != nil {
					t.Fatal(err)
				}
				seqs := make([][]int32, len(ref.Items))
				for i, it := range ref.Items {
					seqs[i] = it.IDs
				}
				vecs, dims, err := e.Embed(ctx, info.Ref, "", true, seqs)
				if err != nil {
					t.Fatal(err)
				}
				worst := 1.0
				for i, it := range ref.Items {
					worst = min(worst, testenv.Cosine(vecs[i*dims:(i+1)*dims], it.Embedding))
				}
				if worst < tc.min {
					t.Errorf("lowest cosine to transformers %.7f; want ≥ %g", worst, tc.min)
				}
				t.Logf("%d texts, lowest cosine %.7f", len(ref.Items), worst)
			})
		}
	}
}

// TestONNXBatchDependent: a dynamically quantized graph takes its
// activation scale over the whole input tensor, so a sequence run beside
// others of its length gets another vector than alone. The engine runs such
// a graph one sequence per run: every vector of a request is bit for bit the
// one the sequence gets alone. (With the rule switched off the vectors
// differ, which shows the graph does mix its rows.) The shared fixture's
// model_quantized.onnx is held to the same.
func TestONNXBatchDependent(t *testing.T) {
	e := openONNX(t)
	ctx := context.Background()
	enc := onnxtest.Tiny()
	enc.Layers = 2
	dir, _ := writeEncoder(t, enc)
	q := filepath.Join(dir, "model_quantized.onnx")
	if _, err := onnx.QuantizeFile(filepath.Join(dir, "model.onnx"), q); err != nil {
		t.Fatal(err)
	}
	// Equal lengths, one sequence of far larger values (token 4 repeated).
	seqs := [][]int32{{2, 5, 6, 3}, {4, 4, 4, 4}, {2, 7, 8, 3}, {2, 9, 3}, {2, 10, 11, 3}}
	check := func(t *testing.T, path string, seqs [][]int32) {
		info, err := e.Load(ctx, onnxLoad(t, path, wire.RuntimeConfig{Threads: 1}))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		m := e.models[info.Ref]
		if len(m.plan.batchOps) == 0 {
			t.Fatalf("%s: no batch-dependent op found", path)
		}
		together := func() []float32 {
			v, _, err := e.Embed(ctx, info.Ref, "", false, seqs)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		got := together()
		dims := info.Dims
		for i, s := range seqs {
			alone, _, err := e.Embed(ctx, info.Ref, "", false, [][]int32{s})
			if err != nil {
				t.Fatal(err)
			}
			for d := range dims {
				if math.Float32bits(got[i*dims+d]) != math.Float32bits(alone[d]) {
					t.Fatalf("sequence %d dimension %d: %v in a request of %d; want %v, as alone", i, d, got[i*dims+d], len(seqs), alone[d])
				}
			}
		}
		ops := m.plan.batchOps
		m.plan.batchOps = nil // equal lengths share a run again
		defer func() { m.plan.batchOps = ops }()
		if mixed := together(); maxDiff(mixed, got) == 0 {
			t.Errorf("%s: batched runs gave the vectors of single runs: the test shows nothing", path)
		}
	}
	t.Run("generated", func(t *testing.T) { check(t, q, seqs) })
	t.Run("fixture", func(t *testing.T) {
		q := testenv.Fixture(t, "models", "ref-bert-embed-onnx", "model_quantized.onnx")
		if _, err := os.Stat(q); err != nil {
			t.Skipf("fixture: %v", err)
		}
		check(t, q, [][]int32{{101, 2023, 2003, 1037, 3231, 102}, {101, 3894, 3894, 3894, 3894, 102}, {101, 1996, 4937, 2001, 2307, 102}})
	})
}
