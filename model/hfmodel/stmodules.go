package hfmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/safetensors"
)

// A sentence-transformers model directory describes the model as a chain of
// modules (modules.json): the Transformer (the ONNX graph), then modules
// applied to its output in order. synapse applies Pooling, Dense and
// Normalize, exactly as sentence-transformers' forward passes compute them,
// and refuses a directory naming any other module, by name, before any work.
//
//	DIR/modules.json                       [{"idx":0,"path":"","type":"sentence_transformers.models.Transformer"}, …]
//	DIR/sentence_bert_config.json          {"max_seq_length": 256, "do_lower_case": false}
//	DIR/config_sentence_transformers.json  {"prompts": {"query": "query: "}, "default_prompt_name": null}
//	DIR/1_Pooling/config.json              pooling_mode_* booleans, include_prompt
//	DIR/2_Dense/config.json                in_features, out_features, bias, activation_function
//	DIR/2_Dense/model.safetensors          linear.weight [out, in], linear.bias [out]
//	DIR/3_Normalize/                       (no config)

// ErrModule marks a sentence-transformers directory synapse cannot apply
// as sentence-transformers would: an unknown module, a mode, an activation
// or a weights format it does not implement, or an inconsistent config.
var ErrModule = errors.New("sentence-transformers module synapse cannot apply")

// Module kinds a Chain holds.
const (
	ModPooling   = "Pooling"
	ModDense     = "Dense"
	ModNormalize = "Normalize"
)

// Pooling modes, as sentence-transformers names them (Pooling.POOLING_MODES),
// in the order it concatenates them when several are on.
var PoolingModes = []string{"cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"}

// poolingKeys are the config keys of PoolingModes, in the same order.
var poolingKeys = []string{"pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_tokens",
	"pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"}

// Module is one module of the chain after the Transformer.
type Module struct {
	Kind string // ModPooling, ModDense or ModNormalize
	Dir  string // the module's directory

	// Pooling: the modes (several are concatenated, in PoolingModes'
	// order), the word embedding width its config names (0: not named)
	// and include_prompt.
	Modes         []string
	WordDim       int
	IncludePrompt bool

	// Dense: in and out features, bias, the activation (one of
	// Activations' values) and its weights file with its digest.
	In, Out    int
	Bias       bool
	Activation string
	Weights    string
	Digest     string
	// Features is the features a Dense module reads and writes
	// (module_input_name: "sentence_embedding" or "token_embeddings";
	// "" when its config does not say).
	Features string
}

// Chain is what a sentence-transformers directory asks of synapse besides
// the graph: the modules after the Transformer, its max_seq_length and its
// prompts. The zero Chain (a plain Hugging Face directory) applies nothing.
type Chain struct {
	Modules []Module
	// MaxSeqLength is sentence_bert_config.json's max_seq_length (tokens,
	// special tokens included); 0 when it does not say.
	MaxSeqLength int
	// Prompts and DefaultPrompt are config_sentence_transformers.json's
	// prompts by name and default_prompt_name ("" for none).
	Prompts       map[string]string
	DefaultPrompt string
	// Multi is a multi-vector chain's (MultiVector) query and document
	// handling; the zero value for other chains.
	Multi MultiVector
	// Splade is a sparse encoder's SpladePooling (modules.json:
	// MLMTransformer, then SpladePooling); nil for other chains. It is
	// not one of Modules: nothing after the graph's logits runs in the
	// chain, the worker's sparse pooling does (--vectors sparse).
	Splade *Splade
}

// Splade is sentence-transformers' SpladePooling module as its config
// sets it: w_v = pool over the tokens of log(1 + act(logit_tv)).
type Splade struct {
	Dir string
	// Strategy is pooling_strategy: "max" (SPLADE v2 and later, the
	// default) or "sum" (the first SPLADE).
	Strategy string
	// Activation is activation_function: "relu" (the default) or
	// "log1p_relu" (a second log1p, OpenSearch's SPLADE models).
	Activation string
}

// Activations maps the activation_function names a Dense config may give
// (torch.nn's classes, by their full and short names) to what the engine
// computes.
var Activations = map[string]string{
	"Identity": "identity", "Tanh": "tanh", "ReLU": "relu", "Sigmoid": "sigmoid", "GELU": "gelu", "SiLU": "silu",
}

// ReadChain reads the sentence-transformers files of the model directory
// root. Without modules.json, a 1_Pooling/config.json is the chain's only
// module (as synapse read it before modules.json was honoured).
func ReadChain(root string) (Chain, error) {
	var c Chain
	if err := c.readPrompts(root); err != nil {
		return c, err
	}
	mods, err := readModulesJSON(root)
	if err != nil {
		return c, err
	}
	transformer := root
	if mods == nil {
		if p := filepath.Join(root, "1_Pooling"); exists(filepath.Join(p, "config.json")) {
			m, err := readPoolingModule(p)
			if err != nil {
				return c, err
			}
			c.Modules = []Module{m}
		}
	} else if transformer, err = c.readModules(root, mods); err != nil {
		return c, err
	}
	if c.MultiVector() {
		if err := c.readMultiVector(root); err != nil {
			return c, err
		}
	}
	return c, c.readTransformer(transformer, mods != nil)
}

type stModule struct {
	Idx  int    `json:"idx"`
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"`
}

// readModulesJSON reads root/modules.json; nil when there is none.
func readModulesJSON(root string) ([]stModule, error) {
	path := filepath.Join(root, "modules.json")
	b, err := readlimit.ReadFile(path, readlimit.Config)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hfmodel: %w", err)
	}
	var mods []stModule
	if err := readlimit.UnmarshalJSON(b, &mods); err != nil {
		return nil, fmt.Errorf("hfmodel: %s: %w", path, err)
	}
	if mods == nil {
		mods = []stModule{}
	}
	return mods, nil
}

// kindOf is the module class a modules.json type names:
// "sentence_transformers.models.Dense" (or ….Dense.Dense, or PyLate's
// "pylate.models.Dense.Dense") is "Dense"; a class from elsewhere keeps
// its full name.
func kindOf(typ string) string {
	if typ == "pylate.models.Dense.Dense" { // PyLate's ColBERT projection: sentence-transformers' Dense
		return ModDense
	}
	// sentence-transformers 6 names a module by its file:
	// sentence_transformers.base.modules.transformer.Transformer,
	// ….sentence_transformer.modules.pooling.Pooling, and a SparseEncoder's
	// ….sparse_encoder.modules.splade_pooling.SpladePooling (version 5:
	// ….sparse_encoder.models.SpladePooling).
	if rest, ok := strings.CutPrefix(typ, "sentence_transformers."); ok && !strings.HasPrefix(rest, "models.") {
		if class := rest[strings.LastIndex(rest, ".")+1:]; slices.Contains(stClasses, class) {
			return class
		}
	}
	rest, ok := strings.CutPrefix(typ, "sentence_transformers.models.")
	if !ok {
		return typ
	}
	if a, b, ok := strings.Cut(rest, "."); ok && a == b {
		return a
	}
	return rest
}

// readModules checks modules.json's chain — one Transformer first, then
// Pooling, then any Dense and Normalize modules — and reads each module's
// config. It returns the Transformer's directory.
func (c *Chain) readModules(root string, mods []stModule) (string, error) {
	path := filepath.Join(root, "modules.json")
	refuse := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("hfmodel: %s: %w: %s", path, ErrModule, fmt.Sprintf(format, args...))
	}
	if len(mods) == 0 || (kindOf(mods[0].Type) != "Transformer" && kindOf(mods[0].Type) != modMLM) {
		return refuse("the first module must be sentence_transformers.models.Transformer (the ONNX graph)")
	}
	tdir, err := moduleDir(root, mods[0].Path)
	if err != nil {
		return refuse("module 0 (%s): %v", mods[0].Type, err)
	}
	// A SparseEncoder: MLMTransformer (sentence-transformers 5), or 6's
	// Transformer with transformer_task fill-mask, then SpladePooling.
	if kindOf(mods[0].Type) == modMLM || len(mods) > 1 && kindOf(mods[1].Type) == modSplade {
		return tdir, c.readSparseModules(root, mods, refuse)
	}
	for i, m := range mods[1:] {
		dir, err := moduleDir(root, m.Path)
		if err != nil {
			return refuse("module %d (%s): %v", i+1, m.Type, err)
		}
		var mod Module
		switch kind := kindOf(m.Type); {
		case kind == ModPooling && i == 0:
			mod, err = readPoolingModule(dir)
		case kind == ModDense:
			// Dense right after the Transformer: a multi-vector model's
			// projection of every token (MultiVector); after Pooling, of
			// the pooled vector.
			mod, err = readDenseModule(dir)
			if want := map[bool]string{true: "token_embeddings", false: "sentence_embedding"}[i == 0]; err == nil && mod.Features != "" && mod.Features != want {
				return refuse("module %d (%s) reads %s; at its place in the chain synapse gives it %s", i+1, m.Type, mod.Features, want)
			}
		case kind == ModNormalize && i > 0:
			mod = Module{Kind: ModNormalize, Dir: dir}
		case kind == ModPooling, kind == ModDense, kind == ModNormalize:
			return refuse("module %d is %s; synapse applies Transformer, Pooling, then Dense and Normalize modules, in that order", i+1, m.Type)
		default:
			return refuse("module %d is %s; synapse applies only Transformer, Pooling, Dense and Normalize", i+1, m.Type)
		}
		if err != nil {
			return "", err
		}
		c.Modules = append(c.Modules, mod)
	}
	return tdir, nil
}

// A SparseEncoder's module classes (kindOf).
const (
	modMLM    = "MLMTransformer"
	modSplade = "SpladePooling"
)

// stClasses are the module classes kindOf names under
// sentence-transformers 6's module paths.
var stClasses = []string{"Transformer", ModPooling, ModDense, ModNormalize, modMLM, modSplade}

// readSparseModules reads a SparseEncoder's chain after its MLMTransformer:
// exactly one SpladePooling, whose config must name a pooling strategy
// and an activation SpladePooling knows (missing keys take its defaults,
// max and relu). Whether synapse computes them is the job's to say.
func (c *Chain) readSparseModules(root string, mods []stModule, refuse func(string, ...any) (string, error)) error {
	if len(mods) != 2 || kindOf(mods[1].Type) != modSplade {
		_, err := refuse("a sparse encoder's chain is MLMTransformer then SpladePooling; synapse applies no other")
		return err
	}
	dir, err := moduleDir(root, mods[1].Path)
	if err != nil {
		_, err = refuse("module 1 (%s): %v", mods[1].Type, err)
		return err
	}
	sp := Splade{Dir: dir, Strategy: "max", Activation: "relu"}
	if path := filepath.Join(dir, "config.json"); exists(path) {
		var cfg struct {
			Strategy   *string `json:"pooling_strategy"`
			Activation *string `json:"activation_function"`
		}
		if err := readJSON(path, &cfg); err != nil {
			return err
		}
		set(&sp.Strategy, cfg.Strategy)
		set(&sp.Activation, cfg.Activation)
		if sp.Strategy != "max" && sp.Strategy != "sum" || sp.Activation != "relu" && sp.Activation != "log1p_relu" {
			return fmt.Errorf("hfmodel: %s: %w: pooling_strategy %q, activation_function %q (SpladePooling knows max or sum, relu or log1p_relu)",
				path, ErrModule, sp.Strategy, sp.Activation)
		}
	}
	c.Splade = &sp
	return nil
}

// moduleDir is a module's directory: rel inside root, never outside it.
func moduleDir(root, rel string) (string, error) {
	if rel == "" || filepath.Clean(rel) == "." {
		return root, nil
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("path %q is outside the model directory", rel)
	}
	return filepath.Join(root, rel), nil
}

// readJSON reads a module's config file into v.
func readJSON(path string, v any) error {
	b, err := readlimit.ReadFile(path, readlimit.Config)
	if err != nil {
		return fmt.Errorf("hfmodel: %w", err)
	}
	if err := readlimit.UnmarshalJSON(b, v); err != nil {
		return fmt.Errorf("hfmodel: %s: %w", path, err)
	}
	return nil
}

// readPoolingModule reads a Pooling module's config.json as
// sentence-transformers' Pooling(**config) does: a missing mode key takes
// the constructor's default (mean on, the others off), "pooling_mode"
// overrides the booleans, include_prompt defaults to true.
func readPoolingModule(dir string) (Module, error) {
	path := filepath.Join(dir, "config.json")
	var raw map[string]json.RawMessage
	if err := readJSON(path, &raw); err != nil {
		return Module{}, err
	}
	m := Module{Kind: ModPooling, Dir: dir, IncludePrompt: true}
	refuse := func(format string, args ...any) (Module, error) {
		return Module{}, fmt.Errorf("hfmodel: %s: %w: %s", path, ErrModule, fmt.Sprintf(format, args...))
	}
	on := map[string]bool{"mean": true}
	override := ""
	for k, v := range raw {
		var err error
		switch {
		case k == "word_embedding_dimension", k == "embedding_dimension": // sentence-transformers 6 renamed it
			err = json.Unmarshal(v, &m.WordDim)
		case k == "include_prompt":
			err = json.Unmarshal(v, &m.IncludePrompt)
		case k == "pooling_mode":
			var mode *string
			if err = json.Unmarshal(v, &mode); err == nil && mode != nil {
				if !knownMode(strings.ToLower(*mode)) {
					return refuse("pooling_mode %q: sentence-transformers knows %v", *mode, PoolingModes)
				}
				override = strings.ToLower(*mode)
			}
		case strings.HasPrefix(k, "pooling_mode_"):
			i := indexOf(poolingKeys, k)
			if i < 0 {
				return refuse("unknown pooling key %s", k)
			}
			var b bool
			err = json.Unmarshal(v, &b)
			on[PoolingModes[i]] = b
		}
		if err != nil {
			return refuse("%s: %v", k, err)
		}
	}
	for _, mode := range PoolingModes {
		if on[mode] {
			m.Modes = append(m.Modes, mode)
		}
	}
	if override != "" {
		m.Modes = []string{override}
	}
	if len(m.Modes) == 0 {
		return refuse("no pooling mode is on")
	}
	return m, nil
}

func knownMode(s string) bool { return indexOf(PoolingModes, s) >= 0 }

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// readDenseModule reads a Dense module's config.json and checks its
// weights: model.safetensors with linear.weight [out, in] and, with bias,
// linear.bias [out]. PyTorch pickles (pytorch_model.bin) are refused.
func readDenseModule(dir string) (Module, error) {
	path := filepath.Join(dir, "config.json")
	var cfg struct {
		In         int     `json:"in_features"`
		Out        int     `json:"out_features"`
		Bias       *bool   `json:"bias"`
		Activation *string `json:"activation_function"`
		Residual   bool    `json:"use_residual"` // PyLate's Dense
		// sentence-transformers 6: the features it reads and writes
		Input  string `json:"module_input_name"`
		Output string `json:"module_output_name"`
	}
	if err := readJSON(path, &cfg); err != nil {
		return Module{}, err
	}
	refuse := func(file, format string, args ...any) (Module, error) {
		return Module{}, fmt.Errorf("hfmodel: %s: %w: Dense: %s", file, ErrModule, fmt.Sprintf(format, args...))
	}
	if cfg.Residual {
		return refuse(path, "use_residual true (PyLate's residual projection) is not implemented")
	}
	m := Module{Kind: ModDense, Dir: dir, In: cfg.In, Out: cfg.Out, Bias: cfg.Bias == nil || *cfg.Bias, Activation: "tanh",
		Features: cfg.Input}
	if cfg.Output != cfg.Input && cfg.Output != "" {
		return refuse(path, "module_input_name %q, module_output_name %q: synapse applies a Dense module in place", cfg.Input, cfg.Output)
	}
	if m.In <= 0 || m.Out <= 0 || m.In > 1<<20 || m.Out > 1<<20 {
		return refuse(path, "in_features %d, out_features %d", m.In, m.Out)
	}
	if cfg.Activation != nil {
		act, ok := activation(*cfg.Activation)
		if !ok {
			return refuse(path, "activation_function %s: synapse computes torch.nn's Identity, Tanh, ReLU, Sigmoid, GELU and SiLU", *cfg.Activation)
		}
		m.Activation = act
	}
	m.Weights = filepath.Join(dir, "model.safetensors")
	if !exists(m.Weights) {
		for _, bin := range []string{"pytorch_model.bin", "model.pt"} {
			if p := filepath.Join(dir, bin); exists(p) {
				return refuse(p, "weights in a PyTorch pickle: synapse reads model.safetensors only (save the model with safe_serialization=True)")
			}
		}
		return refuse(dir, "no model.safetensors")
	}
	if err := checkDenseWeights(m); err != nil {
		return Module{}, err
	}
	_, digest, err := Digest(m.Weights)
	if err != nil {
		return Module{}, err
	}
	m.Digest = digest
	return m, nil
}

// activation is the engine's name for a torch.nn activation class:
// "torch.nn.modules.activation.Tanh", "torch.nn.Tanh" and "Tanh" are "tanh".
func activation(name string) (string, bool) {
	short := name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		if !strings.HasPrefix(name, "torch.nn.") {
			return "", false
		}
		short = name[i+1:]
	}
	act, ok := Activations[short]
	return act, ok
}

// checkDenseWeights checks the shapes of a Dense module's tensors.
func checkDenseWeights(m Module) error {
	f, err := safetensors.Open(m.Weights)
	if err != nil {
		return fmt.Errorf("hfmodel: %w: %w", ErrModule, err)
	}
	defer f.Close()
	// In this order, so that an error names the weight before the bias.
	type tensor struct {
		name  string
		shape []int64
	}
	want := []tensor{{"linear.weight", []int64{int64(m.Out), int64(m.In)}}}
	if m.Bias {
		want = append(want, tensor{"linear.bias", []int64{int64(m.Out)}})
	}
	for _, w := range want {
		name, shape := w.name, w.shape
		t, ok := f.Tensors[name]
		if !ok {
			return fmt.Errorf("hfmodel: %s: %w: Dense: no tensor %s (tensors: %v)", m.Weights, ErrModule, name, f.Names())
		}
		if fmt.Sprint(t.Shape) != fmt.Sprint(shape) {
			return fmt.Errorf("hfmodel: %s: %w: Dense: %s has shape %v; config.json asks for %v", m.Weights, ErrModule, name, t.Shape, shape)
		}
	}
	return nil
}

// DenseWeights reads a Dense module's weight matrix (row-major [Out][In])
// and bias (nil without one).
func DenseWeights(m Module) (w, b []float32, err error) {
	if err := checkDenseWeights(m); err != nil {
		return nil, nil, err
	}
	f, err := safetensors.Open(m.Weights)
	if err != nil {
		return nil, nil, fmt.Errorf("hfmodel: %w", err)
	}
	defer f.Close()
	if w, _, err = f.Float32("linear.weight"); err != nil {
		return nil, nil, fmt.Errorf("hfmodel: %w", err)
	}
	if m.Bias {
		if b, _, err = f.Float32("linear.bias"); err != nil {
			return nil, nil, fmt.Errorf("hfmodel: %w", err)
		}
	}
	return w, b, nil
}

// readTransformer reads the Transformer module's sentence_bert_config.json
// (optional): max_seq_length; do_lower_case true is refused (the text
// would be lower-cased before the tokenizer, which synapse does not do).
//
// In a sentence-transformers directory (st: modules.json) whose
// sentence_bert_config.json names no max_seq_length — sentence-transformers
// 6 saves it as the tokenizer's model_max_length instead — the tokenizer's
// tokenizer_config.json model_max_length is the length, as
// sentence-transformers truncates at it (a sentinel above 1<<20, which
// transformers writes for "no limit", is no length).
func (c *Chain) readTransformer(dir string, st bool) error {
	if err := c.readSentenceBertConfig(filepath.Join(dir, "sentence_bert_config.json")); err != nil || !st || c.MaxSeqLength > 0 {
		return err
	}
	path := filepath.Join(dir, "tokenizer_config.json")
	if !exists(path) {
		return nil
	}
	var cfg struct {
		ModelMaxLength *float64 `json:"model_max_length"`
	}
	if err := readJSON(path, &cfg); err != nil {
		return err
	}
	if n := cfg.ModelMaxLength; n != nil && *n >= 1 && *n <= 1<<20 {
		c.MaxSeqLength = int(*n)
	}
	return nil
}

// readSentenceBertConfig reads sentence_bert_config.json (optional): its
// max_seq_length and do_lower_case.
func (c *Chain) readSentenceBertConfig(path string) error {
	if !exists(path) {
		return nil
	}
	var cfg struct {
		MaxSeqLength *int `json:"max_seq_length"`
		DoLowerCase  bool `json:"do_lower_case"`
	}
	if err := readJSON(path, &cfg); err != nil {
		return err
	}
	if cfg.DoLowerCase {
		return fmt.Errorf("hfmodel: %s: %w: do_lower_case true (synapse does not lower-case text before the tokenizer)", path, ErrModule)
	}
	if cfg.MaxSeqLength != nil {
		if *cfg.MaxSeqLength <= 0 {
			return fmt.Errorf("hfmodel: %s: %w: max_seq_length %d", path, ErrModule, *cfg.MaxSeqLength)
		}
		c.MaxSeqLength = *cfg.MaxSeqLength
	}
	return nil
}

// readPrompts reads config_sentence_transformers.json (optional).
func (c *Chain) readPrompts(root string) error {
	path := filepath.Join(root, "config_sentence_transformers.json")
	if !exists(path) {
		return nil
	}
	var cfg struct {
		Prompts       map[string]string `json:"prompts"`
		DefaultPrompt *string           `json:"default_prompt_name"`
	}
	if err := readJSON(path, &cfg); err != nil {
		return err
	}
	c.Prompts = cfg.Prompts
	if cfg.DefaultPrompt != nil && *cfg.DefaultPrompt != "" {
		if _, ok := cfg.Prompts[*cfg.DefaultPrompt]; !ok {
			return fmt.Errorf("hfmodel: %s: %w: default_prompt_name %q is not one of its prompts", path, ErrModule, *cfg.DefaultPrompt)
		}
		c.DefaultPrompt = *cfg.DefaultPrompt
	}
	return nil
}

// MultiVector reports whether the chain is a multi-vector (ColBERT) model's
// as PyLate saves one: Dense modules right after the Transformer and no
// Pooling, so that every token's state is projected (synapse embed
// --vectors tokens); such a chain gives no pooled vector.
func (c Chain) MultiVector() bool {
	return len(c.Modules) > 0 && c.Modules[0].Kind == ModDense
}

// Pooling is the chain's Pooling module, nil when it has none.
func (c Chain) Pooling() *Module {
	for i := range c.Modules {
		if c.Modules[i].Kind == ModPooling {
			return &c.Modules[i]
		}
	}
	return nil
}

// Dims is the width of the chain's output for hidden states of width
// hidden: the last Dense module's out_features, else the pooled width.
func (c Chain) Dims(hidden int) int {
	d := hidden
	for _, m := range c.Modules {
		switch m.Kind {
		case ModPooling:
			d = len(m.Modes) * hidden
		case ModDense:
			d = m.Out
		}
	}
	return d
}

// Check verifies that the modules fit together over hidden states of
// width hidden (0: unknown, only the Dense modules are chained): each Dense
// takes the width the module before it gives.
func (c Chain) Check(hidden int) error {
	d := 0
	if hidden > 0 {
		d = hidden
	}
	for _, m := range c.Modules {
		switch m.Kind {
		case ModPooling:
			if m.WordDim > 0 && hidden > 0 && m.WordDim != hidden {
				return fmt.Errorf("hfmodel: %s: %w: word_embedding_dimension %d, but the graph's hidden states are %d wide", m.Dir, ErrModule, m.WordDim, hidden)
			}
			d = len(m.Modes) * hidden
		case ModDense:
			if d > 0 && m.In != d {
				return fmt.Errorf("hfmodel: %s: %w: Dense in_features %d, but the module before it gives %d values", m.Dir, ErrModule, m.In, d)
			}
			d = m.Out
		}
	}
	return nil
}

// String describes the modules applied after the Transformer, as the
// output's metadata records them and LOAD's st_modules carries them:
// "Pooling(mean) + Dense(384->256 tanh bias sha256:…) + Normalize"; ""
// for none.
func (c Chain) String() string {
	parts := make([]string, len(c.Modules))
	for i, m := range c.Modules {
		switch m.Kind {
		case ModPooling:
			parts[i] = "Pooling(" + strings.Join(m.Modes, "+")
			if !m.IncludePrompt {
				parts[i] += " exclude_prompt"
			}
			parts[i] += ")"
		case ModDense:
			bias := "nobias"
			if m.Bias {
				bias = "bias"
			}
			parts[i] = fmt.Sprintf("Dense(%d->%d %s %s %s)", m.In, m.Out, m.Activation, bias, m.Digest)
		default:
			parts[i] = m.Kind
		}
	}
	return strings.Join(parts, " + ")
}
