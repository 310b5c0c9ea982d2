package artifact

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/onnx"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// openONNX opens an ONNX model: a model directory (its model.onnx) or a
// .onnx file (a variant, e.g. model_quantized.onnx), with the
// tokenizer.json beside it, config.json and the sentence-transformers
// modules when there are (a module synapse cannot apply is ErrInvalid). LOAD names the .onnx file; the digest is
// that file's.
func openONNX(path string) (*Artifact, error) {
	files, err := hfmodel.Resolve(path)
	if errors.Is(err, hfmodel.ErrLayout) || errors.Is(err, hfmodel.ErrModule) {
		return nil, fmt.Errorf("model %s: %w: %w", path, ErrInvalid, err)
	}
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if files.Tokenizer == "" {
		dir := filepath.Dir(files.Graph)
		return nil, fmt.Errorf("model %s: %w: no tokenizer.json in %s or %s (synapse tokenizes ONNX models with the model's own tokenizer.json)",
			path, ErrInvalid, dir, filepath.Dir(dir))
	}
	info, err := onnx.ReadFile(files.Graph)
	if err != nil {
		return nil, classify(files.Graph, err)
	}
	if _, ok := info.Input("input_ids"); !ok {
		return nil, fmt.Errorf("model %s: %w: the graph has no input_ids input (inputs: %v); synapse runs text encoders", files.Graph, ErrInvalid, info.Inputs)
	}
	tok, err := tokenize.LoadHF(files.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w: %w", path, ErrInvalid, err)
	}
	cfg, err := hfmodel.ReadConfig(files.Config)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w: %w", path, ErrInvalid, err)
	}
	if err := files.Chain.Check(cfg.HiddenSize); err != nil {
		return nil, fmt.Errorf("model %s: %w: %w", path, ErrInvalid, err)
	}
	entry, cached := modelcache.EntryFor(files.Graph)
	size, digest := entry.Size, entry.Digest // a cached graph's digest is its entry's
	if !cached {
		if size, digest, err = hfmodel.Digest(files.Graph); err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
	}
	a := &Artifact{Path: files.Graph, Format: FormatONNX, Digest: digest, Size: size, Name: onnxName(files),
		Arch: cfg.ModelType, ContextLength: cfg.ContextLength(), Pooling: chainPooling(files.Chain), Tokenizer: tok, ONNX: info,
		Chain: files.Chain}
	if cached {
		a.Entry, a.Name = &entry, entry.Name
	}
	if a.ContextLength == 0 {
		a.ContextLength = graphContext(info, files.Tokenizer)
	}
	crossEncoder(a, cfg, info)
	return a, nil
}

// chainPooling is the pooling a chain names as synapse's --pooling names
// it (mean, cls, last; sentence-transformers' names for the others, "+"
// between concatenated modes); mean without a Pooling module.
func chainPooling(c hfmodel.Chain) string {
	p := c.Pooling()
	if p == nil {
		return "mean"
	}
	modes := slices.Clone(p.Modes)
	for i, m := range modes {
		if m == "lasttoken" {
			modes[i] = "last"
		}
	}
	return strings.Join(modes, "+")
}

// crossEncoder marks a cross-encoder (a logits output [batch, labels], or
// config.json's …ForSequenceClassification): Classifier is its number of
// labels, and Scoring the rule the engine scores it by, or why it cannot
// rerank. A logits output [batch, sequence, vocab] is a masked-LM's
// instead (MaskedLM).
func crossEncoder(a *Artifact, cfg hfmodel.Config, info *onnx.Info) {
	out, hasLogits := info.Output("logits")
	if hasLogits && len(out.Dims) == 3 && !cfg.IsCrossEncoder() { // [batch, sequence, vocab]
		a.MaskedLM = true
		return
	}
	if !hasLogits && !cfg.IsCrossEncoder() {
		return
	}
	width := 0
	if hasLogits {
		width = int(max(out.Last(), 0))
	}
	a.Classifier = max(1, cfg.Labels(), width)
	if !hasLogits {
		a.ScoringErr = fmt.Errorf("config.json names %v but the graph has no logits output (outputs: %v)", cfg.Architectures, info.Outputs)
		return
	}
	sc, err := cfg.Scoring(width)
	if err != nil {
		a.ScoringErr = err
		return
	}
	a.Scoring = sc.String()
}

// onnxName is the model directory's name, and the graph's when it is a variant.
func onnxName(f hfmodel.Files) string {
	name := filepath.Base(f.Root)
	if g := filepath.Base(f.Graph); g != hfmodel.DefaultGraph {
		name += "/" + strings.TrimSuffix(g, filepath.Ext(g))
	}
	return name
}

// tokenizerMaxLength is tokenizer.json's truncation length, else 512: the
// context of an ONNX model without config.json.
// graphContext is the context of a graph whose config.json does not state
// one: a BERT-style graph's position table (the model's own limit: a bare
// export's tokenizer.json may truncate shorter), else tokenizer.json's
// truncation, else 512.
func graphContext(info *onnx.Info, tokenizer string) int {
	if _, bert := info.Input("token_type_ids"); bert && info.Positions > 0 {
		return int(info.Positions)
	}
	return tokenizerMaxLength(tokenizer)
}

func tokenizerMaxLength(path string) int {
	var j struct {
		Truncation *struct {
			MaxLength int `json:"max_length"`
		} `json:"truncation"`
	}
	if b, err := readlimit.ReadFile(path, readlimit.Tokenizer); err == nil && json.Unmarshal(b, &j) == nil && j.Truncation != nil && j.Truncation.MaxLength > 0 {
		return j.Truncation.MaxLength
	}
	return 512
}
