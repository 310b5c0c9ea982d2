// Package convert turns a Hugging Face transformers directory whose weights
// are safetensors (config.json, model.safetensors or its shards,
// tokenizer.json, and the sentence-transformers files beside them) into an
// ONNX model directory synapse runs as it runs any other. The module runs it
// (package artifact on first use of `-m DIR`, package ingest for `synapse
// models add DIR`), before any worker starts.
//
// Architectures converted (config.json "architectures"):
//
//	BertModel, BertForPreTraining                        the encoder (prefix "bert." stripped)
//	BertForMaskedLM                                      the encoder and, when present, the MLM head: a logits output
//	BertForSequenceClassification                        the encoder, pooler and classifier: a logits output
//	RobertaModel, XLMRobertaModel (and …ForMaskedLM)      the encoder, positions past padding_idx
//	DistilBertModel                                      BERT's encoder under other names, no token types (distilbert.go)
//	MPNetModel                                           RoBERTa's positions, a relative position bias (mpnet.go)
//	ModernBertModel                                      rotary, local/global attention, GeGLU: a graph of its own (modernbert.go)
//	ModernBertForSequenceClassification                  that encoder, mean or first-token pooling, ModernBERT's head: a logits output
//	DebertaV2ForSequenceClassification                   DeBERTa-v3 cross-encoders: disentangled attention, a graph of its own (deberta.go)
//	Qwen3Model, Qwen3ForCausalLM                         a decoder embedder, to GGUF for llama.cpp (qwen3.go)
//	Gemma3TextModel                                      EmbeddingGemma, to GGUF for llama.cpp's gemma-embedding (gemma.go)
//
// The graph computes what transformers' BertModel computes in float32:
// embeddings (word + token type + absolute position) and LayerNorm, then
// per layer multi-head self-attention with the attention mask as an
// additive bias, residual and LayerNorm, the feed-forward layer with exact
// (erf) GELU, residual and LayerNorm; its output is last_hidden_state. A
// masked LM's head (cls.predictions: dense, GELU, LayerNorm, the decoder,
// tied to the word embeddings when the checkpoint holds no decoder weight,
// and its bias) adds logits [batch, sequence, vocab], which SPLADE pools.
// F16 and BF16 weights are widened to float32. A BERT encoder converts to
// GGUF too (WriteGGUF), for llama.cpp.
//
// Anything else is refused with ErrRefused, naming the file and the tensor
// or setting at fault: an unknown architecture, a missing tensor or one of
// the wrong shape, a damaged safetensors file, pickled weights
// (pytorch_model.bin) without safetensors.
package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// Version is the converter's version: part of a converted model's cache
// key, so that a fixed converter converts again rather than reusing what an
// older one wrote.
const Version = 2 // 2: BertForMaskedLM's MLM head

// ErrRefused marks a directory the converter will not convert.
var ErrRefused = errors.New("cannot convert")

// Weight file names a transformers directory holds.
const (
	weightsFile = "model.safetensors"
	indexFile   = "model.safetensors.index.json"
	pickleFile  = "pytorch_model.bin"
)

// Formats Convert writes.
const (
	FormatONNX = "onnx"
	FormatGGUF = "gguf"
)

// IsSource reports whether dir is a directory to convert: config.json and
// weights (model.safetensors, its shards' index, or pytorch_model.bin,
// which Open refuses), and no ONNX graph (model.onnx, onnx/model.onnx),
// which synapse would run as it is.
func IsSource(dir string) bool {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() || !isFile(filepath.Join(dir, "config.json")) {
		return false
	}
	for _, g := range []string{"model.onnx", filepath.Join("onnx", "model.onnx")} {
		if isFile(filepath.Join(dir, g)) {
			return false
		}
	}
	for _, w := range []string{weightsFile, indexFile, pickleFile} {
		if isFile(filepath.Join(dir, w)) {
			return true
		}
	}
	return false
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Config is what the converter reads from config.json.
type Config struct {
	Architectures         []string `json:"architectures"`
	ModelType             string   `json:"model_type"`
	HiddenSize            int      `json:"hidden_size"`
	Layers                int      `json:"num_hidden_layers"`
	Heads                 int      `json:"num_attention_heads"`
	Intermediate          int      `json:"intermediate_size"`
	HiddenAct             string   `json:"hidden_act"`
	LayerNormEps          *float64 `json:"layer_norm_eps"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	TypeVocabSize         int      `json:"type_vocab_size"`
	VocabSize             int      `json:"vocab_size"`
	PadTokenID            *int     `json:"pad_token_id"`
	PositionEmbeddingType string   `json:"position_embedding_type"`
}

// arch is what the converter knows of an architecture: the weight prefixes
// its checkpoints use, whether positions start past the padding id, and
// whether it ends in a sequence classifier.
type arch struct {
	prefixes   []string
	offset     bool // RoBERTa's positions: padding_idx+1 onwards
	classifier bool
	mlm        bool // the MLM head cls.predictions.*, when the weights hold it
	// decoder names a decoder architecture converted to GGUF for
	// llama.cpp (qwen3.go), "" for the encoders converted to ONNX.
	decoder string
	probe   string // a tensor every checkpoint has, to find the prefix; "" : BERT's word embeddings
	distil  bool   // DistilBERT: BERT under other names (distilbert.go)
	mpnet   bool   // MPNet: BERT under other names with a relative position bias (mpnet.go)
	modern  bool   // ModernBERT: a graph of its own (modernbert.go)
	deberta bool   // DeBERTa-v2/v3: disentangled attention, a graph of its own (deberta.go)
}

var archs = map[string]arch{
	"BertModel":                           {prefixes: []string{"", "bert."}},
	"BertForMaskedLM":                     {prefixes: []string{"bert.", ""}, mlm: true},
	"BertForPreTraining":                  {prefixes: []string{"bert.", ""}},
	"BertForSequenceClassification":       {prefixes: []string{"bert."}, classifier: true},
	"RobertaModel":                        {prefixes: []string{"", "roberta."}, offset: true},
	"RobertaForMaskedLM":                  {prefixes: []string{"roberta.", ""}, offset: true},
	"XLMRobertaModel":                     {prefixes: []string{"", "roberta."}, offset: true},
	"XLMRobertaForMaskedLM":               {prefixes: []string{"roberta.", ""}, offset: true},
	"ModernBertModel":                     {prefixes: []string{"", "model."}, modern: true, probe: "embeddings.tok_embeddings.weight"},
	"ModernBertForSequenceClassification": {prefixes: []string{"model."}, modern: true, classifier: true, probe: "embeddings.tok_embeddings.weight"},
	"MPNetModel":                          {prefixes: []string{"", "mpnet."}, offset: true, mpnet: true},
	"DistilBertModel":                     {prefixes: []string{"", "distilbert."}, distil: true},
	"DebertaV2ForSequenceClassification":  {prefixes: []string{"deberta."}, classifier: true, deberta: true},
	"Qwen3Model":                          {prefixes: []string{"", "model."}, decoder: "qwen3", probe: qwen3Probe},
	"Qwen3ForCausalLM":                    {prefixes: []string{"model.", ""}, decoder: "qwen3", probe: qwen3Probe},
	"Gemma3TextModel":                     {prefixes: []string{"", "model."}, decoder: gemmaDecoder, probe: qwen3Probe},
}

// Architectures lists the architectures the converter converts, sorted.
func Architectures() []string {
	out := make([]string, 0, len(archs))
	for a := range archs {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Source is a directory opened for conversion.
type Source struct {
	Dir     string
	Config  Config
	Arch    string   // the architecture converted (config.json's first)
	Weights []string // the safetensors files, sorted
	arch    arch
	qwen3   *qwen3Config // a Qwen3 decoder's settings
	gemma   *gemmaConfig // an EmbeddingGemma's settings
	// mpnetBuckets is an MPNet's relative_attention_num_buckets.
	mpnetBuckets int
	modern       *modernLayers  // a ModernBERT's layers
	deberta      *debertaLayout // a DeBERTa's relative positions
}

// Open reads dir's config.json and finds its weights, refusing (ErrRefused)
// what the converter cannot convert before any weights are read.
func Open(dir string) (*Source, error) {
	cfgPath := filepath.Join(dir, "config.json")
	b, err := readlimit.ReadFile(cfgPath, readlimit.Config)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	s := &Source{Dir: dir}
	if err := readlimit.UnmarshalJSON(b, &s.Config); err != nil {
		return nil, fmt.Errorf("convert: %s: %w: %v", cfgPath, ErrRefused, err)
	}
	if err := s.pickArch(cfgPath); err != nil {
		return nil, err
	}
	if s.arch.distil {
		if err := s.readDistil(cfgPath, b); err != nil {
			return nil, err
		}
	}
	if s.arch.mpnet {
		if err := s.readMPNet(cfgPath, b); err != nil {
			return nil, err
		}
	}
	if s.arch.modern {
		if err := s.readModern(cfgPath, b); err != nil {
			return nil, err
		}
	}
	if s.arch.deberta {
		if err := s.readDeberta(cfgPath, b); err != nil {
			return nil, err
		}
	}
	if s.arch.decoder == gemmaDecoder {
		err = s.openGemma(cfgPath, b)
	} else if s.arch.decoder != "" {
		err = s.openDecoder(cfgPath, b)
	} else {
		err = s.checkConfig(cfgPath)
	}
	if err != nil {
		return nil, err
	}
	if s.Weights, err = weightFiles(dir); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Source) pickArch(cfgPath string) error {
	for _, a := range s.Config.Architectures {
		if k, ok := archs[a]; ok {
			s.Arch, s.arch = a, k
			return nil
		}
	}
	if len(s.Config.Architectures) == 0 {
		return fmt.Errorf("convert: %s: %w: no architectures (model_type %q); synapse converts %s",
			cfgPath, ErrRefused, s.Config.ModelType, strings.Join(Architectures(), ", "))
	}
	return fmt.Errorf("convert: %s: %w: architecture %s; synapse converts %s. Other models run from their ONNX export (a directory with model.onnx or onnx/model.onnx, e.g. `synapse models pull ID --onnx`) or a GGUF file",
		cfgPath, ErrRefused, strings.Join(s.Config.Architectures, ", "), strings.Join(Architectures(), ", "))
}

// checkConfig refuses settings the graph does not implement.
func (s *Source) checkConfig(cfgPath string) error {
	c := s.Config
	bad := func(format string, args ...any) error {
		return fmt.Errorf("convert: %s: %w: %s", cfgPath, ErrRefused, fmt.Sprintf(format, args...))
	}
	switch {
	case c.HiddenSize <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.Intermediate <= 0:
		return bad("hidden_size %d, num_hidden_layers %d, num_attention_heads %d, intermediate_size %d: want all positive",
			c.HiddenSize, c.Layers, c.Heads, c.Intermediate)
	case c.HiddenSize%c.Heads != 0:
		return bad("hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.Heads)
	case c.HiddenAct != "gelu":
		return bad("hidden_act %q; synapse converts \"gelu\" (exact, erf)", c.HiddenAct)
	case c.PositionEmbeddingType != "" && c.PositionEmbeddingType != "absolute":
		return bad("position_embedding_type %q; synapse converts \"absolute\"", c.PositionEmbeddingType)
	}
	return nil
}

// eps is layer_norm_eps, transformers' default 1e-12 when absent.
func (c Config) eps() float32 {
	if c.LayerNormEps == nil {
		return 1e-12
	}
	return float32(*c.LayerNormEps)
}

// padID is pad_token_id (RoBERTa's default 1 when absent).
func (c Config) padID() int {
	if c.PadTokenID == nil {
		return 1
	}
	return *c.PadTokenID
}

// weightFiles returns dir's safetensors files: model.safetensors, else the
// shards model.safetensors.index.json names. Pickled weights alone are
// refused.
func weightFiles(dir string) ([]string, error) {
	if p := filepath.Join(dir, weightsFile); isFile(p) {
		return []string{p}, nil
	}
	idx := filepath.Join(dir, indexFile)
	if !isFile(idx) {
		if p := filepath.Join(dir, pickleFile); isFile(p) {
			return nil, fmt.Errorf("convert: %s: %w: the weights are a PyTorch pickle, which synapse does not load (unpickling runs code); get %s instead, e.g. `synapse models pull ID` or `huggingface-cli download ID %s`",
				p, ErrRefused, weightsFile, weightsFile)
		}
		return nil, fmt.Errorf("convert: %s: %w: no %s nor %s", dir, ErrRefused, weightsFile, indexFile)
	}
	b, err := readlimit.ReadFile(idx, readlimit.Config)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	var j struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &j); err != nil || len(j.WeightMap) == 0 {
		return nil, fmt.Errorf("convert: %s: %w: no weight_map (%v)", idx, ErrRefused, err)
	}
	seen := map[string]bool{}
	var out []string
	for tensor, f := range j.WeightMap {
		p := filepath.Clean(filepath.FromSlash(f))
		if !filepath.IsLocal(p) || filepath.Dir(p) != "." {
			return nil, fmt.Errorf("convert: %s: %w: tensor %s is in %q, outside the directory", idx, ErrRefused, tensor, f)
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, filepath.Join(dir, p))
		}
	}
	sort.Strings(out)
	for _, p := range out {
		if !isFile(p) {
			return nil, fmt.Errorf("convert: %s: %w: shard %s is missing", idx, ErrRefused, filepath.Base(p))
		}
	}
	return out, nil
}
