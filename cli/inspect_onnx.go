package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/onnx"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/pipeline/job"
)

// onnxModelInfo is what inspect reports for an ONNX model; it is also the
// --json schema (format "onnx").
type onnxModelInfo struct {
	Format   string `json:"format"` // "onnx"
	Path     string `json:"path"`   // as given
	Graph    string `json:"graph"`  // the .onnx file LOAD names
	FileSize int64  `json:"file_size"`
	Digest   string `json:"digest"` // sha256:<hex> of the .onnx file
	Name     string `json:"name"`

	Producer     string           `json:"producer,omitempty"`
	IRVersion    int64            `json:"ir_version"`
	Opsets       map[string]int64 `json:"opsets"` // domain ("" = ai.onnx) → version
	Inputs       []string         `json:"inputs"`
	Outputs      []string         `json:"outputs"`
	Nodes        int              `json:"nodes"`
	Quantized    bool             `json:"quantized"` // integer matrix products (dynamic int8 and the like)
	Parameters   int64            `json:"parameters"`
	ExternalData bool             `json:"external_data"` // weights in files the digest does not cover

	Architecture string `json:"architecture,omitempty"` // config.json model_type
	// Route says how synapse came by the graph it runs: converted from a
	// safetensors directory by synapse, or the directory's own ONNX export.
	Route string `json:"route"`
	// Kind is "embedder" (last_hidden_state or sentence_embedding: synapse
	// embed), "cross-encoder" (logits [batch, labels]: synapse rerank) or
	// "masked-lm" (logits [batch, sequence, vocab]: synapse embed --vectors
	// sparse; Dims is the vocabulary's size) or "multi-vector" (a ColBERT
	// projection of every token: synapse embed --vectors tokens; Dims is the
	// projection's width).
	Kind string `json:"kind"`
	// Labels, Scoring and PairLayout describe a cross-encoder: its logits'
	// width, how they become a score (or ScoringError: why it cannot
	// rerank), and how a query (A) and a document (B) are laid out.
	Labels        int    `json:"labels,omitempty"`
	Scoring       string `json:"scoring,omitempty"`
	ScoringError  string `json:"scoring_error,omitempty"`
	PairLayout    string `json:"pair_layout,omitempty"`
	Dims          int64  `json:"dims"` // output width (sentence_embedding, else last_hidden_state), 0 when not fixed
	ContextLength int    `json:"context_length"`
	Pooling       string `json:"pooling"` // the model's own: sentence-transformers config, else mean

	// SentenceTransformers is a sentence-transformers directory's chain
	// (modules.json, sentence_bert_config.json,
	// config_sentence_transformers.json); absent for a plain directory and
	// for cross-encoders.
	SentenceTransformers *stInfo `json:"sentence_transformers,omitempty"`

	Tokenizer onnxTokenizerInfo `json:"tokenizer"`
}

// stInfo is what a sentence-transformers directory asks synapse to do.
type stInfo struct {
	// Modules is modules.json's chain, the Transformer (the graph) first.
	Modules []stModuleInfo `json:"modules"`
	// Applied is what synapse embed applies by default: the graph's
	// sentence_embedding output when it has one (the graph holds the
	// modules), else the modules after the graph's last_hidden_state.
	Applied string `json:"applied"`
	// MaxSeqLength is sentence_bert_config.json's max_seq_length (special
	// tokens included), the default --chunk-tokens; 0 when not given.
	MaxSeqLength      int               `json:"max_seq_length,omitempty"`
	Prompts           map[string]string `json:"prompts,omitempty"`
	DefaultPromptName string            `json:"default_prompt_name,omitempty"`
}

// stModuleInfo is one module of the chain.
type stModuleInfo struct {
	Type string `json:"type"`          // Transformer, Pooling, Dense, Normalize
	Dir  string `json:"dir,omitempty"` // relative to the model directory
	// Pooling: its modes (concatenated when several) and include_prompt.
	Modes         []string `json:"modes,omitempty"`
	IncludePrompt *bool    `json:"include_prompt,omitempty"`
	// Dense: in and out features, activation, bias and weights file.
	InFeatures  int    `json:"in_features,omitempty"`
	OutFeatures int    `json:"out_features,omitempty"`
	Activation  string `json:"activation,omitempty"`
	Bias        *bool  `json:"bias,omitempty"`
	Weights     string `json:"weights,omitempty"`
}

type onnxTokenizerInfo struct {
	File          string  `json:"file"`
	Model         string  `json:"model"` // WordPiece, Unigram, BPE
	Normalizer    string  `json:"normalizer,omitempty"`
	PreTokenizer  string  `json:"pre_tokenizer,omitempty"`
	PostProcessor string  `json:"post_processor,omitempty"`
	VocabSize     int     `json:"vocab_size"`
	Prefix        []int32 `json:"prefix"` // special tokens before a single sequence
	Suffix        []int32 `json:"suffix"`
	PrefixText    string  `json:"prefix_text"`
	SuffixText    string  `json:"suffix_text"`
}

// isONNXModel reports whether inspect should read path as an ONNX model.
func isONNXModel(path string) bool { return hfmodel.IsONNX(path) }

// describeONNX reads an ONNX model as the module would (artifact.Open).
func describeONNX(path string) (*onnxModelInfo, error) {
	a, err := artifact.Open(path)
	if err != nil {
		return nil, err
	}
	g := a.ONNX
	info := &onnxModelInfo{Format: artifact.FormatONNX, Path: path, Graph: a.Path, FileSize: a.Size, Digest: a.Digest, Name: a.Name,
		Producer: strings.TrimSpace(g.Producer + " " + g.ProducerVersion), IRVersion: g.IRVersion, Opsets: g.Opsets,
		Nodes: g.Nodes, Parameters: g.Parameters, ExternalData: g.ExternalData,
		Architecture: a.Arch, ContextLength: a.ContextLength, Pooling: a.Pooling}
	for _, v := range g.Inputs {
		info.Inputs = append(info.Inputs, v.String())
	}
	for _, v := range g.Outputs {
		info.Outputs = append(info.Outputs, v.String())
	}
	for _, op := range g.OpNames() {
		if strings.Contains(op, "MatMulInteger") || strings.Contains(op, "QLinear") || strings.Contains(op, "DynamicQuantize") {
			info.Quantized = true
		}
	}
	info.Route = onnxRoute(a.Path)
	info.Dims = outputDims(g)
	if o, ok := g.Output("sentence_embedding"); ok && o.Last() > 0 {
		info.Pooling = "sentence_embedding (in the graph)"
	}
	info.Tokenizer = describeHFTokenizer(a)
	info.Kind = "embedder"
	if c := a.Chain; a.Classifier == 0 && (len(c.Modules) > 0 || c.MaxSeqLength > 0 || len(c.Prompts) > 0) {
		info.SentenceTransformers = describeST(a)
	}
	if a.Chain.MultiVector() {
		m := a.Chain.Multi
		info.Kind, info.Dims = "multi-vector", int64(a.Chain.Dims(int(info.Dims)))
		info.Pooling = fmt.Sprintf("none: every token projected and normalised (--vectors tokens; markers %q/%q, document_length %d, query_length %d)",
			m.DocumentPrefix, m.QueryPrefix, m.DocumentLength, m.QueryLength)
	}
	if a.MaskedLM && info.Dims == 0 {
		o, _ := g.Output("logits")
		info.Kind, info.Dims, info.Pooling = "masked-lm", o.Last(), "splade-max (--vectors sparse)"
	}
	if a.Classifier > 0 {
		info.Kind, info.Labels, info.Scoring, info.Pooling = "cross-encoder", a.Classifier, a.Scoring, ""
		if a.ScoringErr != nil {
			info.ScoringError = a.ScoringErr.Error()
		}
		if p, ok := a.Tokenizer.(tokenize.PairLayout); ok {
			info.PairLayout = pairText(a, p.PairTemplate())
		}
	}
	return info, nil
}

// onnxRoute says where the graph at path came from: the model cache's
// record of a conversion from a safetensors directory, else an ONNX export.
func onnxRoute(path string) string {
	if e, ok := modelcache.EntryFor(path); ok && e.ConvertedFrom != "" {
		return fmt.Sprintf("converted from %s (safetensors) to ONNX, run by ONNX Runtime", e.SourcePath)
	}
	return "ONNX export, run by ONNX Runtime"
}

// describeST describes a sentence-transformers directory's chain, and what
// synapse embed applies of it (job.AppliedModules, the engine's rule).
func describeST(a *artifact.Artifact) *stInfo {
	files, _ := hfmodel.Resolve(a.Path)
	c := a.Chain
	st := &stInfo{Modules: []stModuleInfo{{Type: "Transformer", Dir: rel(files.Root, filepath.Dir(files.Graph))}},
		Applied: job.AppliedModules(a), MaxSeqLength: c.MaxSeqLength, Prompts: c.Prompts, DefaultPromptName: c.DefaultPrompt}
	for _, m := range c.Modules {
		mi := stModuleInfo{Type: m.Kind, Dir: rel(files.Root, m.Dir)}
		switch m.Kind {
		case hfmodel.ModPooling:
			mi.Modes, mi.IncludePrompt = m.Modes, &m.IncludePrompt
		case hfmodel.ModDense:
			mi.InFeatures, mi.OutFeatures, mi.Activation, mi.Bias, mi.Weights = m.In, m.Out, m.Activation, &m.Bias, rel(files.Root, m.Weights)
		}
		st.Modules = append(st.Modules, mi)
	}
	return st
}

// rel is path relative to root ("." for root itself), path when it is not
// under root.
func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// outputDims is the embedding width the graph fixes, 0 when it does not.
func outputDims(g *onnx.Info) int64 {
	for _, name := range []string{"sentence_embedding", "last_hidden_state", "token_embeddings"} {
		if o, ok := g.Output(name); ok && o.Last() > 0 {
			return o.Last()
		}
	}
	return 0
}

func describeHFTokenizer(a *artifact.Artifact) onnxTokenizerInfo {
	files, _ := hfmodel.Resolve(a.Path)
	t := onnxTokenizerInfo{File: files.Tokenizer, VocabSize: len(a.Tokenizer.Vocab().Tokens)}
	var j struct {
		Normalizer, PreTokenizer, PostProcessor, Model json.RawMessage
	}
	if b, err := readlimit.ReadFile(files.Tokenizer, readlimit.Tokenizer); err == nil {
		var raw map[string]json.RawMessage
		if json.Unmarshal(b, &raw) == nil {
			j.Normalizer, j.PreTokenizer, j.PostProcessor, j.Model = raw["normalizer"], raw["pre_tokenizer"], raw["post_processor"], raw["model"]
		}
	}
	t.Normalizer, t.PreTokenizer, t.PostProcessor = componentTypes(j.Normalizer), componentTypes(j.PreTokenizer), componentTypes(j.PostProcessor)
	t.Model = componentTypes(j.Model)
	if t.Model == "" {
		t.Model = string(a.Tokenizer.Vocab().Kind)
	}
	t.Prefix, t.Suffix = a.Tokenizer.Affixes()
	t.PrefixText, t.SuffixText = tokenTexts(a, t.Prefix), tokenTexts(a, t.Suffix)
	return t
}

// componentTypes names a tokenizer.json component, a Sequence by its parts.
func componentTypes(raw json.RawMessage) string {
	var c struct {
		Type          string            `json:"type"`
		Normalizers   []json.RawMessage `json:"normalizers"`
		PreTokenizers []json.RawMessage `json:"pretokenizers"`
		Processors    []json.RawMessage `json:"processors"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &c) != nil {
		return ""
	}
	if c.Type != "Sequence" {
		return c.Type
	}
	var parts []string
	for _, p := range append(append(c.Normalizers, c.PreTokenizers...), c.Processors...) {
		parts = append(parts, componentTypes(p))
	}
	return "Sequence(" + strings.Join(parts, ", ") + ")"
}

func tokenTexts(a *artifact.Artifact, ids []int32) string {
	toks := a.Tokenizer.Vocab().Tokens
	var parts []string
	for _, id := range ids {
		if id >= 0 && int(id) < len(toks) {
			parts = append(parts, toks[id])
		}
	}
	return strings.Join(parts, " ")
}

// printONNXInfo writes info as two aligned columns.
func printONNXInfo(w io.Writer, info *onnxModelInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("format", "onnx (ONNX Runtime engine)")
	row("model", "%s", info.Path)
	row("graph", "%s", info.Graph)
	row("size", "%s (%d bytes)", humanBytes(info.FileSize), info.FileSize)
	row("digest", "%s (the .onnx file)", info.Digest)
	row("name", "%s", orNone(info.Name))
	row("producer", "%s, IR version %d, opsets %s", orNone(info.Producer), info.IRVersion, opsetList(info.Opsets))
	row("architecture", "%s", orNone(info.Architecture))
	row("route", "%s", info.Route)
	for i, in := range info.Inputs {
		row(map[bool]string{true: "inputs"}[i == 0], "%s", in)
	}
	for i, out := range info.Outputs {
		row(map[bool]string{true: "outputs"}[i == 0], "%s", out)
	}
	if info.Kind == "cross-encoder" {
		row("kind", "cross-encoder (synapse rerank)")
		row("labels", "%d", info.Labels)
		if info.ScoringError != "" {
			row("score", "cannot rerank: %s", info.ScoringError)
		} else {
			row("score", "%s", info.Scoring)
		}
		row("pair", "%s", info.PairLayout)
	} else if info.Kind == "multi-vector" {
		row("kind", "multi-vector, ColBERT (synapse embed --vectors tokens)")
		row("token vector width", "%s", dimsText(info.Dims))
	} else if info.Kind == "masked-lm" {
		row("kind", "masked-lm (synapse embed --vectors sparse)")
		row("vocabulary width", "%s", dimsText(info.Dims))
	} else {
		row("kind", "embedder (synapse embed)")
		row("embedding width", "%s", dimsText(info.Dims))
	}
	row("context length", "%d", info.ContextLength)
	if info.Kind != "cross-encoder" {
		row("pooling", "%s", info.Pooling)
	}
	if st := info.SentenceTransformers; st != nil {
		printST(row, st)
	}
	row("quantized", "%t", info.Quantized)
	row("nodes", "%d", info.Nodes)
	row("parameters", "%d (%s)", info.Parameters, humanCount(uint64(info.Parameters)))
	if info.ExternalData {
		row("external data", "yes: some weights live in other files, which the digest does not cover")
	}
	t := info.Tokenizer
	row("tokenizer", "%s (%s)", t.Model, filepath.Base(t.File))
	row("normalizer", "%s", orNone(t.Normalizer))
	row("pre-tokenizer", "%s", orNone(t.PreTokenizer))
	row("post-processor", "%s", orNone(t.PostProcessor))
	row("vocabulary", "%d tokens", t.VocabSize)
	row("special tokens", "%s … %s (%v … %v)", orNone(t.PrefixText), orNone(t.SuffixText), t.Prefix, t.Suffix)
	return tw.Flush()
}

// printST writes a sentence-transformers chain: one row per module, what
// synapse applies, max_seq_length and the prompts.
func printST(row func(k, format string, args ...any), st *stInfo) {
	for i, m := range st.Modules {
		text := m.Type
		switch m.Type {
		case "Transformer":
			text += ": the ONNX graph"
		case hfmodel.ModPooling:
			text += ": " + strings.Join(m.Modes, " + ")
			if m.IncludePrompt != nil && !*m.IncludePrompt {
				text += ", prompt left out of the pooling (include_prompt false)"
			}
		case hfmodel.ModDense:
			bias := "no bias"
			if m.Bias != nil && *m.Bias {
				bias = "bias"
			}
			text += fmt.Sprintf(": %d -> %d, %s, %s (%s)", m.InFeatures, m.OutFeatures, m.Activation, bias, m.Weights)
		}
		if m.Dir != "" && m.Dir != "." && m.Type != hfmodel.ModDense {
			text += " (" + m.Dir + ")"
		}
		row(map[bool]string{true: "modules"}[i == 0], "%d %s", i, text)
	}
	row("applied", "%s", st.Applied)
	if st.MaxSeqLength > 0 {
		row("max_seq_length", "%d tokens (sentence_bert_config.json; the default --chunk-tokens, special tokens included)", st.MaxSeqLength)
	} else {
		row("max_seq_length", "not given (chunks fill the context)")
	}
	names := make([]string, 0, len(st.Prompts))
	for n := range st.Prompts {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		row(map[bool]string{true: "prompts"}[i == 0], "%s: %q (--prompt-name %s)", n, st.Prompts[n], n)
	}
	if len(names) == 0 {
		row("prompts", "none")
	}
	if st.DefaultPromptName != "" {
		row("default prompt", "%s (applied unless --prefix or --prompt-name is given)", st.DefaultPromptName)
	} else if len(names) > 0 {
		row("default prompt", "none (no prompt unless --prompt-name)")
	}
}

// pairText shows a pair layout with the special tokens' texts, e.g.
// "[CLS] A:0 [SEP] B:1 [SEP]:1".
func pairText(a *artifact.Artifact, p tokenize.PairTemplate) string {
	ids, types := p.Apply([]int32{-1}, []int32{-2})
	var parts []string
	for i, id := range ids {
		s := ""
		switch id {
		case -1:
			s = "A"
		case -2:
			s = "B"
		default:
			s = tokenTexts(a, []int32{id})
		}
		if types[i] != 0 || id < 0 {
			s += fmt.Sprintf(":%d", types[i])
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func dimsText(d int64) string {
	if d <= 0 {
		return "not fixed in the graph"
	}
	return fmt.Sprint(d)
}

func opsetList(m map[string]int64) string {
	var parts []string
	for d, v := range m {
		if d == "" {
			d = "ai.onnx"
		}
		parts = append(parts, fmt.Sprintf("%s %d", d, v))
	}
	return strings.Join(parts, ", ")
}
