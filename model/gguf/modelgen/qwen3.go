package modelgen

import (
	"fmt"

	"github.com/synapse-embed/synapse/model/gguf"
)

// Qwen3 configures a Qwen3 decoder (general.architecture "qwen3") as
// llama.cpp loads it: grouped-query attention with a per-head RMSNorm of
// the queries and keys, NeoX rotary positions (weights as transformers
// stores them, not permuted), a SwiGLU feed-forward layer, RMSNorm before
// each block and at the end. With Pooling it is an embedder
// (Qwen3-Embedding pools the last token); the output head is left out, so
// llama.cpp ties it to token_embd.
type Qwen3 struct {
	Name    string // general.name
	Layers  int    // qwen3.block_count
	Width   int    // qwen3.embedding_length
	Heads   int    // qwen3.attention.head_count
	HeadsKV int    // qwen3.attention.head_count_kv; divides Heads
	HeadDim int    // qwen3.attention.key_length and value_length (config.json head_dim); even
	FFN     int    // qwen3.feed_forward_length
	Context int    // qwen3.context_length
	Pooling Pooling
	// RopeBase is qwen3.rope.freq_base (config.json rope_theta); Eps
	// qwen3.attention.layer_norm_rms_epsilon.
	RopeBase, Eps float32
	Vocab         Vocab
	// Fill gives every tensor's values, row by row as gguf.Tensor.Fill;
	// a tensor it does not name is generated.
	Fill map[string]func(row int, dst []float32)
	Seed uint64
}

func (c Qwen3) check() error {
	switch {
	case c.Layers < 1 || c.Width < 1 || c.Heads < 1 || c.HeadsKV < 1 || c.HeadDim < 1 || c.FFN < 1 || c.Context < 1:
		return fmt.Errorf("%w: qwen3: layers, width, heads, KV heads, head size, FFN and context must be positive", ErrConfig)
	case c.Heads%c.HeadsKV != 0:
		return fmt.Errorf("%w: qwen3: %d heads are not a multiple of %d KV heads", ErrConfig, c.Heads, c.HeadsKV)
	case c.HeadDim%2 != 0:
		return fmt.Errorf("%w: qwen3: head size %d is odd (RoPE needs pairs)", ErrConfig, c.HeadDim)
	case c.Vocab.Size() == 0:
		return fmt.Errorf("%w: qwen3: empty vocabulary", ErrConfig)
	case c.Pooling > PoolingLast:
		return fmt.Errorf("%w: qwen3: pooling %v", ErrConfig, c.Pooling)
	case c.RopeBase <= 0 || c.Eps <= 0:
		return fmt.Errorf("%w: qwen3: rope base %v and epsilon %v must be positive", ErrConfig, c.RopeBase, c.Eps)
	}
	return nil
}

// Writer returns a gguf.Writer holding the model (float32 weights).
func (c Qwen3) Writer() (*gguf.Writer, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	w := gguf.NewWriter()
	kvs := []struct {
		k string
		v any
	}{
		{"general.architecture", "qwen3"},
		{"general.name", c.Name},
		{"qwen3.context_length", uint32(c.Context)},
		{"qwen3.embedding_length", uint32(c.Width)},
		{"qwen3.block_count", uint32(c.Layers)},
		{"qwen3.feed_forward_length", uint32(c.FFN)},
		{"qwen3.rope.dimension_count", uint32(c.HeadDim)},
		{"qwen3.rope.freq_base", c.RopeBase},
		{"qwen3.attention.head_count", uint32(c.Heads)},
		{"qwen3.attention.head_count_kv", uint32(c.HeadsKV)},
		{"qwen3.attention.key_length", uint32(c.HeadDim)},
		{"qwen3.attention.value_length", uint32(c.HeadDim)},
		{"qwen3.attention.layer_norm_rms_epsilon", c.Eps},
		{"qwen3.pooling_type", uint32(c.Pooling)},
		{"general.file_type", uint32(0)}, // all F32
	}
	return w, writeDecoder(w, "qwen3", kvs, c.Vocab, c.tensors(), c.Seed, c.Fill)
}

// tensors lists the model's tensors, ne order ([in, out] for a matrix:
// a torch Linear's rows).
func (c Qwen3) tensors() []spec {
	return decoderTensors(c.Layers, uint64(c.Width), uint64(c.FFN), uint64(c.Vocab.Size()), uint64(c.Heads*c.HeadDim), uint64(c.HeadsKV*c.HeadDim), uint64(c.HeadDim), false)
}

// writeDecoder sets a decoder's metadata and vocabulary in w and adds its
// tensors (Fill's given, the others random from seed); arch names it in a
// configuration error.
func writeDecoder(w *gguf.Writer, arch string, kvs []struct {
	k string
	v any
}, v Vocab, specs []spec, seed uint64, fill map[string]func(int, []float32)) error {
	for _, kv := range kvs {
		if err := w.Set(kv.k, kv.v); err != nil {
			return fmt.Errorf("modelgen: %w", err)
		}
	}
	if err := v.set(w); err != nil {
		return err
	}
	for name := range fill {
		if !hasSpec(specs, name) {
			return fmt.Errorf("%w: %s: Fill names %q, which the model does not have", ErrConfig, arch, name)
		}
	}
	return addTensorsWith(w, seed, specs, fill)
}

// decoderTensors are a Qwen3-style decoder's tensors (width W, FFN F,
// vocabulary V, Q and KV query and key-value widths, head size D), ne
// order; gemma adds Gemma's norms after the attention and the FFN.
func decoderTensors(layers int, W, F, V, Q, KV, D uint64, gemma bool) []spec {
	f32 := gguf.GGMLTypeF32
	s := []spec{{"token_embd.weight", f32, []uint64{W, V}, initNormal}}
	for i := range layers {
		b := fmt.Sprintf("blk.%d.", i)
		s = append(s,
			spec{b + "attn_norm.weight", f32, []uint64{W}, initOnes},
			spec{b + "attn_q.weight", f32, []uint64{W, Q}, initNormal},
			spec{b + "attn_k.weight", f32, []uint64{W, KV}, initNormal},
			spec{b + "attn_v.weight", f32, []uint64{W, KV}, initNormal},
			spec{b + "attn_output.weight", f32, []uint64{Q, W}, initNormal},
			spec{b + "attn_q_norm.weight", f32, []uint64{D}, initOnes},
			spec{b + "attn_k_norm.weight", f32, []uint64{D}, initOnes})
		if gemma {
			s = append(s, spec{b + "post_attention_norm.weight", f32, []uint64{W}, initOnes})
		}
		s = append(s,
			spec{b + "ffn_norm.weight", f32, []uint64{W}, initOnes},
			spec{b + "ffn_gate.weight", f32, []uint64{W, F}, initNormal},
			spec{b + "ffn_up.weight", f32, []uint64{W, F}, initNormal},
			spec{b + "ffn_down.weight", f32, []uint64{F, W}, initNormal})
		if gemma {
			s = append(s, spec{b + "post_ffw_norm.weight", f32, []uint64{W}, initOnes})
		}
	}
	return append(s, spec{"output_norm.weight", f32, []uint64{W}, initOnes})
}

// Write writes the model to path.
func (c Qwen3) Write(path string) error {
	w, err := c.Writer()
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}
