//go:build cgo

package engine

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/wire"
)

// spladeRef is SPLADE's vector of one sequence from float64 logits: w_v =
// max over tokens of log(1 + relu(logit)), where > 0, the top k largest
// when k > 0 (ties: the smaller index), by index.
func spladeRef(logits [][]float64, k int) ([]uint32, []float64) {
	w := make([]float64, len(logits[0]))
	for _, row := range logits {
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
			if w[a] != w[b] {
				if w[a] > w[b] {
					return -1
				}
				return 1
			}
			return int(a) - int(b)
		})
		ix = ix[:k]
		slices.Sort(ix)
	}
	vals := make([]float64, len(ix))
	for i, v := range ix {
		vals[i] = w[v]
	}
	return ix, vals
}

// TestONNXEmbedSparse checks every sequence's sparse vector against SPLADE
// computed in float64 from the generated masked-LM's weights, for
// equal-length, one-per-run and padded runs, with and without top_k; and
// that a graph without masked-LM logits is unsupported, one with them
// refuses EMBED_BATCH, and a cross-encoder's 2-D logits still load as one.
func TestONNXEmbedSparse(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		opts ONNXOptions
		rc   wire.RuntimeConfig
		topK int
	}{
		{"equal-length runs", ONNXOptions{}, wire.RuntimeConfig{Threads: 1}, 0},
		{"one sequence per run, top 5", ONNXOptions{}, wire.RuntimeConfig{Threads: 1, SeqMax: 1}, 5},
		{"padded runs", ONNXOptions{PadTokens: 8}, wire.RuntimeConfig{Threads: 1}, 0},
		{"padded runs, top 1", ONNXOptions{PadTokens: 8}, wire.RuntimeConfig{Threads: 1}, 1},
	}
	enc := onnxtest.Tiny()
	enc.Layers, enc.MLM, enc.NoHidden, enc.Pooled = 1, true, true, false
	dir, enc := writeEncoder(t, enc)
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
			if info.Dims != enc.Vocab {
				t.Errorf("LOADED dims %d; want the vocabulary, %d", info.Dims, enc.Vocab)
			}
			vecs, vocab, err := e.EmbedSparse(ctx, info.Ref, tt.topK, testSeqs)
			if err != nil {
				t.Fatalf("EmbedSparse: %v", err)
			}
			if vocab != enc.Vocab || len(vecs) != len(testSeqs) {
				t.Fatalf("got %d vectors over %d terms; want %d over %d", len(vecs), vocab, len(testSeqs), enc.Vocab)
			}
			for i, s := range testSeqs {
				ix, want := spladeRef(enc.MLMLogits(s), tt.topK)
				if !slices.Equal(vecs[i].Indices, ix) {
					t.Fatalf("sequence %d: indices %v; want %v", i, vecs[i].Indices, ix)
				}
				for j := range ix {
					if d := math.Abs(float64(vecs[i].Values[j]) - want[j]); d > 1e-5 {
						t.Errorf("sequence %d term %d: %g; want %g", i, ix[j], vecs[i].Values[j], want[j])
					}
				}
				if tt.topK == 0 && (len(ix) == 0 || len(ix) == enc.Vocab) {
					t.Errorf("sequence %d: %d of %d terms: the test model is not sparse", i, len(ix), enc.Vocab)
				}
			}
			_, _, err = e.Embed(ctx, info.Ref, "", true, testSeqs)
			if got := wire.CodeOf(err); got != wire.CodeUnsupported {
				t.Errorf("EMBED_BATCH on a masked-LM graph: got %v (code %s); want unsupported", err, got)
			}
		})
	}
	t.Run("no logits", func(t *testing.T) {
		dir, _ := writeEncoder(t, onnxtest.Tiny())
		e := openONNX(t)
		info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{Threads: 1}))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		_, _, err = e.EmbedSparse(ctx, info.Ref, 0, testSeqs)
		if got := wire.CodeOf(err); got != wire.CodeUnsupported {
			t.Fatalf("got %v (code %s); want code unsupported", err, got)
		}
	})
	t.Run("hidden states and logits", func(t *testing.T) {
		x := onnxtest.Tiny()
		x.MLM = true
		dir, x := writeEncoder(t, x)
		e := openONNX(t)
		info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{Threads: 1}))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if info.Dims != x.Hidden {
			t.Errorf("dims %d; want the dense vectors' %d", info.Dims, x.Hidden)
		}
		vecs, _, err := e.EmbedSparse(ctx, info.Ref, 0, testSeqs[:1])
		if ix, _ := spladeRef(x.MLMLogits(testSeqs[0]), 0); err != nil || !slices.Equal(vecs[0].Indices, ix) {
			t.Fatalf("got %v, %v; want indices %v", vecs, err, ix)
		}
	})
}
