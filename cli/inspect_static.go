package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/hfmodel"
)

// staticModelInfo is what inspect shows of a static model directory
// (Model2Vec, sentence-transformers' StaticEmbedding).
type staticModelInfo struct {
	Format        string `json:"format"` // "static"
	Path          string `json:"path"`
	Weights       string `json:"weights"` // the safetensors file LOAD names
	FileSize      int64  `json:"file_size"`
	Digest        string `json:"digest"`
	Name          string `json:"name"`
	Architecture  string `json:"architecture"` // model2vec or StaticEmbedding
	Route         string `json:"route"`
	Dims          int    `json:"dims"`
	Rows          int    `json:"rows"`
	DType         string `json:"dtype"`
	Weighted      bool   `json:"weights_per_token"`
	Mapped        bool   `json:"token_mapping"`
	Normalize     bool   `json:"normalize"` // what the model's config or Normalize module asks
	DropUnknown   bool   `json:"drops_unknown_token"`
	ContextLength int    `json:"context_length"`
	Pooling       string `json:"pooling"`

	Tokenizer onnxTokenizerInfo `json:"tokenizer"`
}

// staticRoute says how synapse runs a static model.
const staticRoute = "static engine (Go, in the workers): mean of the token embeddings, no special tokens, no ONNX Runtime or llama.cpp"

// isStaticModel reports whether inspect should read ref as a static model
// directory (a path, or a hub id or cached name resolving to one).
func isStaticModel(ref string) bool {
	if hfmodel.IsStatic(ref) {
		return true
	}
	p, err := artifact.Resolve(ref, artifact.Options{AllowDegraded: true})
	return err == nil && hfmodel.IsStatic(p)
}

// describeStatic reads a static model as the module would (artifact.Open).
func describeStatic(ref string) (*staticModelInfo, error) {
	a, err := artifact.Open(ref)
	if err != nil {
		return nil, err
	}
	s := a.Static
	if s == nil {
		return nil, fmt.Errorf("model %s: %w: not a static model directory", ref, artifact.ErrInvalid)
	}
	info := &staticModelInfo{Format: artifact.FormatStatic, Path: ref, Weights: a.Path, FileSize: a.Size, Digest: a.Digest, Name: a.Name,
		Architecture: a.Arch, Route: staticRoute, Dims: s.Dims, Rows: s.Rows, DType: s.DType, Weighted: s.Weighted, Mapped: s.Mapped,
		Normalize: s.Normalize, DropUnknown: s.DropUnk, ContextLength: a.ContextLength, Pooling: a.Pooling}
	info.Tokenizer = describeHFTokenizer(a)
	info.Tokenizer.File = s.Tokenizer
	return info, nil
}

func printStaticInfo(w io.Writer, info *staticModelInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("format", "static (%s)", info.Route)
	row("model", "%s", info.Path)
	row("weights", "%s", info.Weights)
	row("size", "%s (%d bytes)", humanBytes(info.FileSize), info.FileSize)
	row("digest", "%s (the embeddings file)", info.Digest)
	row("name", "%s", orNone(info.Name))
	row("architecture", "%s", info.Architecture)
	row("kind", "embedder (synapse embed)")
	row("dims", "%d", info.Dims)
	var extra []string
	if info.Weighted {
		extra = append(extra, "per-token weights")
	}
	if info.Mapped {
		extra = append(extra, "a token → row mapping")
	}
	row("embeddings", "%d rows of %s%s", info.Rows, info.DType, map[bool]string{true: ", with " + strings.Join(extra, " and ")}[len(extra) > 0])
	pool := "mean of the token rows, no special tokens"
	if info.DropUnknown {
		pool += ", the unknown token left out"
	}
	row("pooling", "%s", pool)
	row("normalize", "%t (the model's; synapse embed normalizes unless --no-normalize)", info.Normalize)
	row("context", "%d tokens a chunk", info.ContextLength)
	row("tokenizer", "%s, %d tokens (%s)", info.Tokenizer.Model, info.Tokenizer.VocabSize, info.Tokenizer.File)
	return tw.Flush()
}
