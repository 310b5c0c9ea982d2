//go:build cgo

package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/onnx"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/wire"
)

// quantizeInto has QuantizeONNX write dir's graph quantized as dir/name and
// returns its path.
func quantizeInto(t testing.TB, src, name string) string {
	t.Helper()
	_, digest, err := hfmodel.Digest(src)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), name)
	res, err := QuantizeONNX(context.Background(), QuantizeRequest{Path: src, Digest: digest, OutPath: out, FType: "int8", Format: FormatONNX})
	if err != nil {
		t.Fatalf("QuantizeONNX: %v", err)
	}
	if _, d, _ := hfmodel.Digest(out); d != res.Digest {
		t.Fatalf("QuantizeONNX reported %s; the file is %s", res.Digest, d)
	}
	return out
}

// besideModel links the sidecar files of the model directory dir next to
// graph, so that the graph resolves as a model of its own.
func besideModel(t testing.TB, dir, graph string) {
	t.Helper()
	for _, f := range []string{"tokenizer.json", "config.json"} {
		if err := os.Symlink(filepath.Join(dir, f), filepath.Join(filepath.Dir(graph), f)); err != nil {
			t.Fatal(err)
		}
	}
}

// embedONNXWith loads path and embeds seqs, normalized, one vector per sequence.
func embedONNXWith(t testing.TB, e *ONNX, path string, seqs [][]int32) [][]float32 {
	t.Helper()
	ctx := context.Background()
	info, err := e.Load(ctx, onnxLoad(t, path, wire.RuntimeConfig{Threads: 1}))
	if err != nil {
		t.Fatalf("Load %s: %v", path, err)
	}
	vecs, dims, err := e.Embed(ctx, info.Ref, "", true, seqs)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	out := make([][]float32, len(seqs))
	for i := range out {
		out[i] = vecs[i*dims : (i+1)*dims]
	}
	return out
}

// A generated encoder with dense layers (MatMul, and Gemm), quantized by
// synapse's writer, runs in ONNX Runtime and gives vectors close to the
// float graph's: no fixtures needed.
func TestONNXQuantizedGenerated(t *testing.T) {
	e := openONNX(t)
	for _, gemm := range []bool{false, true} {
		name := map[bool]string{false: "matmul", true: "gemm"}[gemm]
		t.Run(name, func(t *testing.T) {
			enc := onnxtest.Tiny()
			enc.Hidden, enc.Layers, enc.Gemm = 32, 3, gemm
			dir, enc := writeEncoder(t, enc)
			q := quantizeInto(t, filepath.Join(dir, "model.onnx"), "model.onnx")
			besideModel(t, dir, q)
			info, err := onnx.ReadFile(q)
			if err != nil {
				t.Fatal(err)
			}
			if info.Ops["MatMulInteger"] != 3 || info.Ops["MatMul"] != 0 || info.Ops["Gemm"] != 0 {
				t.Errorf("quantized ops %v; want 3 MatMulInteger and no MatMul or Gemm left", info.Ops)
			}
			fp := embedONNXWith(t, e, dir, testSeqs)
			i8 := embedONNXWith(t, e, q, testSeqs)
			worst := 1.0
			for i, s := range testSeqs {
				if c := testenv.Cosine(fp[i], expected(enc, s, "", true)); c < 0.99999 {
					t.Errorf("fp32 sequence %d: cosine %.7f to the expected vector", i, c)
				}
				worst = min(worst, testenv.Cosine(i8[i], fp[i]))
			}
			if worst < 0.99 || worst > 0.9999999 {
				t.Errorf("int8 vs fp32: lowest cosine %.7f; want in [0.99, 1) (quantized, and close)", worst)
			}
			t.Logf("int8 vs fp32: lowest cosine %.7f over %d sequences", worst, len(testSeqs))
		})
	}
}

// fixtureSeqs are the reference texts' token ids.
func fixtureSeqs(t testing.TB) [][]int32 {
	var ref embedRef
	readJSON(t, &ref, "reference", "embed.json")
	seqs := make([][]int32, len(ref.Items))
	for i, it := range ref.Items {
		seqs[i] = it.IDs
	}
	return seqs
}

// The fixture's BERT graph quantized by synapse gives vectors at cosine ≥
// 0.99 to the fp32 ones, as the fixture's own model_quantized.onnx does
// (0.9977).
func TestONNXQuantizedFixture(t *testing.T) {
	dir := testenv.Fixture(t, "models", "ref-bert-embed-onnx")
	seqs := fixtureSeqs(t)
	e := openONNX(t)
	q := quantizeInto(t, filepath.Join(dir, "model.onnx"), "model.onnx")
	besideModel(t, dir, q)
	fp := embedONNXWith(t, e, filepath.Join(dir, "model.onnx"), seqs)
	ours := embedONNXWith(t, e, q, seqs)
	theirs := embedONNXWith(t, e, filepath.Join(dir, "model_quantized.onnx"), seqs)
	worst, worstTheirs := 1.0, 1.0
	for i := range seqs {
		worst = min(worst, testenv.Cosine(ours[i], fp[i]))
		worstTheirs = min(worstTheirs, testenv.Cosine(theirs[i], fp[i]))
	}
	if worst < 0.99 {
		t.Errorf("synapse's int8 graph vs fp32: lowest cosine %.5f; want ≥ 0.99", worst)
	}
	t.Logf("%d texts, lowest cosine to fp32: synapse int8 %.5f, the fixture's model_quantized.onnx %.5f", len(seqs), worst, worstTheirs)
}

func TestQuantizeONNXRequestErrors(t *testing.T) {
	dir, _ := writeEncoder(t, onnxtest.Tiny()) // no MatMul: nothing to quantize
	src := filepath.Join(dir, "model.onnx")
	_, digest, _ := hfmodel.Digest(src)
	out := filepath.Join(t.TempDir(), "q.onnx")
	for name, tc := range map[string]struct {
		req  QuantizeRequest
		code wire.Code
		msg  string
	}{
		"ftype":       {QuantizeRequest{Path: src, Digest: digest, OutPath: out, FType: "q8_0"}, wire.CodeBadRequest, "an ONNX graph is quantized to int8"},
		"digest":      {QuantizeRequest{Path: src, Digest: "sha256:" + strings.Repeat("0", 64), OutPath: out, FType: "int8"}, wire.CodeArtifactInvalid, "digest"},
		"relative":    {QuantizeRequest{Path: src, Digest: digest, OutPath: "q.onnx", FType: "int8"}, wire.CodeBadRequest, "absolute"},
		"exists":      {QuantizeRequest{Path: src, Digest: digest, OutPath: src + "x", FType: "int8"}, wire.CodeBadRequest, "exists"},
		"directory":   {QuantizeRequest{Path: dir, Digest: digest, OutPath: out, FType: "int8"}, wire.CodeArtifactInvalid, "want a .onnx file"},
		"no matmuls":  {QuantizeRequest{Path: src, Digest: digest, OutPath: out, FType: "int8"}, wire.CodeArtifactInvalid, "nothing to quantize"},
		"out is self": {QuantizeRequest{Path: src, Digest: digest, OutPath: src, FType: "int8"}, wire.CodeBadRequest, "the artifact itself"},
	} {
		if name == "exists" {
			os.WriteFile(src+"x", nil, 0o644)
		}
		_, err := QuantizeONNX(context.Background(), tc.req)
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != tc.code || !strings.Contains(we.Msg, tc.msg) {
			t.Errorf("%s: got %v; want %s saying %q", name, err, tc.code, tc.msg)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: left %s behind", name, out)
		}
	}
}

// BenchmarkONNXQuantized embeds the reference texts with the fixture's fp32
// graph, synapse's int8 graph of it and the fixture's model_quantized.onnx,
// back to back in each round, one ONNX Runtime thread each, and reports
// each one's tokens/s and its speed over fp32:
//
//	go test ./engine -run '^$' -bench ONNXQuantized -benchtime 20x
func BenchmarkONNXQuantized(b *testing.B) {
	dir := testenv.Fixture(b, "models", "ref-bert-embed-onnx")
	seqs := fixtureSeqs(b)
	for len(seqs) < 64 {
		seqs = append(seqs, seqs...)
	}
	tokens := 0
	for _, s := range seqs {
		tokens += len(s)
	}
	e := openONNX(b)
	q := quantizeInto(b, filepath.Join(dir, "model.onnx"), "model.onnx")
	besideModel(b, dir, q)
	ctx := context.Background()
	paths := []string{filepath.Join(dir, "model.onnx"), q, filepath.Join(dir, "model_quantized.onnx")}
	names := []string{"fp32", "synapse-int8", "fixture-int8"}
	refs := make([]string, len(paths))
	for i, p := range paths {
		info, err := e.Load(ctx, onnxLoad(b, p, wire.RuntimeConfig{Threads: 1}))
		if err != nil {
			b.Fatal(err)
		}
		refs[i] = info.Ref
	}
	took := make([]time.Duration, len(paths))
	for b.Loop() {
		for i, ref := range refs {
			start := time.Now()
			if _, _, err := e.Embed(ctx, ref, "", true, seqs); err != nil {
				b.Fatal(err)
			}
			took[i] += time.Since(start)
		}
	}
	for i, name := range names {
		b.ReportMetric(float64(tokens*b.N)/took[i].Seconds(), name+"_tokens/s")
		if i > 0 {
			b.ReportMetric(took[0].Seconds()/took[i].Seconds(), name+"_speedup")
		}
	}
}
