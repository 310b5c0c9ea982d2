package convert

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/hfmodel"
)

// EmbeddingGemma (Gemma3TextModel with bidirectional attention, as
// google/embeddinggemma-300m) converts to GGUF for llama.cpp's
// "gemma-embedding" architecture, which implements it whole: Gemma 3's
// layers with a symmetric sliding window, the pooling, and the two Dense
// projections of its sentence-transformers chain. Like Qwen3, the weights
// stay in one file and the module tokenizes with the GGUF's SentencePiece
// vocabulary as llama.cpp does. What llama.cpp fixes rather than reads —
// five sliding layers then one full one, the sliding layers' rotary base
// 10,000, the attention scale 1/sqrt(head_dim) — is checked and any other
// value refused.

// gemmaDecoder is the arch.decoder of EmbeddingGemma, llama.cpp's
// general.architecture for it.
const gemmaDecoder = "gemma-embedding"

// gemmaConfig is what config.json says of a Gemma 3 text model, in
// transformers 4's spelling (rope_theta, rope_local_base_freq) or 5's
// (rope_parameters by layer type).
type gemmaConfig struct {
	KVHeads        int                       `json:"num_key_value_heads"`
	HeadDim        int                       `json:"head_dim"`
	Activation     string                    `json:"hidden_activation"`
	RMSNormEps     float64                   `json:"rms_norm_eps"`
	QueryScalar    float64                   `json:"query_pre_attn_scalar"`
	Window         int                       `json:"sliding_window"`
	Pattern        *int                      `json:"sliding_window_pattern"`
	LayerTypes     []string                  `json:"layer_types"`
	Bidirectional  bool                      `json:"use_bidirectional_attention"`
	AttentionBias  bool                      `json:"attention_bias"`
	AttnSoftcap    *float64                  `json:"attn_logit_softcapping"`
	FinalSoftcap   *float64                  `json:"final_logit_softcapping"`
	RopeTheta      float64                   `json:"rope_theta"`
	RopeLocal      float64                   `json:"rope_local_base_freq"`
	RopeScaling    json.RawMessage           `json:"rope_scaling"`
	RopeParameters map[string]ropeParameters `json:"rope_parameters"`
}

// openGemma reads and checks a Gemma 3 text model's settings (config.json's
// bytes b): what llama.cpp's gemma-embedding computes, or a refusal naming
// the setting.
func (s *Source) openGemma(cfgPath string, b []byte) error {
	var g gemmaConfig
	if err := readlimit.UnmarshalJSON(b, &g); err != nil {
		return fmt.Errorf("convert: %s: %w: %v", cfgPath, ErrRefused, err)
	}
	c := s.Config
	if p, ok := g.RopeParameters["full_attention"]; ok && g.RopeTheta == 0 {
		g.RopeTheta = p.RopeTheta
	}
	if p, ok := g.RopeParameters["sliding_attention"]; ok && g.RopeLocal == 0 {
		g.RopeLocal = p.RopeTheta
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("convert: %s: %w: %s", cfgPath, ErrRefused, fmt.Sprintf(format, args...))
	}
	switch {
	case c.HiddenSize <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.Intermediate <= 0 || g.KVHeads <= 0 || g.HeadDim <= 0:
		return bad("hidden_size %d, num_hidden_layers %d, num_attention_heads %d, num_key_value_heads %d, head_dim %d, intermediate_size %d: want all positive",
			c.HiddenSize, c.Layers, c.Heads, g.KVHeads, g.HeadDim, c.Intermediate)
	case c.Heads%g.KVHeads != 0 || g.HeadDim%2 != 0:
		return bad("num_attention_heads %d, num_key_value_heads %d, head_dim %d: want heads a multiple of KV heads and an even head_dim", c.Heads, g.KVHeads, g.HeadDim)
	case !g.Bidirectional:
		return bad("use_bidirectional_attention false: a causal Gemma 3 is a generator; synapse converts EmbeddingGemma (bidirectional attention) for llama.cpp's gemma-embedding")
	case g.Activation != "gelu_pytorch_tanh":
		return bad("hidden_activation %q; Gemma 3's is \"gelu_pytorch_tanh\"", g.Activation)
	case g.QueryScalar != float64(g.HeadDim):
		return bad("query_pre_attn_scalar %v is not head_dim %d: llama.cpp's gemma-embedding scales attention by 1/sqrt(head_dim)", g.QueryScalar, g.HeadDim)
	case g.AttentionBias || g.AttnSoftcap != nil || g.FinalSoftcap != nil:
		return bad("attention_bias %v, attn_logit_softcapping %v, final_logit_softcapping %v: synapse converts Gemma 3 without biases or soft-capping",
			g.AttentionBias, fmtPtr(g.AttnSoftcap), fmtPtr(g.FinalSoftcap))
	case g.Window <= 0 || g.RMSNormEps <= 0 || g.RopeTheta <= 0:
		return bad("sliding_window %d, rms_norm_eps %v, rope_theta %v: want all positive", g.Window, g.RMSNormEps, g.RopeTheta)
	case g.RopeLocal != modelgen.GemmaSlidingRopeBase:
		return bad("the sliding layers' rotary base (rope_local_base_freq) is %v; llama.cpp's gemma-embedding uses %d", g.RopeLocal, modelgen.GemmaSlidingRopeBase)
	case c.MaxPositionEmbeddings <= 0:
		return bad("max_position_embeddings %d: want positive", c.MaxPositionEmbeddings)
	}
	if err := g.checkRope(); err != nil {
		return bad("%v", err)
	}
	if err := g.checkLayers(c.Layers); err != nil {
		return bad("%v", err)
	}
	s.gemma = &g
	return nil
}

func fmtPtr(p *float64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// checkRope refuses rotary scaling: llama.cpp's gemma-embedding reads none.
func (g gemmaConfig) checkRope() error {
	if len(g.RopeScaling) > 0 && string(g.RopeScaling) != "null" {
		return fmt.Errorf("a rope scaling (%s); synapse converts plain rotary positions", g.RopeScaling)
	}
	for kind, p := range g.RopeParameters {
		if p.RopeType != "" && p.RopeType != "default" {
			return fmt.Errorf("rope_parameters.%s.rope_type %q; synapse converts plain rotary positions", kind, p.RopeType)
		}
	}
	return nil
}

// checkLayers refuses a layer pattern other than llama.cpp's: of every
// six layers, five sliding then one full.
func (g gemmaConfig) checkLayers(n int) error {
	if g.Pattern != nil && *g.Pattern != modelgen.GemmaSlidingPattern {
		return fmt.Errorf("sliding_window_pattern %d; llama.cpp's gemma-embedding has %d", *g.Pattern, modelgen.GemmaSlidingPattern)
	}
	if g.LayerTypes == nil {
		return nil // transformers' default: the same pattern
	}
	if len(g.LayerTypes) != n {
		return fmt.Errorf("layer_types names %d layers; num_hidden_layers is %d", len(g.LayerTypes), n)
	}
	for i, t := range g.LayerTypes {
		want := "sliding_attention"
		if i%modelgen.GemmaSlidingPattern == modelgen.GemmaSlidingPattern-1 {
			want = "full_attention"
		}
		if t != want {
			return fmt.Errorf("layer_types[%d] is %q; llama.cpp's gemma-embedding makes it %q (five sliding layers, then one full)", i, t, want)
		}
	}
	return nil
}

// writeGemmaGGUF writes an EmbeddingGemma as a GGUF file (float32) for
// llama.cpp's gemma-embedding: its weights (RMSNorm weights plus one), the
// chain's pooling and Dense projections, and its SentencePiece vocabulary.
func (s *Source) writeGemmaGGUF(path string) error {
	chain, err := s.readChain()
	if err != nil {
		return err
	}
	pooling, dense, err := gemmaChain(s.Dir, chain, s.Config.HiddenSize)
	if err != nil {
		return err
	}
	vocab, err := spmVocab(filepath.Join(s.Dir, "tokenizer.json"), s.Config.VocabSize)
	if err != nil {
		return err
	}
	return s.writeGGUFWith(path, vocab, s.gemmaTensors, func(fill map[string]func(int, []float32)) (ggufModel, error) {
		width := 0
		if len(dense) == 2 {
			width = dense[0].Out
			if err := denseFills(fill, dense); err != nil {
				return nil, err
			}
		}
		c, g := s.Config, s.gemma
		return modelgen.GemmaEmbedding{Name: filepath.Base(s.Dir), Layers: c.Layers, Width: c.HiddenSize, Heads: c.Heads, HeadsKV: g.KVHeads,
			HeadDim: g.HeadDim, FFN: c.Intermediate, Context: s.ggufContext(chain), Window: g.Window, Pooling: pooling, DenseWidth: width,
			RopeBase: float32(g.RopeTheta), Eps: float32(g.RMSNormEps), Vocab: vocab, Fill: fill}, nil
	})
}

// gemmaChain checks the sentence-transformers chain llama.cpp can carry:
// a Pooling module (mean, cls or lasttoken, the prompt included) and none
// or two Dense modules, hidden → n → hidden without biases or activations
// (EmbeddingGemma's 768 → 3072 → 768), which become dense_2 and dense_3.
func gemmaChain(dir string, chain hfmodel.Chain, hidden int) (modelgen.Pooling, []hfmodel.Module, error) {
	refuse := func(format string, args ...any) (modelgen.Pooling, []hfmodel.Module, error) {
		return 0, nil, fmt.Errorf("convert: %s: %w: %s", dir, ErrRefused, fmt.Sprintf(format, args...))
	}
	pooling := modelgen.PoolingMean
	if p := chain.Pooling(); p != nil {
		switch {
		case !p.IncludePrompt:
			return refuse("the Pooling module leaves the prompt out (include_prompt false); llama.cpp pools every token")
		case len(p.Modes) == 1 && p.Modes[0] == "mean":
		case len(p.Modes) == 1 && p.Modes[0] == "cls":
			pooling = modelgen.PoolingCLS
		case len(p.Modes) == 1 && p.Modes[0] == "lasttoken":
			pooling = modelgen.PoolingLast
		default:
			return refuse("pooling %v; llama.cpp pools by mean, cls or last token", p.Modes)
		}
	}
	var dense []hfmodel.Module
	for _, m := range chain.Modules {
		if m.Kind == hfmodel.ModDense {
			dense = append(dense, m)
		}
	}
	if len(dense) == 0 {
		return pooling, nil, nil
	}
	ok := len(dense) == 2 && dense[0].In == hidden && dense[1].Out == hidden && dense[0].Out == dense[1].In
	for _, m := range dense {
		ok = ok && !m.Bias && m.Activation == "identity"
	}
	if !ok {
		var got []string
		for _, m := range dense {
			got = append(got, fmt.Sprintf("%s %d→%d bias %v %s", filepath.Base(m.Dir), m.In, m.Out, m.Bias, m.Activation))
		}
		return refuse("Dense modules %s: llama.cpp's gemma-embedding carries two, %d → n → %d, without biases or activations (EmbeddingGemma's)",
			strings.Join(got, ", "), hidden, hidden)
	}
	return pooling, dense, nil
}

// denseFills adds the two Dense modules' weights as dense_2 and dense_3:
// a Dense weight [out, in] is GGUF's [in, out] in ne order, the same rows.
func denseFills(fill map[string]func(int, []float32), dense []hfmodel.Module) error {
	for i, name := range []string{"dense_2.weight", "dense_3.weight"} {
		v, _, err := hfmodel.DenseWeights(dense[i])
		if err != nil {
			return fmt.Errorf("convert: %w: %w", ErrRefused, err)
		}
		cols := dense[i].In
		fill[name] = func(row int, dst []float32) { copy(dst, v[row*cols:(row+1)*cols]) }
	}
	return nil
}

// gemmaTensors reads every weight, checked against config.json, by GGUF
// name as row fills; the RMSNorm weights get Gemma's 1 added, as llama.cpp
// multiplies by the weight alone.
func (s *Source) gemmaTensors(w *weights, vocab int) (map[string]func(int, []float32), error) {
	c, g := s.Config, s.gemma
	h, f, d := int64(c.HiddenSize), int64(c.Intermediate), int64(g.HeadDim)
	qd, kvd := int64(c.Heads)*d, int64(g.KVHeads)*d
	type pair struct {
		gguf, hf string
		shape    []int64
		norm     bool
	}
	rows := int64(c.VocabSize)
	if rows <= 0 {
		rows = int64(vocab)
	}
	if int64(vocab) > rows {
		return nil, fmt.Errorf("convert: %s: %w: the tokenizer has %d tokens, the embeddings %d rows", s.Dir, ErrRefused, vocab, rows)
	}
	list := []pair{{"token_embd.weight", "embed_tokens.weight", []int64{rows, h}, false}}
	for l := range c.Layers {
		b, p := fmt.Sprintf("blk.%d.", l), fmt.Sprintf("layers.%d.", l)
		list = append(list,
			pair{b + "attn_norm.weight", p + "input_layernorm.weight", []int64{h}, true},
			pair{b + "attn_q.weight", p + "self_attn.q_proj.weight", []int64{qd, h}, false},
			pair{b + "attn_k.weight", p + "self_attn.k_proj.weight", []int64{kvd, h}, false},
			pair{b + "attn_v.weight", p + "self_attn.v_proj.weight", []int64{kvd, h}, false},
			pair{b + "attn_output.weight", p + "self_attn.o_proj.weight", []int64{h, qd}, false},
			pair{b + "attn_q_norm.weight", p + "self_attn.q_norm.weight", []int64{d}, true},
			pair{b + "attn_k_norm.weight", p + "self_attn.k_norm.weight", []int64{d}, true},
			pair{b + "post_attention_norm.weight", p + "post_attention_layernorm.weight", []int64{h}, true},
			pair{b + "ffn_norm.weight", p + "pre_feedforward_layernorm.weight", []int64{h}, true},
			pair{b + "ffn_gate.weight", p + "mlp.gate_proj.weight", []int64{f, h}, false},
			pair{b + "ffn_up.weight", p + "mlp.up_proj.weight", []int64{f, h}, false},
			pair{b + "ffn_down.weight", p + "mlp.down_proj.weight", []int64{h, f}, false},
			pair{b + "post_ffw_norm.weight", p + "post_feedforward_layernorm.weight", []int64{h}, true},
		)
	}
	list = append(list, pair{"output_norm.weight", "norm.weight", []int64{h}, true})
	fill := map[string]func(int, []float32){}
	for _, x := range list {
		v, err := w.tensor(x.hf, x.shape...)
		if err != nil {
			return nil, err
		}
		cols := x.shape[len(x.shape)-1]
		if x.norm { // a copy: v may be the file's own bytes
			v = append([]float32(nil), v...)
			for i := range v {
				v[i]++
			}
		}
		fill[x.gguf] = func(row int, dst []float32) { copy(dst, v[int64(row)*cols:int64(row+1)*cols]) }
	}
	return fill, nil
}
