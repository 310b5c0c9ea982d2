//go:build cgo

package engine

import (
	"context"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/wire"
)

// TestONNXEmbedTokens checks that every token's state is the graph's
// last_hidden_state row, for equal-length runs, one sequence per run and
// padded runs, and that a graph without last_hidden_state is unsupported.
func TestONNXEmbedTokens(t *testing.T) {
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
	enc.Layers = 1
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
			states, dims, err := e.EmbedTokens(ctx, info.Ref, testSeqs)
			if err != nil {
				t.Fatalf("EmbedTokens: %v", err)
			}
			if dims != enc.Hidden {
				t.Fatalf("dims: got %d; want %d", dims, enc.Hidden)
			}
			off := 0
			for i, s := range testSeqs {
				for j, want := range enc.HiddenStates(s) {
					got := states[off : off+dims]
					off += dims
					if d := maxDiff(got, want); d > 1e-5 {
						t.Errorf("sequence %d token %d: max |Δ| %g\ngot  %v\nwant %v", i, j, d, got, want)
					}
				}
			}
			if off != len(states) {
				t.Errorf("got %d values; want %d", len(states), off)
			}
		})
	}
	t.Run("sentence_embedding only", func(t *testing.T) {
		x := onnxtest.Tiny()
		x.NoHidden = true
		dir, _ := writeEncoder(t, x)
		e := openONNX(t)
		info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{Threads: 1}))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		_, _, err = e.EmbedTokens(ctx, info.Ref, testSeqs)
		if got := wire.CodeOf(err); got != wire.CodeUnsupported {
			t.Fatalf("got %v (code %s); want code unsupported", err, got)
		}
	})
}
