package wordvec

import (
	"fmt"
	"math"

	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
)

// sinkDims are the trailing dimensions of each embedding row that carry the
// part of its unit length the SIF weight takes from the word vector; the
// last layer norm's weight is zero there, so the output is zero in them
// (`--dims` can cut them off).
const sinkDims = 2

// Context is the position table's length: the longest sequence the model
// takes (its positions are all zero, so it could be anything).
const Context = 512

// Model returns a one-layer BERT embedder (mean pooling) over vocab whose
// output for a text is, up to a positive factor, the SIF-weighted sum of
// its tokens' vectors (see the package comment for why the layers pass the
// embeddings through). vocab must be the vocabulary the vectors were learned
// with.
func Model(vocab modelgen.Vocab, v *Vectors, name string) (modelgen.BERT, error) {
	if vocab.Size() != len(v.Unit) {
		return modelgen.BERT{}, fmt.Errorf("%w: vocabulary of %d tokens, vectors for %d", ErrConfig, vocab.Size(), len(v.Unit))
	}
	dims := len(v.Unit[0])
	width := dims + sinkDims
	zeros := func(int, []float32) {}
	fill := map[string]func(int, []float32){
		"token_embd.weight":    func(row int, dst []float32) { embeddingRow(dst, v.Unit[row], v.Weight[row]) },
		"position_embd.weight": zeros,
		"token_types.weight":   zeros,
		"blk.0.layer_output_norm.weight": func(_ int, dst []float32) {
			for i := range dst {
				dst[i] = 1
			}
			clear(dst[len(dst)-sinkDims:])
		},
	}
	for _, t := range []string{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_up", "ffn_down"} {
		fill["blk.0."+t+".weight"] = zeros
	}
	return modelgen.BERT{
		Name: name, Layers: 1, Width: width, Heads: 1, FFN: 1, Context: Context,
		Pooling: modelgen.PoolingMean, WeightType: gguf.GGMLTypeF32, Vocab: vocab, Fill: fill,
	}, nil
}

// embeddingRow writes a token's embedding: weight·u in the content
// dimensions and ±√(1−weight²)/√2 in the two sink dimensions after them, a zero-sum
// vector of unit length that BERT's layer norms leave as it is, up to the
// factor √width.
func embeddingRow(dst, u []float32, weight float32) {
	clear(dst)
	w := float64(weight)
	s := float32(math.Sqrt(max(0, 1-w*w)) / math.Sqrt2)
	for i, x := range u {
		dst[i] = weight * x
	}
	dst[len(u)], dst[len(u)+1] = s, -s
}
