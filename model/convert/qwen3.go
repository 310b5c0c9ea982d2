package convert

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/hfmodel"
)

// Qwen3 decoders (Qwen3-Embedding) are converted to GGUF, not ONNX:
// llama.cpp has the architecture (grouped-query attention with per-head
// query and key RMSNorm, NeoX rotary positions, SwiGLU) and pools the last
// token itself, its weights stay in one file past ONNX's 2 GiB protobuf
// limit (0.6B parameters are 2.4 GB of float32), and the module tokenizes
// with the GGUF's byte-level BPE as llama.cpp does.

// qwen3Probe is the tensor that finds a Qwen3 checkpoint's prefix.
const qwen3Probe = "embed_tokens.weight"

// qwen3Config is what config.json says of a Qwen3 decoder.
type qwen3Config struct {
	KVHeads          int             `json:"num_key_value_heads"`
	HeadDim          int             `json:"head_dim"`
	RMSNormEps       float64         `json:"rms_norm_eps"`
	RopeTheta        float64         `json:"rope_theta"`
	RopeScaling      json.RawMessage `json:"rope_scaling"`
	RopeParameters   *ropeParameters `json:"rope_parameters"` // transformers 5's spelling of rope_theta and rope_scaling
	AttentionBias    bool            `json:"attention_bias"`
	UseSlidingWindow bool            `json:"use_sliding_window"`
}

type ropeParameters struct {
	RopeTheta float64 `json:"rope_theta"`
	RopeType  string  `json:"rope_type"`
}

// openDecoder reads and checks a decoder's settings (config.json's bytes
// b): what the GGUF file and llama.cpp implement, or a refusal naming the
// setting.
func (s *Source) openDecoder(cfgPath string, b []byte) error {
	var q qwen3Config
	if err := readlimit.UnmarshalJSON(b, &q); err != nil {
		return fmt.Errorf("convert: %s: %w: %v", cfgPath, ErrRefused, err)
	}
	c := s.Config
	if q.KVHeads == 0 {
		q.KVHeads = c.Heads
	}
	if q.HeadDim == 0 && c.Heads > 0 {
		q.HeadDim = c.HiddenSize / c.Heads
	}
	if p := q.RopeParameters; p != nil && q.RopeTheta == 0 {
		q.RopeTheta = p.RopeTheta
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("convert: %s: %w: %s", cfgPath, ErrRefused, fmt.Sprintf(format, args...))
	}
	switch {
	case c.HiddenSize <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.Intermediate <= 0 || q.KVHeads <= 0 || q.HeadDim <= 0:
		return bad("hidden_size %d, num_hidden_layers %d, num_attention_heads %d, num_key_value_heads %d, head_dim %d, intermediate_size %d: want all positive",
			c.HiddenSize, c.Layers, c.Heads, q.KVHeads, q.HeadDim, c.Intermediate)
	case c.Heads%q.KVHeads != 0 || q.HeadDim%2 != 0:
		return bad("num_attention_heads %d, num_key_value_heads %d, head_dim %d: want heads a multiple of KV heads and an even head_dim", c.Heads, q.KVHeads, q.HeadDim)
	case c.HiddenAct != "silu":
		return bad("hidden_act %q; a Qwen3 decoder's is \"silu\"", c.HiddenAct)
	case q.AttentionBias:
		return bad("attention_bias true; synapse converts Qwen3 without attention biases")
	case q.UseSlidingWindow:
		return bad("use_sliding_window true; synapse converts full attention only")
	case len(q.RopeScaling) > 0 && string(q.RopeScaling) != "null" || q.RopeParameters != nil && q.RopeParameters.RopeType != "" && q.RopeParameters.RopeType != "default":
		return bad("a rope scaling (%s); synapse converts plain rotary positions", cmpOr(string(q.RopeScaling), q.RopeParameters))
	case q.RopeTheta <= 0 || q.RMSNormEps <= 0:
		return bad("rope_theta %v, rms_norm_eps %v: want both positive", q.RopeTheta, q.RMSNormEps)
	case c.MaxPositionEmbeddings <= 0:
		return bad("max_position_embeddings %d: want positive", c.MaxPositionEmbeddings)
	}
	s.qwen3 = &q
	return nil
}

func cmpOr(s string, p *ropeParameters) string {
	if s != "" && s != "null" {
		return s
	}
	if p != nil {
		return "rope_type " + p.RopeType
	}
	return ""
}

// writeQwen3GGUF writes a Qwen3 decoder as a GGUF file (float32) with
// llama.cpp's tensor names, the chain's pooling (Qwen3-Embedding's last
// token) and its byte-level BPE vocabulary; the context is
// max_position_embeddings, or max_seq_length when the sentence-transformers
// files set a shorter one.
func (s *Source) writeQwen3GGUF(path string) error {
	chain, err := s.readChain()
	if err != nil {
		return err
	}
	pooling, err := decoderPooling(s.Dir, chain)
	if err != nil {
		return err
	}
	vocab, err := byteLevelVocab(filepath.Join(s.Dir, "tokenizer.json"), s.Config.VocabSize)
	if err != nil {
		return err
	}
	return s.writeGGUFWith(path, vocab, s.qwen3Tensors, func(fill map[string]func(int, []float32)) (ggufModel, error) {
		c, q := s.Config, s.qwen3
		return modelgen.Qwen3{Name: filepath.Base(s.Dir), Layers: c.Layers, Width: c.HiddenSize, Heads: c.Heads, HeadsKV: q.KVHeads,
			HeadDim: q.HeadDim, FFN: c.Intermediate, Context: s.ggufContext(chain), Pooling: pooling,
			RopeBase: float32(q.RopeTheta), Eps: float32(q.RMSNormEps), Vocab: vocab, Fill: fill}, nil
	})
}

// ggufContext is the context a GGUF conversion gets: max_position_embeddings,
// or the chain's shorter max_seq_length, so that synapse chunks where
// sentence-transformers truncates.
func (s *Source) ggufContext(chain hfmodel.Chain) int {
	n := s.Config.MaxPositionEmbeddings
	if chain.MaxSeqLength > 0 && chain.MaxSeqLength < n {
		n = chain.MaxSeqLength
	}
	return n
}

// decoderPooling is the GGUF pooling of a decoder's chain: its Pooling
// module's lasttoken, mean or cls (last without one, as a decoder embeds);
// a Dense module cannot be carried.
func decoderPooling(dir string, chain hfmodel.Chain) (modelgen.Pooling, error) {
	if p := chain.Pooling(); p == nil || len(p.Modes) == 1 && p.Modes[0] == "lasttoken" {
		if err := noDense(dir, chain, ""); err != nil {
			return 0, err
		}
		return modelgen.PoolingLast, nil
	}
	return ggufPooling(dir, chain)
}

// noDense refuses a chain with a Dense module, which a GGUF file cannot
// carry; hint ends the message (the way out, where there is one).
func noDense(dir string, chain hfmodel.Chain, hint string) error {
	for _, m := range chain.Modules {
		if m.Kind == hfmodel.ModDense {
			return fmt.Errorf("convert: %s: %w: a Dense module (%s) cannot be carried by a GGUF file%s", dir, ErrRefused, m.Dir, hint)
		}
	}
	return nil
}

// qwen3Tensors reads every weight, checked against config.json, by GGUF
// name as row fills (a torch Linear's [out, in] rows are GGUF's rows).
func (s *Source) qwen3Tensors(w *weights, vocab int) (map[string]func(int, []float32), error) {
	c, q := s.Config, s.qwen3
	h, f, d := int64(c.HiddenSize), int64(c.Intermediate), int64(q.HeadDim)
	qd, kvd := int64(c.Heads)*d, int64(q.KVHeads)*d
	type pair struct {
		gguf, hf string
		cols     int64
		shape    []int64
	}
	rows := int64(c.VocabSize)
	if rows <= 0 {
		rows = int64(vocab)
	}
	list := []pair{{"token_embd.weight", "embed_tokens.weight", h, []int64{rows, h}}}
	for l := range c.Layers {
		b, p := fmt.Sprintf("blk.%d.", l), fmt.Sprintf("layers.%d.", l)
		list = append(list,
			pair{b + "attn_norm.weight", p + "input_layernorm.weight", h, []int64{h}},
			pair{b + "attn_q.weight", p + "self_attn.q_proj.weight", h, []int64{qd, h}},
			pair{b + "attn_k.weight", p + "self_attn.k_proj.weight", h, []int64{kvd, h}},
			pair{b + "attn_v.weight", p + "self_attn.v_proj.weight", h, []int64{kvd, h}},
			pair{b + "attn_output.weight", p + "self_attn.o_proj.weight", qd, []int64{h, qd}},
			pair{b + "attn_q_norm.weight", p + "self_attn.q_norm.weight", d, []int64{d}},
			pair{b + "attn_k_norm.weight", p + "self_attn.k_norm.weight", d, []int64{d}},
			pair{b + "ffn_norm.weight", p + "post_attention_layernorm.weight", h, []int64{h}},
			pair{b + "ffn_gate.weight", p + "mlp.gate_proj.weight", h, []int64{f, h}},
			pair{b + "ffn_up.weight", p + "mlp.up_proj.weight", h, []int64{f, h}},
			pair{b + "ffn_down.weight", p + "mlp.down_proj.weight", f, []int64{h, f}},
		)
	}
	list = append(list, pair{"output_norm.weight", "norm.weight", h, []int64{h}})
	fill := map[string]func(int, []float32){}
	for _, x := range list {
		v, err := w.tensor(x.hf, x.shape...)
		if err != nil {
			return nil, err
		}
		cols := x.cols
		if x.gguf == "token_embd.weight" && int64(vocab) > rows {
			return nil, fmt.Errorf("convert: %s: %w: the tokenizer has %d tokens, the embeddings %d rows", s.Dir, ErrRefused, vocab, rows)
		}
		fill[x.gguf] = func(row int, dst []float32) { copy(dst, v[int64(row)*cols:int64(row+1)*cols]) }
	}
	return fill, nil
}
