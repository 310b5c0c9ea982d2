//go:build cgo

package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/wire"
)

// writeST writes a generated encoder (last_hidden_state only, 8 wide) with
// the sentence-transformers files st describes.
func writeST(t *testing.T, st onnxtest.ST) (string, []onnxtest.Dense) {
	t.Helper()
	enc := onnxtest.Tiny()
	enc.Pooled = false
	dir := t.TempDir()
	if _, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: enc}); err != nil {
		t.Fatal(err)
	}
	dense, err := onnxtest.WriteST(dir, st)
	if err != nil {
		t.Fatal(err)
	}
	return dir, dense
}

func cosine64(a []float32, b []float64) float64 {
	x := make([]float32, len(b))
	for i, v := range b {
		x[i] = float32(v)
	}
	return testenv.Cosine(a, x)
}

// TestONNXSTChain: a sentence-transformers directory's Pooling (every
// mode, and two concatenated), Dense and Normalize modules give the vectors
// an independent float64 computation over the graph's own
// last_hidden_state (run through ONNX Runtime by the test) gives.
func TestONNXSTChain(t *testing.T) {
	e := openONNX(t)
	ctx := context.Background()
	const hidden = 8
	tests := []struct {
		name  string
		modes []string
		dense []onnxtest.Dense
		norm  bool
	}{
		{"mean", []string{"mean"}, nil, false},
		{"cls", []string{"cls"}, nil, false},
		{"max", []string{"max"}, nil, false},
		{"lasttoken", []string{"lasttoken"}, nil, false},
		{"mean_sqrt_len_tokens", []string{"mean_sqrt_len_tokens"}, nil, false},
		{"weightedmean", []string{"weightedmean"}, nil, false},
		{"cls+mean concatenated", []string{"mean", "cls"}, nil, false},
		{"mean dense tanh normalize", []string{"mean"}, []onnxtest.Dense{{In: hidden, Out: 5, Seed: 1}}, true},
		{"max two dense layers", []string{"max", "weightedmean"}, []onnxtest.Dense{
			{In: 2 * hidden, Out: 6, Seed: 2, Activation: "torch.nn.modules.activation.GELU"},
			{In: 6, Out: 4, Seed: 3, NoBias: true, Activation: "torch.nn.modules.linear.Identity"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, dense := writeST(t, onnxtest.ST{Pooling: onnxtest.PoolingConfig(hidden, true, tt.modes...), Dense: tt.dense, Normalize: tt.norm})
			files, err := hfmodel.Resolve(dir)
			if err != nil {
				t.Fatal(err)
			}
			info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{Threads: 1, STModules: files.Chain.String()}))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := onnxtest.STReference(onnxtest.LastHiddenState(t, files.Graph, testSeqs[0]), tt.modes, dense, tt.norm)
			if info.Dims != len(want) {
				t.Fatalf("dims: got %d; want %d", info.Dims, len(want))
			}
			vecs, dims, err := e.Embed(ctx, info.Ref, "", false, testSeqs)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range testSeqs {
				want := onnxtest.STReference(onnxtest.LastHiddenState(t, files.Graph, s), tt.modes, dense, tt.norm)
				got := vecs[i*dims : (i+1)*dims]
				if c := cosine64(got, want); c < 0.99999 {
					t.Errorf("sequence %d: cosine %.7f to the independent computation; want ≥ 0.99999\ngot  %v\nwant %v", i, c, got, want)
				}
				for d := range want {
					if diff := float64(got[d]) - want[d]; diff > 1e-4 || diff < -1e-4 {
						t.Errorf("sequence %d dimension %d: got %v; want %v", i, d, got[d], want[d])
						break
					}
				}
			}
		})
	}
}

// TestONNXSTChainRefusals: a chain the engine cannot apply as read, and a
// LOAD whose st_modules is not what the worker reads, are refused.
func TestONNXSTChainRefusals(t *testing.T) {
	e := openONNX(t)
	ctx := context.Background()
	// Dense in_features 5 after an 8-wide mean pooling.
	dir, _ := writeST(t, onnxtest.ST{Pooling: onnxtest.PoolingConfig(0, true, "mean"), Dense: []onnxtest.Dense{{In: 5, Out: 3}}})
	_, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{}))
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeArtifactInvalid || !strings.Contains(err.Error(), "Dense module 1 takes 5") {
		t.Errorf("Dense 5→3 after 8 values: got %v; want artifact_invalid naming the Dense module", err)
	}
	// The module read another chain than the worker finds.
	dir, _ = writeST(t, onnxtest.ST{Pooling: onnxtest.PoolingConfig(8, true, "cls"), Normalize: true})
	_, err = e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{STModules: "Pooling(mean)"}))
	if !errors.As(err, &we) || we.Code != wire.CodeArtifactInvalid || !strings.Contains(err.Error(), "Pooling(cls) + Normalize") {
		t.Errorf("st_modules mismatch: got %v; want artifact_invalid naming both", err)
	}
	// A LOAD pooling override replaces the Pooling module's mode; Normalize still applies.
	info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{Pooling: PoolingMean}))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := hfmodel.Resolve(dir)
	vecs, _, err := e.Embed(ctx, info.Ref, "", false, testSeqs[:1])
	if err != nil {
		t.Fatal(err)
	}
	want := onnxtest.STReference(onnxtest.LastHiddenState(t, files.Graph, testSeqs[0]), []string{"mean"}, nil, true)
	if c := cosine64(vecs, want); c < 0.99999 {
		t.Errorf("pooling mean over a cls chain: cosine %.7f to mean + Normalize", c)
	}
}

// TestONNXSTGraphPooled: a graph whose sentence_embedding output holds the
// chain is used as it is (Normalize is not applied again); one whose
// sentence_embedding is narrower than the chain's output is refused.
func TestONNXSTGraphPooled(t *testing.T) {
	e := openONNX(t)
	ctx := context.Background()
	dir := t.TempDir()
	enc, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: onnxtest.Tiny()}) // both outputs; sentence_embedding = mean, unnormalized
	if err != nil {
		t.Fatal(err)
	}
	if _, err := onnxtest.WriteST(dir, onnxtest.ST{Pooling: onnxtest.PoolingConfig(8, true, "mean"), Normalize: true}); err != nil {
		t.Fatal(err)
	}
	info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	vecs, _, err := e.Embed(ctx, info.Ref, "", false, testSeqs[:1])
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(vecs, expected(enc, testSeqs[0], PoolingMean, false)); d > 1e-5 {
		t.Errorf("sentence_embedding graph: max |Δ| %g to the graph's own (unnormalized) output; the chain must not run again", d)
	}
	if _, err := onnxtest.WriteST(dir, onnxtest.ST{Pooling: onnxtest.PoolingConfig(8, true, "mean"), Dense: []onnxtest.Dense{{In: 8, Out: 3}}}); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "2_Normalize"))
	_, err = e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{}))
	if err == nil || !strings.Contains(err.Error(), "sentence_embedding is 8 wide") {
		t.Errorf("8-wide sentence_embedding with a Dense 8→3 chain: got %v; want a refusal", err)
	}
}

// TestONNXSTPoolFrom: every pooling mode leaves a sequence's first
// pool_from tokens out as Pooling.forward does with include_prompt false
// (the attention mask zeroed over the prompt), against the independent
// computation; cls still takes token 0.
func TestONNXSTPoolFrom(t *testing.T) {
	e := openONNX(t)
	ctx := context.Background()
	seqs := [][]int32{{2, 6, 7, 8, 3}, {2, 10, 11, 12, 13, 14, 15, 3}, {2, 9, 3}, {2, 5, 3}}
	from := []int{3, 2, 0, 3} // the last: every token left out
	for _, mode := range []string{"mean", "cls", "max", "lasttoken", "mean_sqrt_len_tokens", "weightedmean"} {
		t.Run(mode, func(t *testing.T) {
			dir, dense := writeST(t, onnxtest.ST{Pooling: onnxtest.PoolingConfig(8, false, mode), Dense: []onnxtest.Dense{{In: 8, Out: 8, Seed: 5}}})
			files, _ := hfmodel.Resolve(dir)
			info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{Threads: 1}))
			if err != nil {
				t.Fatal(err)
			}
			vecs, dims, err := e.EmbedPoolFrom(ctx, info.Ref, "", false, seqs, from)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range seqs {
				want := onnxtest.STReferenceFrom(onnxtest.LastHiddenState(t, files.Graph, s), from[i], []string{mode}, dense, false)
				if c := cosine64(vecs[i*dims:(i+1)*dims], want); c < 0.99999 {
					t.Errorf("sequence %d pool_from %d: cosine %.7f; want ≥ 0.99999", i, from[i], c)
				}
			}
			all, _, _ := e.Embed(ctx, info.Ref, "", false, seqs[:1])
			if mode != "cls" && mode != "lasttoken" && testenv.Cosine(all, vecs[:dims]) > 0.99999 { // cls and lasttoken take one unmasked token
				t.Errorf("pool_from 3 gives the vector of pool_from 0")
			}
		})
	}
}
