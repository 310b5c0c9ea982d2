package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/modelcache"
)

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:         "inspect",
		Usage:        "show a model's architecture, tokenizer, size and digest (a GGUF file, or an ONNX model directory or .onnx file)",
		ArgsUsage:    "MODEL.gguf | ONNX_DIR | MODEL.onnx (or a cached model's name or digest prefix, or a Hugging Face id ORG/NAME[@REVISION] pulled or in the Hugging Face cache)",
		Description:  "Full reference: docs/commands.md.",
		OnUsageError: flagUsageError,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of text"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("inspect: want one model argument (MODEL.gguf, an ONNX model directory or MODEL.onnx), got %d", c.NArg())
			}
			return inspect(c.App.Writer, c.Args().First(), c.Bool("json"))
		},
	}
}

// modelInfo is what inspect reports; it is also the --json schema.
type modelInfo struct {
	Path         string `json:"path"`
	FileSize     int64  `json:"file_size"`
	Digest       string `json:"digest"` // sha256:<hex> of the whole file
	GGUFVersion  uint32 `json:"gguf_version"`
	Name         string `json:"name,omitempty"`
	Architecture string `json:"architecture"`
	FileType     *int64 `json:"file_type"` // general.file_type (llama_ftype), null when absent
	FileTypeName string `json:"file_type_name,omitempty"`
	// Route says how synapse runs a model converted from a safetensors
	// directory (a decoder embedder: GGUF for llama.cpp); empty otherwise.
	Route string `json:"route,omitempty"`

	EmbeddingLength uint64 `json:"embedding_length"`
	Layers          uint64 `json:"layers"`
	Heads           uint64 `json:"heads"`
	HeadsKV         uint64 `json:"heads_kv,omitempty"`
	ContextLength   uint64 `json:"context_length"`
	Pooling         string `json:"pooling,omitempty"` // none, mean, cls, last, rank; empty when absent
	// A reranker's classifier: its label names ({arch}.classifier.output_labels,
	// absent for llama.cpp's one unnamed output) and how synapse rerank
	// scores its outputs (hfmodel.LabelScoring), or why it cannot.
	ClassifierLabels []string `json:"classifier_labels,omitempty"`
	Scoring          string   `json:"scoring,omitempty"`
	ScoringError     string   `json:"scoring_error,omitempty"`

	Tokenizer tokenizerInfo `json:"tokenizer"`

	Tensors    int    `json:"tensors"`
	Parameters uint64 `json:"parameters"`
}

type tokenizerInfo struct {
	Model     string         `json:"model"`         // tokenizer.ggml.model
	Pre       string         `json:"pre,omitempty"` // tokenizer.ggml.pre
	VocabSize int            `json:"vocab_size"`
	Special   []specialToken `json:"special_tokens"`
	// The add_*_token flags; null when the file does not set them (llama.cpp
	// then uses its default for the tokenizer model).
	AddBOS *bool `json:"add_bos"`
	AddEOS *bool `json:"add_eos"`
	AddSEP *bool `json:"add_sep"`
}

type specialToken struct {
	Role string `json:"role"` // bos, eos, unknown, seperator, padding, cls, mask, …
	ID   int64  `json:"id"`
	Text string `json:"text"` // empty when the id is outside the vocabulary
}

// inspect describes the model at path (a GGUF file or an ONNX model) on w,
// as aligned text or JSON.
func inspect(w io.Writer, path string, asJSON bool) error {
	if isStaticModel(path) {
		info, err := describeStatic(path)
		return report(w, info, err, asJSON, printStaticInfo)
	}
	onnx := isONNXModel(path)
	if p, err := artifact.Resolve(path, artifact.Options{AllowDegraded: true}); err == nil {
		onnx = isONNXModel(p) // a hub id's snapshot, a cached ONNX model; a directory converted to GGUF is not
	}
	if onnx {
		info, err := describeONNX(path)
		return report(w, info, err, asJSON, printONNXInfo)
	}
	info, err := describeModel(path)
	return report(w, info, err, asJSON, printModelInfo)
}

// report writes what inspect found, as JSON or by print, or the error that
// stopped it: a model synapse cannot use is the user's (exit 2).
func report[I any](w io.Writer, info I, err error, asJSON bool, print func(io.Writer, I) error) error {
	if artifact.Unusable(err) {
		return usageError{fmt.Errorf("inspect: %w", err)}
	}
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	return print(w, info)
}

// describeModel reads the metadata of the model ref names (a file, or a
// cached model's name or digest prefix) and its digest (hashed, unless the
// model cache knows it).
func describeModel(ref string) (*modelInfo, error) {
	path, err := artifact.Resolve(ref, artifact.Options{AllowDegraded: true}) // inspecting runs nothing
	if err != nil {
		return nil, err
	}
	f, err := artifact.ReadGGUF(path)
	if err != nil {
		return nil, err // names the path
	}
	size, digest, err := artifact.Digest(path, artifact.Options{})
	if err != nil {
		return nil, err
	}
	arch := f.Architecture()
	info := &modelInfo{Path: path, FileSize: size, Digest: digest, GGUFVersion: f.Version, Architecture: arch, Tensors: len(f.Tensors)}
	info.Name, _ = f.String("general.name")
	if ft, ok := f.FileType(); ok {
		n := int64(ft)
		info.FileType, info.FileTypeName = &n, ft.LlamaName()
	}
	info.EmbeddingLength, _ = f.Uint(arch + ".embedding_length")
	info.Layers, _ = f.Uint(arch + ".block_count")
	info.Heads, _ = f.Uint(arch + ".attention.head_count")
	if kv, ok := f.Uint(arch + ".attention.head_count_kv"); ok && kv != info.Heads {
		info.HeadsKV = kv
	}
	info.ContextLength, _ = f.Uint(arch + ".context_length")
	if p, ok := f.Uint(arch + ".pooling_type"); ok {
		info.Pooling = modelgen.Pooling(p).String()
	}
	for _, t := range f.Tensors {
		info.Parameters += t.Elements()
	}
	labels, hasLabels := f.Strings(arch + ".classifier.output_labels")
	if _, ok := f.Tensor("cls.output.weight"); ok || hasLabels {
		info.ClassifierLabels = labels
		if sc, err := hfmodel.LabelScoring(labels); err != nil {
			info.ScoringError = err.Error()
		} else {
			info.Scoring = sc.String()
		}
	}
	info.Tokenizer = describeTokenizer(f)
	if e, ok := modelcache.EntryFor(path); ok && e.ConvertedFrom != "" {
		info.Route = fmt.Sprintf("converted from %s (safetensors) to GGUF, run by llama.cpp", e.SourcePath)
	}
	return info, nil
}

func describeTokenizer(f *gguf.File) tokenizerInfo {
	var t tokenizerInfo
	t.Model, _ = f.String("tokenizer.ggml.model")
	t.Pre, _ = f.String("tokenizer.ggml.pre")
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	t.VocabSize = len(toks)
	for _, kv := range f.KV {
		role, ok := strings.CutPrefix(kv.Key, "tokenizer.ggml.")
		if role, ok = strings.CutSuffix(role, "_token_id"); !ok {
			continue
		}
		id, ok := f.Int(kv.Key)
		if !ok {
			continue
		}
		st := specialToken{Role: role, ID: id}
		if id >= 0 && id < int64(len(toks)) {
			st.Text = toks[id]
		}
		t.Special = append(t.Special, st)
	}
	sort.SliceStable(t.Special, func(i, j int) bool { return t.Special[i].ID < t.Special[j].ID })
	for key, dst := range map[string]**bool{"add_bos_token": &t.AddBOS, "add_eos_token": &t.AddEOS, "add_sep_token": &t.AddSEP} {
		if b, ok := f.Bool("tokenizer.ggml." + key); ok {
			*dst = &b
		}
	}
	return t
}

// printModelInfo writes info as two aligned columns.
func printModelInfo(w io.Writer, info *modelInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("file", "%s", info.Path)
	row("size", "%s (%d bytes)", humanBytes(info.FileSize), info.FileSize)
	row("digest", "%s", info.Digest)
	row("gguf version", "%d", info.GGUFVersion)
	row("name", "%s", orNone(info.Name))
	row("architecture", "%s", orNone(info.Architecture))
	if info.Route != "" {
		row("route", "%s", info.Route)
	}
	if info.FileType != nil {
		row("file type", "%d (%s)", *info.FileType, orNone(info.FileTypeName))
	}
	row("embedding width", "%d", info.EmbeddingLength)
	row("layers", "%d", info.Layers)
	if info.HeadsKV != 0 {
		row("attention heads", "%d (%d key/value)", info.Heads, info.HeadsKV)
	} else {
		row("attention heads", "%d", info.Heads)
	}
	row("context length", "%d", info.ContextLength)
	row("pooling", "%s", orNone(info.Pooling))
	if info.Scoring != "" || info.ScoringError != "" {
		row("labels", "%s", orNone(strings.Join(info.ClassifierLabels, ", ")))
		if info.ScoringError != "" {
			row("score", "cannot rerank: %s", info.ScoringError)
		} else {
			row("score", "%s", info.Scoring)
		}
	}
	t := info.Tokenizer
	row("tokenizer", "%s", orNone(t.Model))
	row("pre-tokenizer", "%s", orNone(t.Pre))
	row("vocabulary", "%d tokens", t.VocabSize)
	for i, s := range t.Special {
		k := ""
		if i == 0 {
			k = "special tokens"
		}
		row(k, "%-10s %6d  %q", s.Role, s.ID, s.Text)
	}
	if len(t.Special) == 0 {
		row("special tokens", "(none)")
	}
	row("add bos/eos/sep", "%s / %s / %s", flag(t.AddBOS), flag(t.AddEOS), flag(t.AddSEP))
	row("tensors", "%d", info.Tensors)
	row("parameters", "%d (%s)", info.Parameters, humanCount(info.Parameters))
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func flag(b *bool) string {
	if b == nil {
		return "unset"
	}
	return fmt.Sprint(*b)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func humanCount(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
