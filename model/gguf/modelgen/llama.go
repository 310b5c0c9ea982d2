package modelgen

import (
	"fmt"
	"io"

	"github.com/synapse-embed/synapse/model/gguf"
)

// Llama configures a llama-architecture decoder (general.architecture "llama").
type Llama struct {
	Name    string // general.name
	Layers  int    // llama.block_count
	Width   int    // llama.embedding_length
	Heads   int    // llama.attention.head_count; divides Width
	HeadsKV int    // llama.attention.head_count_kv; 0 means Heads; divides Heads
	FFN     int    // llama.feed_forward_length
	Context int    // llama.context_length
	// WeightType stores token_embd, output and the matrices: F16, F32 or Q8_0
	// (Width and FFN multiples of 32). Norm weights are F32.
	WeightType gguf.GGMLType
	Eps        float32 // llama.attention.layer_norm_rms_epsilon; 0 means 1e-5
	Seed       uint64
	Vocab      Vocab // tokenizer.ggml.* entries, e.g. SentencePiece (model "llama")
	// ChatTemplate is written as tokenizer.chat_template when not empty.
	ChatTemplate string
}

func (c Llama) headsKV() int {
	if c.HeadsKV > 0 {
		return c.HeadsKV
	}
	return c.Heads
}

func (c Llama) check() error {
	switch {
	case c.Layers < 1 || c.Width < 1 || c.Heads < 1 || c.FFN < 1 || c.Context < 1:
		return fmt.Errorf("%w: llama: layers, width, heads, FFN and context must be positive", ErrConfig)
	case c.Width%c.Heads != 0 || c.Heads%c.headsKV() != 0:
		return fmt.Errorf("%w: llama: width %d, heads %d and KV heads %d do not divide", ErrConfig, c.Width, c.Heads, c.headsKV())
	case (c.Width/c.Heads)%2 != 0:
		return fmt.Errorf("%w: llama: head size %d is odd (RoPE needs pairs)", ErrConfig, c.Width/c.Heads)
	case c.Vocab.Size() == 0:
		return fmt.Errorf("%w: llama: empty vocabulary", ErrConfig)
	}
	_, err := fileType(c.WeightType)
	return err
}

// Writer returns a gguf.Writer holding the model; its tensor values are
// generated while it is written.
func (c Llama) Writer() (*gguf.Writer, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	ft, _ := fileType(c.WeightType)
	eps := c.Eps
	if eps == 0 {
		eps = 1e-5
	}
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "llama"},
		{"general.name", c.Name},
		{"llama.context_length", uint32(c.Context)},
		{"llama.embedding_length", uint32(c.Width)},
		{"llama.block_count", uint32(c.Layers)},
		{"llama.feed_forward_length", uint32(c.FFN)},
		{"llama.rope.dimension_count", uint32(c.Width / c.Heads)},
		{"llama.attention.head_count", uint32(c.Heads)},
		{"llama.attention.head_count_kv", uint32(c.headsKV())},
		{"llama.attention.layer_norm_rms_epsilon", eps},
		{"general.file_type", ft},
	} {
		if err := w.Set(kv.k, kv.v); err != nil {
			return nil, fmt.Errorf("modelgen: %w", err)
		}
	}
	if err := c.Vocab.set(w); err != nil {
		return nil, err
	}
	if c.ChatTemplate != "" {
		if err := w.Set("tokenizer.chat_template", c.ChatTemplate); err != nil {
			return nil, fmt.Errorf("modelgen: %w", err)
		}
	}
	return w, addTensors(w, c.Seed, c.tensors())
}

// tensors lists the model's tensors in the reference model's order.
func (c Llama) tensors() []spec {
	W, F, V := uint64(c.Width), uint64(c.FFN), uint64(c.Vocab.Size())
	KV := W / uint64(c.Heads) * uint64(c.headsKV())
	f32, wt := gguf.GGMLTypeF32, c.WeightType
	s := []spec{{"token_embd.weight", wt, []uint64{W, V}, initNormal}}
	for i := 0; i < c.Layers; i++ {
		b := fmt.Sprintf("blk.%d.", i)
		s = append(s,
			spec{b + "attn_q.weight", wt, []uint64{W, W}, initNormal},
			spec{b + "attn_k.weight", wt, []uint64{W, KV}, initNormal},
			spec{b + "attn_v.weight", wt, []uint64{W, KV}, initNormal},
			spec{b + "attn_output.weight", wt, []uint64{W, W}, initNormal},
			spec{b + "ffn_gate.weight", wt, []uint64{W, F}, initNormal},
			spec{b + "ffn_up.weight", wt, []uint64{W, F}, initNormal},
			spec{b + "ffn_down.weight", wt, []uint64{F, W}, initNormal},
			spec{b + "attn_norm.weight", f32, []uint64{W}, initOnes},
			spec{b + "ffn_norm.weight", f32, []uint64{W}, initOnes},
		)
	}
	return append(s,
		spec{"output_norm.weight", f32, []uint64{W}, initOnes},
		spec{"output.weight", wt, []uint64{W, V}, initNormal},
	)
}

// Write writes the model to path.
func (c Llama) Write(path string) error {
	w, err := c.Writer()
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}

// WriteTo writes the model to out.
func (c Llama) WriteTo(out io.Writer) (int64, error) {
	w, err := c.Writer()
	if err != nil {
		return 0, err
	}
	return w.WriteTo(out)
}
