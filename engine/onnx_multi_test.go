//go:build cgo

package engine

import (
	"context"
	"math"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/wire"
)

// multiRef is a token's ColBERT vector from its float32 hidden state: the
// projection W·h in float64, L2-normalised (a zero state stays zero).
func multiRef(d onnxtest.Dense, h []float32) []float64 {
	v := make([]float64, d.Out)
	var n float64
	for o := range v {
		for i, x := range h {
			v[o] += float64(d.W[o*d.In+i]) * float64(x)
		}
		n += v[o] * v[o]
	}
	for o := range v {
		v[o] /= max(math.Sqrt(n), 1e-12)
	}
	return v
}

// TestONNXEmbedMulti checks every token's vector against the generated
// encoder's hidden state through its projection, in float64, for
// equal-length, one-per-run and padded runs, with some sequences' last
// tokens outside the attention mask (the generated encoder zeroes masked
// states, so theirs are zero vectors); and that a graph without a
// projection is unsupported and one with it refuses EMBED_BATCH.
func TestONNXEmbedMulti(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		opts ONNXOptions
		rc   wire.RuntimeConfig
	}{
		{"equal-length runs", ONNXOptions{}, wire.RuntimeConfig{Threads: 1}},
		{"one sequence per run", ONNXOptions{}, wire.RuntimeConfig{Threads: 1, SeqMax: 1}},
		{"padded runs", ONNXOptions{PadTokens: 8}, wire.RuntimeConfig{Threads: 1}},
	}
	enc := onnxtest.Tiny()
	enc.Layers, enc.Pooled = 1, false
	dir, enc := writeEncoder(t, enc)
	dense, err := onnxtest.WriteST(dir, onnxtest.ST{Dense: []onnxtest.Dense{{In: enc.Hidden, Out: 4, NoBias: true, Activation: "torch.nn.modules.linear.Identity", Seed: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	attend := []int{0, 3, 0, 0, 5, 2, 0} // testSeqs[1] keeps 3 of 5 tokens in the mask, [4] 5 of 8, [5] 2 of 3
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Lib = testenv.ORTLib(t)
			e, err := OpenONNX(tt.opts)
			if err != nil {
				t.Fatalf("OpenONNX: %v", err)
			}
			defer e.Close()
			info, err := e.Load(ctx, onnxLoad(t, dir, tt.rc))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if info.Dims != 4 {
				t.Errorf("LOADED dims %d; want the projection's 4", info.Dims)
			}
			vecs, dims, err := e.EmbedMulti(ctx, info.Ref, testSeqs, attend)
			if err != nil || dims != 4 {
				t.Fatalf("EmbedMulti: %d dims, %v; want 4", dims, err)
			}
			off := 0
			for i, s := range testSeqs {
				h := enc.HiddenStates(s)
				for j := range s {
					want := make([]float64, 4)
					if attend[i] == 0 || j < attend[i] {
						want = multiRef(dense[0], h[j])
					}
					for d, w := range want {
						if got := float64(vecs[(off+j)*4+d]); math.Abs(got-w) > 1e-5 {
							t.Fatalf("sequence %d token %d dim %d: %g; want %g", i, j, d, got, w)
						}
					}
				}
				off += len(s)
			}
			if off*4 != len(vecs) {
				t.Errorf("%d values; want %d", len(vecs), off*4)
			}
			_, _, err = e.Embed(ctx, info.Ref, "", true, testSeqs)
			if got := wire.CodeOf(err); got != wire.CodeUnsupported {
				t.Errorf("EMBED_BATCH on a multi-vector model: got %v (code %s); want unsupported", err, got)
			}
		})
	}
	t.Run("no projection", func(t *testing.T) {
		dir, _ := writeEncoder(t, onnxtest.Tiny())
		e := openONNX(t)
		info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{Threads: 1}))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		_, _, err = e.EmbedMulti(ctx, info.Ref, testSeqs, nil)
		if got := wire.CodeOf(err); got != wire.CodeUnsupported {
			t.Fatalf("got %v (code %s); want code unsupported", err, got)
		}
	})
}
