package engine

import (
	"context"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
)

// TestLlamaEmbedTokens: the mean of a sequence's token states is
// llama.cpp's own mean pooling of it, and its first token's state is CLS
// pooling, for sequences packed several to a call.
func TestLlamaEmbedTokens(t *testing.T) {
	e := testEngine(t)
	info := loadFixture(t, genEmbed, embedConfig)
	var seqs [][]int32
	for _, ids := range corpusIDs(t, 6) {
		seqs = append(seqs, ids[:min(len(ids), 60)])
	}
	ctx := context.Background()
	states, dims, err := e.EmbedTokens(ctx, info.Ref, seqs)
	if err != nil {
		t.Fatalf("EmbedTokens: %v", err)
	}
	for _, pool := range []string{PoolingMean, PoolingCLS} {
		want, wdims, err := e.Embed(ctx, info.Ref, pool, false, seqs)
		if err != nil {
			t.Fatal(err)
		}
		if wdims != dims {
			t.Fatalf("dims: got %d; want %d", dims, wdims)
		}
		off := 0
		for i, s := range seqs {
			got := make([]float32, dims)
			rows := states[off*dims : (off+len(s))*dims]
			off += len(s)
			if pool == PoolingCLS {
				copy(got, rows[:dims])
			} else {
				for j := range len(s) {
					for d := range dims {
						got[d] += rows[j*dims+d] / float32(len(s))
					}
				}
			}
			if c := testenv.Cosine(got, want[i*dims:(i+1)*dims]); c < 0.99999 {
				t.Errorf("sequence %d, %s of the token states: cosine %.7f to llama.cpp's pooling; want ≥ 0.99999", i, pool, c)
			}
		}
		if off*dims != len(states) {
			t.Errorf("got %d values; want %d", len(states), off*dims)
		}
	}
}
