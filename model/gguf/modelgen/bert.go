package modelgen

import (
	"fmt"
	"io"

	"github.com/synapse-embed/synapse/model/gguf"
)

// BERT configures a BERT encoder (general.architecture "bert"). With Pooling
// PoolingRank it is a cross-encoder reranker and gets the classifier head
// llama.cpp uses for rank pooling (cls.weight/bias, cls.output.weight/bias).
type BERT struct {
	Name       string // general.name
	Layers     int    // bert.block_count
	Width      int    // bert.embedding_length
	Heads      int    // bert.attention.head_count; divides Width
	FFN        int    // bert.feed_forward_length
	Context    int    // bert.context_length: rows of position_embd
	TokenTypes int    // rows of token_types.weight; 0 means 2 (1 for rank pooling)
	Pooling    Pooling
	// Labels, with rank pooling, names the classifier's outputs
	// (bert.classifier.output_labels, which llama.cpp sizes cls.output by);
	// nil writes no labels and one output.
	Labels []string
	// WeightType stores token_embd and the matrices: F16, F32 or Q8_0 (Width
	// and FFN multiples of 32). Norms, biases and position embeddings are F32.
	WeightType gguf.GGMLType
	Eps        float32 // bert.attention.layer_norm_epsilon; 0 means 1e-12
	Seed       uint64
	// Vocab holds the tokenizer.ggml.* entries: model "bert" (WordPiece),
	// or "t5" (SentencePiece unigram) as in XLM-RoBERTa encoders such as
	// bge-m3 and bge-reranker-v2-m3.
	Vocab Vocab
	// Fill, when set, gives the values of the tensors it names (row by row,
	// as gguf.Tensor.Fill) instead of the generated ones: a model built from
	// data (model/wordvec) sets its embeddings and layers this way.
	Fill map[string]func(row int, dst []float32)
}

func (c BERT) tokenTypes() int {
	switch {
	case c.TokenTypes > 0:
		return c.TokenTypes
	case c.Pooling == PoolingRank:
		return 1
	}
	return 2
}

func (c BERT) check() error {
	switch {
	case c.Layers < 1 || c.Width < 1 || c.Heads < 1 || c.FFN < 1 || c.Context < 1:
		return fmt.Errorf("%w: bert: layers, width, heads, FFN and context must be positive: %+v", ErrConfig, c.dims())
	case c.Width%c.Heads != 0:
		return fmt.Errorf("%w: bert: width %d is not a multiple of %d heads", ErrConfig, c.Width, c.Heads)
	case c.Vocab.Size() == 0:
		return fmt.Errorf("%w: bert: empty vocabulary", ErrConfig)
	case c.Vocab.Model() != "bert" && c.Vocab.Model() != "t5":
		return fmt.Errorf("%w: bert: vocabulary model %q; want bert (WordPiece) or t5 (XLM-R's unigram)", ErrConfig, c.Vocab.Model())
	case c.Pooling > PoolingRank:
		return fmt.Errorf("%w: bert: unknown pooling %v", ErrConfig, c.Pooling)
	}
	_, err := fileType(c.WeightType)
	return err
}

func (c BERT) dims() []int { return []int{c.Layers, c.Width, c.Heads, c.FFN, c.Context} }

// Writer returns a gguf.Writer holding the model; its tensor values are
// generated while it is written.
func (c BERT) Writer() (*gguf.Writer, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	ft, _ := fileType(c.WeightType)
	eps := c.Eps
	if eps == 0 {
		eps = 1e-12
	}
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "bert"},
		{"general.name", c.Name},
		{"bert.context_length", uint32(c.Context)},
		{"bert.embedding_length", uint32(c.Width)},
		{"bert.feed_forward_length", uint32(c.FFN)},
		{"bert.block_count", uint32(c.Layers)},
		{"bert.attention.head_count", uint32(c.Heads)},
		{"bert.attention.layer_norm_epsilon", eps},
		{"bert.attention.causal", false},
		{"bert.pooling_type", uint32(c.Pooling)},
		{"general.file_type", ft},
		{"tokenizer.ggml.token_type_count", uint32(c.tokenTypes())},
	} {
		if err := w.Set(kv.k, kv.v); err != nil {
			return nil, fmt.Errorf("modelgen: %w", err)
		}
	}
	if len(c.Labels) > 0 {
		if err := w.Set("bert.classifier.output_labels", c.Labels); err != nil {
			return nil, fmt.Errorf("modelgen: %w", err)
		}
	}
	if err := c.Vocab.set(w, "token_type_count"); err != nil {
		return nil, err
	}
	specs := c.tensors()
	for name := range c.Fill {
		if !hasSpec(specs, name) {
			return nil, fmt.Errorf("%w: bert: Fill names %q, which the model does not have", ErrConfig, name)
		}
	}
	return w, addTensorsWith(w, c.Seed, specs, c.Fill)
}

// tensors lists the model's tensors in the reference models' order.
func (c BERT) tensors() []spec {
	W, F, V := uint64(c.Width), uint64(c.FFN), uint64(c.Vocab.Size())
	f32, wt := gguf.GGMLTypeF32, c.WeightType
	s := []spec{
		{"token_embd_norm.bias", f32, []uint64{W}, initZeros},
		{"token_embd_norm.weight", f32, []uint64{W}, initOnes},
		{"position_embd.weight", f32, []uint64{W, uint64(c.Context)}, initNormal},
		{"token_types.weight", f32, []uint64{W, uint64(c.tokenTypes())}, initNormal},
		{"token_embd.weight", wt, []uint64{W, V}, initNormal},
	}
	for i := 0; i < c.Layers; i++ {
		b := fmt.Sprintf("blk.%d.", i)
		s = append(s,
			spec{b + "attn_output_norm.bias", f32, []uint64{W}, initZeros},
			spec{b + "attn_output_norm.weight", f32, []uint64{W}, initOnes},
			spec{b + "attn_output.bias", f32, []uint64{W}, initZeros},
			spec{b + "attn_output.weight", wt, []uint64{W, W}, initNormal},
			spec{b + "attn_k.bias", f32, []uint64{W}, initZeros},
			spec{b + "attn_k.weight", wt, []uint64{W, W}, initNormal},
			spec{b + "attn_q.bias", f32, []uint64{W}, initZeros},
			spec{b + "attn_q.weight", wt, []uint64{W, W}, initNormal},
			spec{b + "attn_v.bias", f32, []uint64{W}, initZeros},
			spec{b + "attn_v.weight", wt, []uint64{W, W}, initNormal},
			spec{b + "ffn_up.bias", f32, []uint64{F}, initZeros},
			spec{b + "ffn_up.weight", wt, []uint64{W, F}, initNormal},
			spec{b + "layer_output_norm.bias", f32, []uint64{W}, initZeros},
			spec{b + "layer_output_norm.weight", f32, []uint64{W}, initOnes},
			spec{b + "ffn_down.bias", f32, []uint64{W}, initZeros},
			spec{b + "ffn_down.weight", wt, []uint64{F, W}, initNormal},
		)
	}
	if c.Pooling == PoolingRank {
		n := uint64(max(1, len(c.Labels)))
		s = append(s,
			spec{"cls.bias", f32, []uint64{W}, initZeros},
			spec{"cls.weight", wt, []uint64{W, W}, initNormal},
			spec{"cls.output.bias", f32, []uint64{n}, initZeros},
			spec{"cls.output.weight", wt, []uint64{W, n}, initNormal},
		)
	}
	return s
}

// Write writes the model to path.
func (c BERT) Write(path string) error {
	w, err := c.Writer()
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}

// WriteTo writes the model to out.
func (c BERT) WriteTo(out io.Writer) (int64, error) {
	w, err := c.Writer()
	if err != nil {
		return 0, err
	}
	return w.WriteTo(out)
}
