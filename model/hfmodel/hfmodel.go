// Package hfmodel finds and reads the files of a Hugging Face style ONNX
// model directory that synapse needs besides the graph's weights: which
// .onnx file to run, config.json, tokenizer.json and the sentence-transformers
// modules (see Chain). The module (artifact) and the worker (engine) both use it,
// so that they agree on what a model directory means.
//
// Layouts accepted, with DIR the directory named (or the .onnx file's):
//
//	DIR/model.onnx                      the default graph
//	DIR/onnx/model.onnx                 the Hub's layout (Xenova, sentence-transformers)
//	DIR/model_quantized.onnx, …         a variant: name the .onnx file itself
//	DIR/tokenizer.json, DIR/config.json beside the graph or one level up (onnx/ layout)
//	DIR/modules.json, DIR/N_Module/…    sentence-transformers modules (see Chain)
//
// The digest of an ONNX artifact is the SHA-256 of the .onnx file's bytes
// ("sha256:<hex>"): the graph and its weights when they are stored inside it,
// as they are below 2 GiB. Weights kept in external data files are not
// covered.
package hfmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// DefaultGraph is the graph a directory resolves to.
const DefaultGraph = "model.onnx"

// ErrLayout marks a path that is not an ONNX model directory or file synapse
// can use: no .onnx file, several and none named, no tokenizer.json.
var ErrLayout = errors.New("not an ONNX model directory")

// Files are the paths of one model's files; the optional ones are "" when absent.
type Files struct {
	Root      string // the directory holding tokenizer.json (the model directory)
	Graph     string // the .onnx file
	Tokenizer string // tokenizer.json ("" when absent)
	Config    string // config.json (optional)
	// Chain is the sentence-transformers chain (modules.json, its modules'
	// configs, sentence_bert_config.json, prompts); zero when absent.
	Chain Chain
}

// IsONNX reports whether path names an ONNX model: a .onnx file, or a
// directory holding model.onnx, onnx/model.onnx or tokenizer.json.
func IsONNX(path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	if !st.IsDir() {
		return strings.EqualFold(filepath.Ext(path), ".onnx")
	}
	for _, rel := range []string{DefaultGraph, filepath.Join("onnx", DefaultGraph), "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(path, rel)); err == nil {
			return true
		}
	}
	return false
}

// Resolve finds the files of the model at path: a model directory (its
// model.onnx or onnx/model.onnx) or a .onnx file (a variant such as
// model_quantized.onnx). tokenizer.json and config.json are looked for
// beside the graph, then one level up. A missing tokenizer.json is not an
// error here (Files.Tokenizer is ""): the worker does not need it.
func Resolve(path string) (Files, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Files{}, fmt.Errorf("hfmodel: %w", err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return Files{}, fmt.Errorf("hfmodel: %w", err)
	}
	var f Files
	if st.IsDir() {
		if f.Graph, err = graphIn(abs); err != nil {
			return Files{}, err
		}
	} else {
		if !strings.EqualFold(filepath.Ext(abs), ".onnx") {
			return Files{}, fmt.Errorf("hfmodel: %s: %w: want a .onnx file or a model directory", path, ErrLayout)
		}
		f.Graph = abs
	}
	dir := filepath.Dir(f.Graph)
	f.Root = dir
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if exists(filepath.Join(d, "tokenizer.json")) {
			f.Root, f.Tokenizer = d, filepath.Join(d, "tokenizer.json")
			break
		}
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if exists(filepath.Join(d, "config.json")) {
			f.Config = filepath.Join(d, "config.json")
			break
		}
	}
	if f.Chain, err = ReadChain(f.Root); err != nil {
		return Files{}, err
	}
	return f, nil
}

// graphIn returns the graph of a model directory: model.onnx, else
// onnx/model.onnx, else the only .onnx file of either.
func graphIn(dir string) (string, error) {
	for _, rel := range []string{DefaultGraph, filepath.Join("onnx", DefaultGraph)} {
		if p := filepath.Join(dir, rel); exists(p) {
			return p, nil
		}
	}
	var found []string
	for _, d := range []string{dir, filepath.Join(dir, "onnx")} {
		m, _ := filepath.Glob(filepath.Join(d, "*.onnx"))
		found = append(found, m...)
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("hfmodel: %s: %w: no %s (nor any .onnx file) in it or in onnx/", dir, ErrLayout, DefaultGraph)
	case 1:
		return found[0], nil
	}
	sort.Strings(found)
	for i, p := range found {
		found[i], _ = filepath.Rel(dir, p)
	}
	return "", fmt.Errorf("hfmodel: %s: %w: no %s but %d variants (%s); name the one to use, e.g. %s",
		dir, ErrLayout, DefaultGraph, len(found), strings.Join(found, ", "), filepath.Join(dir, found[0]))
}

func exists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Digest returns the size of the .onnx file at path and its artifact digest,
// "sha256:<64 lowercase hex digits>" of its bytes.
func Digest(path string) (size int64, digest string, err error) {
	fh, err := readlimit.Open(path)
	if err != nil {
		return 0, "", fmt.Errorf("hfmodel: %w", err)
	}
	defer fh.Close()
	h := sha256.New()
	n, err := io.Copy(h, fh)
	if err != nil {
		return 0, "", fmt.Errorf("hfmodel: digest %s: %w", path, err)
	}
	return n, "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Config is what synapse reads from config.json; zero when absent.
type Config struct {
	ModelType             string            `json:"model_type"`
	Architectures         []string          `json:"architectures"`
	Name                  string            `json:"_name_or_path"`
	HiddenSize            int               `json:"hidden_size"`
	MaxPositionEmbeddings int               `json:"max_position_embeddings"`
	VocabSize             int               `json:"vocab_size"`
	TypeVocabSize         int               `json:"type_vocab_size"`
	PadTokenID            *int              `json:"pad_token_id"`
	ID2Label              map[string]string `json:"id2label"`
	NumLabels             int               `json:"num_labels"` // written by some exporters; transformers derives it from id2label
}

// ReadConfig reads config.json; "" reads nothing and returns the zero Config.
func ReadConfig(path string) (Config, error) {
	var c Config
	if path == "" {
		return c, nil
	}
	b, err := readlimit.ReadFile(path, readlimit.Config)
	if err != nil {
		return c, fmt.Errorf("hfmodel: %w", err)
	}
	if err := readlimit.UnmarshalJSON(b, &c); err != nil {
		return c, fmt.Errorf("hfmodel: %s: %w", path, err)
	}
	return c, nil
}

// positionOffset lists the model types whose position ids start past the
// padding id (fairseq's convention, kept by transformers' RoBERTa family):
// position padding_idx+1 is the first token's, so max_position_embeddings
// counts padding_idx+1 positions no token can use.
var positionOffset = map[string]bool{
	"roberta": true, "xlm-roberta": true, "xlm-roberta-xl": true, "camembert": true, "mpnet": true,
	"longformer": true, "data2vec-text": true, "ibert": true, "markuplm": true, "lilt": true,
}

// ContextLength is the number of tokens one sequence may hold, special tokens
// included: max_position_embeddings, less the positions the RoBERTa family
// reserves (pad_token_id + 1, so 514 → 512); 0 when config.json does not say.
func (c Config) ContextLength() int {
	n := c.MaxPositionEmbeddings
	if n <= 0 {
		return 0
	}
	if positionOffset[c.ModelType] {
		pad := 1
		if c.PadTokenID != nil {
			pad = *c.PadTokenID
		}
		n -= pad + 1
	}
	return max(n, 0)
}
