package modelgen

import (
	"fmt"

	"github.com/synapse-embed/synapse/model/gguf"
)

// GemmaEmbedding configures an EmbeddingGemma encoder (general.architecture
// "gemma-embedding") as llama.cpp loads it: Gemma 3's layers (grouped-query
// attention with a per-head RMSNorm of the queries and keys, NeoX rotary
// positions, RMSNorms before and after attention and the GeGLU feed-forward
// layer, embeddings scaled by sqrt(width)) with bidirectional attention,
// five sliding-window layers then one full-attention layer, the pooling,
// and sentence-transformers' two Dense projections after it (dense_2 Width
// → DenseWidth, dense_3 DenseWidth → Width, no biases). The RMSNorm weights
// are llama.cpp's (transformers' plus one: Gemma scales by 1 + weight).
type GemmaEmbedding struct {
	Name    string // general.name
	Layers  int    // block_count
	Width   int    // embedding_length
	Heads   int    // attention.head_count
	HeadsKV int    // attention.head_count_kv; divides Heads
	HeadDim int    // attention.key_length and value_length; even
	FFN     int    // feed_forward_length
	Context int    // context_length
	// Window is attention.sliding_window (config.json's sliding_window):
	// a sliding layer's token sees those within Window/2 positions.
	Window  int
	Pooling Pooling
	// DenseWidth is dense_2_feat_out and dense_3_feat_in; 0: no Dense
	// projections.
	DenseWidth int
	// RopeBase is rope.freq_base (the full-attention layers'; the sliding
	// ones use 10,000, rope.freq_base_swa); Eps is
	// attention.layer_norm_rms_epsilon.
	RopeBase, Eps float32
	Vocab         Vocab
	// Fill gives every tensor's values, row by row as gguf.Tensor.Fill;
	// a tensor it does not name is generated.
	Fill map[string]func(row int, dst []float32)
	Seed uint64
}

// GemmaSlidingPattern is llama.cpp's layer pattern for gemma-embedding:
// of every six layers, the first five use the sliding window.
const GemmaSlidingPattern = 6

// GemmaSlidingRopeBase is the rotary base of the sliding-window layers.
const GemmaSlidingRopeBase = 10000

const gemmaArch = "gemma-embedding"

func (c GemmaEmbedding) check() error {
	switch {
	case c.Layers < 1 || c.Width < 1 || c.Heads < 1 || c.HeadsKV < 1 || c.HeadDim < 1 || c.FFN < 1 || c.Context < 1 || c.Window < 1:
		return fmt.Errorf("%w: gemma: layers, width, heads, KV heads, head size, FFN, context and window must be positive", ErrConfig)
	case c.Heads%c.HeadsKV != 0:
		return fmt.Errorf("%w: gemma: %d heads are not a multiple of %d KV heads", ErrConfig, c.Heads, c.HeadsKV)
	case c.HeadDim%2 != 0:
		return fmt.Errorf("%w: gemma: head size %d is odd (RoPE needs pairs)", ErrConfig, c.HeadDim)
	case c.Vocab.Size() == 0:
		return fmt.Errorf("%w: gemma: empty vocabulary", ErrConfig)
	case c.Pooling == PoolingNone || c.Pooling > PoolingLast:
		return fmt.Errorf("%w: gemma: pooling %v (an embedder pools)", ErrConfig, c.Pooling)
	case c.RopeBase <= 0 || c.Eps <= 0 || c.DenseWidth < 0:
		return fmt.Errorf("%w: gemma: rope base %v, epsilon %v and Dense width %d: want positive", ErrConfig, c.RopeBase, c.Eps, c.DenseWidth)
	}
	return nil
}

// Writer returns a gguf.Writer holding the model (float32 weights).
func (c GemmaEmbedding) Writer() (*gguf.Writer, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	w := gguf.NewWriter()
	a := gemmaArch + "."
	kvs := []struct {
		k string
		v any
	}{
		{"general.architecture", gemmaArch},
		{"general.name", c.Name},
		{a + "context_length", uint32(c.Context)},
		{a + "embedding_length", uint32(c.Width)},
		{a + "block_count", uint32(c.Layers)},
		{a + "feed_forward_length", uint32(c.FFN)},
		{a + "rope.dimension_count", uint32(c.HeadDim)},
		{a + "rope.freq_base", c.RopeBase},
		{a + "rope.freq_base_swa", float32(GemmaSlidingRopeBase)},
		{a + "attention.head_count", uint32(c.Heads)},
		{a + "attention.head_count_kv", uint32(c.HeadsKV)},
		{a + "attention.key_length", uint32(c.HeadDim)},
		{a + "attention.value_length", uint32(c.HeadDim)},
		{a + "attention.layer_norm_rms_epsilon", c.Eps},
		{a + "attention.sliding_window", uint32(c.Window)},
		{a + "attention.sliding_window_pattern", uint32(GemmaSlidingPattern)},
		{a + "pooling_type", uint32(c.Pooling)},
		{"general.file_type", uint32(0)}, // all F32
	}
	if c.DenseWidth > 0 {
		kvs = append(kvs, []struct {
			k string
			v any
		}{
			{a + "dense_2_feat_in", uint32(c.Width)}, {a + "dense_2_feat_out", uint32(c.DenseWidth)},
			{a + "dense_3_feat_in", uint32(c.DenseWidth)}, {a + "dense_3_feat_out", uint32(c.Width)},
		}...)
	}
	return w, writeDecoder(w, "gemma", kvs, c.Vocab, c.tensors(), c.Seed, c.Fill)
}

// tensors lists the model's tensors, ne order ([in, out] for a matrix:
// a torch Linear's rows).
func (c GemmaEmbedding) tensors() []spec {
	W, f32 := uint64(c.Width), gguf.GGMLTypeF32
	s := decoderTensors(c.Layers, W, uint64(c.FFN), uint64(c.Vocab.Size()), uint64(c.Heads*c.HeadDim), uint64(c.HeadsKV*c.HeadDim), uint64(c.HeadDim), true)
	if c.DenseWidth > 0 {
		E := uint64(c.DenseWidth)
		s = append(s, spec{"dense_2.weight", f32, []uint64{W, E}, initNormal}, spec{"dense_3.weight", f32, []uint64{E, W}, initNormal})
	}
	return s
}

// EmbeddingGemma300M has the shape of google/embeddinggemma-300m (24 layers,
// 768 wide, 3 heads of 256 with one KV head, FFN 1152, a window of 512,
// Dense 768 → 3072 → 768, mean pooling; float32) at a 512-token context,
// for benchmarks against BERTBase.
func EmbeddingGemma300M(v Vocab) GemmaEmbedding {
	return GemmaEmbedding{Name: "synapse-embeddinggemma-300m-random", Layers: 24, Width: 768, Heads: 3, HeadsKV: 1, HeadDim: 256,
		FFN: 1152, Context: 512, Window: 512, Pooling: PoolingMean, DenseWidth: 3072, RopeBase: 1e6, Eps: 1e-6, Seed: DefaultSeed, Vocab: v}
}

// Write writes the model to path.
func (c GemmaEmbedding) Write(path string) error {
	w, err := c.Writer()
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}
