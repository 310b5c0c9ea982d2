// Package artifact opens the model a job names and tells the module what it
// needs from it without loading any weights: where the workers load it from,
// its format and digest, its tokenizer, its context size and architecture.
//
// Two formats resolve through Open: a GGUF file, and an ONNX model (a
// Hugging Face style directory or a .onnx file beside its tokenizer.json;
// see package hfmodel). A reference that is not a file is looked up in the
// model cache (package modelcache) by name or digest prefix, then as a
// Hugging Face hub id among pulled models and in the Hugging Face cache
// (package hub); see OpenWith.
// Jobs never look at a model's files themselves.
package artifact

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/convert"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/onnx"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/wire"
)

// Formats of an artifact, as LOAD's format field names them (package wire).
const (
	FormatGGUF = wire.FormatGGUF
	FormatONNX = wire.FormatONNX
)

// ErrInvalid marks a model that exists but cannot be used: not a model file,
// a damaged one, or a tokenizer the module does not support. Open's other
// errors are the file system's (fs.ErrNotExist, permissions, I/O).
var ErrInvalid = errors.New("not a usable model")

// Artifact is what the module knows of a model.
type Artifact struct {
	Path   string // what LOAD's artifact_path names: the GGUF file, or the ONNX graph (.onnx)
	Format string // FormatGGUF or FormatONNX
	Digest string // "sha256:<hex>" of that file, LOAD's artifact_digest
	Size   int64  // bytes of the artifact
	Name   string // general.name, else the file name; ONNX: the model directory's name (and the variant's)

	Arch          string // general.architecture ("bert", "llama", …); ONNX: config.json model_type
	Dims          int    // the width of its hidden states (embedding length)
	ContextLength int    // training context; 512 when the model does not say
	// Pooling is the model's own pooling ("mean", "cls", "last", "rank",
	// "none"), "" when it does not say.
	Pooling string
	// Classifier is the number of classifier outputs (rerankers), 0 for none.
	Classifier int
	// MaskedLM: the ONNX graph has a masked-LM's logits output [batch,
	// sequence, vocab], from which the workers give sparse vectors
	// (EMBED_SPARSE, embed --output sparse).
	MaskedLM bool
	// Scoring is how a cross-encoder's logits become a score
	// (hfmodel.Scoring: the ONNX graph's logits with config.json's labels, a
	// GGUF's classifier.output_labels), "" for embedders; ScoringErr says
	// why a cross-encoder cannot rerank (labels synapse cannot read as one
	// score, no logits output).
	Scoring    string
	ScoringErr error
	// ChatTemplate is the model's Jinja chat template, "" when it has none.
	ChatTemplate string

	Tokenizer tokenize.Tokenizer
	// GGUF is the file's header and metadata (nil for other formats).
	GGUF *gguf.File
	// Entry is the model cache's entry when the model is a cached one
	// (named by name, digest prefix or its path in a store), else nil.
	Entry *modelcache.Entry
	// ONNX is the graph's inputs, outputs and opsets (nil for other formats).
	ONNX *onnx.Info
	// Chain is an ONNX model directory's sentence-transformers modules,
	// max_seq_length and prompts (zero for other formats and plain
	// directories); see hfmodel.Chain.
	Chain hfmodel.Chain
	// Static is a static model directory's layout (nil for other formats).
	Static *hfmodel.Static
	// Converted says, when ref named a Hugging Face safetensors directory,
	// that it was converted into the model cache now or reused from there
	// (package convert); "" otherwise.
	Converted string
}

// Open reads the model ref names, with default Options: its metadata, its
// vocabulary and its digest. ref is a file, or a name or digest prefix in
// the default model cache.
func Open(ref string) (*Artifact, error) { return OpenWith(ref, Options{}) }

// OpenWith reads the model ref names: a file, or else a name or digest
// prefix in the model cache (o.Store), or else a Hugging Face hub id
// (ORG/NAME[@REVISION]) pulled into the model cache or in the Hugging Face
// cache (package hub).
func OpenWith(ref string, o Options) (*Artifact, error) {
	r, err := o.resolve(ref)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(r.path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if !st.IsDir() && !strings.EqualFold(filepath.Ext(r.path), ".onnx") {
		return openGGUF(r.path, r.digest)
	}
	if st.IsDir() && hfmodel.IsStatic(r.path) {
		return openStaticAs(r)
	}
	a, err := openONNX(r.path)
	if a != nil {
		a.Converted = r.converted
	}
	switch {
	case err == nil && r.given != "":
		a.Name = r.given // the weights' cache entry may bear the name of an earlier conversion
	case err == nil && r.name != "" && a.Entry == nil:
		a.Name = r.name // a hub id: its snapshot directory is named for the commit
	case err != nil && r.name != "" && errors.Is(err, hfmodel.ErrLayout):
		err = fmt.Errorf("%w; `synapse models pull %s --onnx` fetches its ONNX export, where the repository has one", err, r.name)
	}
	return a, err
}

func openGGUF(path string, digest digestFunc) (*Artifact, error) {
	f, err := ReadGGUF(path)
	if err != nil {
		return nil, err
	}
	if err := f.CheckBlocks(); err != nil {
		return nil, fmt.Errorf("model %s: %w: %w", path, ErrInvalid, err)
	}
	v, err := tokenize.VocabFromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w: %w", path, ErrInvalid, err)
	}
	tok, err := tokenize.New(v)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w: %w", path, ErrInvalid, err)
	}
	size, sum, err := digest(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	a := &Artifact{Path: path, Format: FormatGGUF, Digest: sum, Size: size, Name: filepath.Base(path),
		Arch: f.Architecture(), ContextLength: 512, Tokenizer: tok, GGUF: f}
	if e, ok := modelcache.EntryFor(path); ok {
		a.Entry, a.Name = &e, e.Name
		if err := convertedPrompts(a); err != nil {
			return nil, err
		}
	}
	if n, ok := f.String("general.name"); ok && n != "" && a.Entry == nil {
		a.Name = n
	}
	if n, ok := f.Uint(a.Arch + ".context_length"); ok && n > 0 {
		a.ContextLength = int(n)
	}
	if n, ok := f.Uint(a.Arch + ".embedding_length"); ok {
		a.Dims = int(n)
	}
	if p, ok := f.Uint(a.Arch + ".pooling_type"); ok {
		a.Pooling = poolingName(p)
	}
	labels, hasLabels := f.Strings(a.Arch + ".classifier.output_labels")
	if _, ok := f.Tensor("cls.output.weight"); ok || hasLabels {
		a.Classifier = max(1, len(labels)) // llama.cpp's n_cls_out: 1 unless the labels say
		sc, err := hfmodel.LabelScoring(labels)
		if err != nil {
			a.ScoringErr = err
		} else {
			a.Scoring = sc.String()
		}
	}
	a.ChatTemplate, _ = f.String("tokenizer.chat_template")
	return a, nil
}

// ReadGGUF reads a GGUF file's header and metadata; its errors are Open's.
func ReadGGUF(path string) (*gguf.File, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, classify(path, err)
	}
	return f, nil
}

// Unusable reports an error of Open or ReadGGUF that says the model named
// cannot be used as it is: it does not exist (no such file, no such cached
// name), may not be read, is not a usable model, is a degraded cached
// variant or one an earlier synapse quantized (ErrStaleVariant), the converter refuses its directory, the digest prefix naming it is ambiguous, one of its files is not
// a regular file (a FIFO, a device), or its path cannot
// name a file (a loop of symbolic links, a file used as a directory). Running again
// unchanged cannot succeed.
func Unusable(err error) bool {
	var ae *modelcache.AmbiguousError
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrInvalid) ||
		errors.Is(err, tokenize.ErrUnsupported) || errors.Is(err, ErrDegraded) || errors.Is(err, ErrStaleVariant) || errors.As(err, &ae) ||
		errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENAMETOOLONG) ||
		errors.Is(err, syscall.EISDIR) || errors.Is(err, modelcache.ErrNotFound) || errors.Is(err, modelcache.ErrBadName) ||
		errors.Is(err, readlimit.ErrNotRegular) || errors.Is(err, files.ErrUntrusted) || errors.As(err, new(*modelcache.CorruptError)) ||
		errors.Is(err, convert.ErrRefused)
}

// classify keeps file-system errors as they are and marks format errors.
func classify(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("model: %w", err)
	}
	return fmt.Errorf("model %s: %w: %w", path, ErrInvalid, err)
}

// poolingName names llama.cpp's pooling types (llama_pooling_type).
func poolingName(p uint64) string {
	switch p {
	case 0:
		return "none"
	case 1:
		return "mean"
	case 2:
		return "cls"
	case 3:
		return "last"
	case 4:
		return "rank"
	}
	return fmt.Sprintf("unknown (%d)", p)
}

// convertedPrompts reads the prompts of a GGUF file converted from a
// sentence-transformers directory (a decoder embedder: convert keeps its
// config_sentence_transformers.json beside the GGUF file), so that
// --prompt-name works as it does on the directory.
func convertedPrompts(a *Artifact) error {
	dir := filepath.Dir(a.Path)
	if _, err := os.Stat(filepath.Join(dir, "config_sentence_transformers.json")); err != nil {
		return nil
	}
	c, err := hfmodel.ReadChain(dir)
	if err != nil {
		return fmt.Errorf("model %s: %w: %w", a.Path, ErrInvalid, err)
	}
	a.Chain = c
	return nil
}
