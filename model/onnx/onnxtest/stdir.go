package onnxtest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/synapse-embed/synapse/model/safetensors"
)

// ST describes the sentence-transformers files WriteST adds to a model
// directory: modules.json naming the Transformer, a Pooling module, the
// Dense modules and Normalize, in that order, with their configs;
// sentence_bert_config.json; config_sentence_transformers.json.
type ST struct {
	Pooling       map[string]any // 1_Pooling/config.json (nil: no Pooling module)
	Dense         []Dense
	Normalize     bool
	Extra         []string // further module types to list after them (e.g. an unknown one)
	MaxSeqLength  int      // 0: no sentence_bert_config.json
	Prompts       map[string]string
	DefaultPrompt string
}

// Dense is one Dense module; its weights are random (seeded) unless given.
type Dense struct {
	In, Out    int
	NoBias     bool
	Activation string // torch class name, "" : torch.nn.modules.activation.Tanh
	Seed       uint64
	W, B       []float32 // written to model.safetensors; filled by WriteST when nil
}

// WriteST writes the sentence-transformers files into dir and returns the
// Dense modules with their weights.
func WriteST(dir string, st ST) ([]Dense, error) {
	mods := []map[string]any{{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}}
	add := func(typ, path string) string {
		i := len(mods)
		if path != "" {
			path = fmt.Sprintf("%d_%s", i, path)
		}
		mods = append(mods, map[string]any{"idx": i, "name": fmt.Sprint(i), "path": path, "type": typ})
		return filepath.Join(dir, path)
	}
	if st.Pooling != nil {
		if err := writeJSON(filepath.Join(add("sentence_transformers.models.Pooling", "Pooling"), "config.json"), st.Pooling); err != nil {
			return nil, err
		}
	}
	dense := make([]Dense, len(st.Dense))
	for i, d := range st.Dense {
		var err error
		if dense[i], err = writeDense(add("sentence_transformers.models.Dense", "Dense"), d); err != nil {
			return nil, err
		}
	}
	if st.Normalize {
		if err := os.MkdirAll(add("sentence_transformers.models.Normalize", "Normalize"), 0o755); err != nil {
			return nil, err
		}
	}
	for _, typ := range st.Extra {
		add(typ, "Extra")
	}
	if err := writeJSON(filepath.Join(dir, "modules.json"), mods); err != nil {
		return nil, err
	}
	if st.MaxSeqLength > 0 {
		if err := writeJSON(filepath.Join(dir, "sentence_bert_config.json"), map[string]any{"max_seq_length": st.MaxSeqLength, "do_lower_case": false}); err != nil {
			return nil, err
		}
	}
	if st.Prompts != nil {
		cfg := map[string]any{"prompts": st.Prompts, "default_prompt_name": nil, "similarity_fn_name": "cosine"}
		if st.DefaultPrompt != "" {
			cfg["default_prompt_name"] = st.DefaultPrompt
		}
		if err := writeJSON(filepath.Join(dir, "config_sentence_transformers.json"), cfg); err != nil {
			return nil, err
		}
	}
	return dense, nil
}

// writeDense writes a Dense module's config.json and model.safetensors.
func writeDense(dir string, d Dense) (Dense, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return d, err
	}
	if d.Activation == "" {
		d.Activation = "torch.nn.modules.activation.Tanh"
	}
	r := rand.New(rand.NewPCG(d.Seed, 0xde75e))
	if d.W == nil {
		d.W = make([]float32, d.Out*d.In)
		for i := range d.W {
			d.W[i] = float32(r.NormFloat64() / 2)
		}
	}
	if d.B == nil && !d.NoBias {
		d.B = make([]float32, d.Out)
		for i := range d.B {
			d.B[i] = float32(r.NormFloat64() / 4)
		}
	}
	cfg := map[string]any{"in_features": d.In, "out_features": d.Out, "bias": !d.NoBias, "activation_function": d.Activation}
	if err := writeJSON(filepath.Join(dir, "config.json"), cfg); err != nil {
		return d, err
	}
	tensors := map[string][]float32{"linear.weight": d.W}
	shapes := map[string][]int64{"linear.weight": {int64(d.Out), int64(d.In)}}
	if !d.NoBias {
		tensors["linear.bias"], shapes["linear.bias"] = d.B, []int64{int64(d.Out)}
	}
	return d, safetensors.Write(filepath.Join(dir, "model.safetensors"), tensors, shapes)
}

func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// PoolingConfig is a 1_Pooling/config.json turning on the modes named
// (sentence-transformers' names: cls, max, mean, mean_sqrt_len_tokens,
// weightedmean, lasttoken) and no others.
func PoolingConfig(hidden int, includePrompt bool, modes ...string) map[string]any {
	keys := map[string]string{"cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens", "mean": "pooling_mode_mean_tokens",
		"mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens", "weightedmean": "pooling_mode_weightedmean_tokens", "lasttoken": "pooling_mode_lasttoken"}
	cfg := map[string]any{"word_embedding_dimension": hidden, "include_prompt": includePrompt}
	for _, k := range keys {
		cfg[k] = false
	}
	for _, m := range modes {
		cfg[keys[m]] = true
	}
	return cfg
}

// STReference computes, in plain float64 and independently of synapse's
// engine, the vector sentence-transformers' modules give for one unpadded
// sequence's hidden states h (tokens × width): the Pooling modes (cls, max,
// mean, mean_sqrt_len_tokens, weightedmean, lasttoken, concatenated in
// that order), each Dense layer (act(W·x + b)) and Normalize.
func STReference(h [][]float64, modes []string, dense []Dense, normalize bool) []float64 {
	return STReferenceFrom(h, 0, modes, dense, normalize)
}

// STReferenceFrom is STReference with the attention mask zeroed on the
// first from tokens, as Pooling.forward zeroes it over the prompt when
// include_prompt is false (cls still takes token 0).
func STReferenceFrom(h [][]float64, from int, modes []string, dense []Dense, normalize bool) []float64 {
	n, w := len(h), len(h[0])
	mask := func(j int) float64 {
		if j < from {
			return 0
		}
		return 1
	}
	var v []float64
	for _, mode := range []string{"cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"} {
		if !contains(modes, mode) {
			continue
		}
		out := make([]float64, w)
		for d := range out {
			var sum, weights float64
			switch mode {
			case "cls":
				out[d] = h[0][d]
			case "lasttoken":
				out[d] = h[n-1][d] * mask(n-1)
			case "max":
				out[d] = -1e9
				for j := range n {
					x := h[j][d]
					if mask(j) == 0 {
						x = -1e9
					}
					out[d] = math.Max(out[d], x)
				}
			case "mean", "mean_sqrt_len_tokens", "weightedmean":
				for j := range n {
					wt := mask(j)
					if mode == "weightedmean" {
						wt *= float64(j + 1)
					}
					sum += wt * h[j][d]
					weights += wt
				}
				weights = math.Max(weights, 1e-9)
				if mode == "mean_sqrt_len_tokens" {
					weights = math.Sqrt(weights)
				}
				out[d] = sum / weights
			}
		}
		v = append(v, out...)
	}
	for _, l := range dense {
		y := make([]float64, l.Out)
		for o := range y {
			for i := range l.In {
				y[o] += float64(l.W[o*l.In+i]) * v[i]
			}
			if l.B != nil {
				y[o] += float64(l.B[o])
			}
			y[o] = torchActivation(l.Activation, y[o])
		}
		v = y
	}
	if normalize {
		var s float64
		for _, x := range v {
			s += x * x
		}
		for i := range v {
			v[i] /= math.Max(math.Sqrt(s), 1e-12)
		}
	}
	return v
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// torchActivation computes the torch.nn activation class named.
func torchActivation(class string, x float64) float64 {
	switch class[strings.LastIndexByte(class, '.')+1:] {
	case "Tanh":
		return math.Tanh(x)
	case "ReLU":
		if x < 0 {
			return 0
		}
		return x
	case "Sigmoid":
		return 1 / (1 + math.Exp(-x))
	case "GELU":
		return x * (1 + math.Erf(x/math.Sqrt2)) / 2
	case "SiLU":
		return x / (1 + math.Exp(-x))
	case "Identity":
		return x
	}
	panic("onnxtest: activation " + class)
}
