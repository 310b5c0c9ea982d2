package hfmodel

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/safetensors"
)

// A static model is a table of token embeddings: a text's vector is the
// mean of its tokens' rows. Two layouts hold one:
//
//	Model2Vec (potion-*, model2vec's save_pretrained):
//	DIR/config.json          {"normalize": true, "max_length": 512, …} (absent: false, 512)
//	DIR/model.safetensors    embeddings [vocab or rows, dims] (F32, F16 or I8),
//	                         optional weights [vocab] and mapping [vocab] (token id → row)
//	DIR/tokenizer.json
//	DIR/modules.json         optional: StaticEmbedding at ".", then Normalize
//
//	sentence-transformers StaticEmbedding (static-retrieval-mrl-en-v1):
//	DIR/modules.json         StaticEmbedding at P, then optionally Normalize
//	DIR/P/model.safetensors  embedding.weight [vocab, dims]
//	DIR/P/tokenizer.json
//
// Model2Vec's encode tokenizes without special tokens, drops the unknown
// token, truncates to max_length tokens, weighs each row by weights[id]
// and normalizes when config.json says so; sentence-transformers'
// StaticEmbedding tokenizes without special tokens and takes the plain mean
// of embedding.weight's rows (nn.EmbeddingBag), then applies a Normalize
// module when modules.json has one.

// Static kinds.
const (
	StaticModel2Vec  = "model2vec"
	StaticEmbeddings = "StaticEmbedding"
)

// Static tensor names.
const (
	TensorModel2Vec = "embeddings"       // model2vec's embeddings
	TensorStatic    = "embedding.weight" // sentence-transformers' nn.EmbeddingBag
	TensorWeights   = "weights"          // model2vec's per-token weights
	TensorMapping   = "mapping"          // model2vec's token id → embeddings row
)

// model2VecMaxLength is model2vec's max_length when config.json names none.
const model2VecMaxLength = 512

// Static describes a static model directory.
type Static struct {
	Kind      string // StaticModel2Vec or StaticEmbeddings
	Dir       string // the model directory
	Weights   string // the safetensors file holding the embeddings
	Tensor    string // the embeddings' tensor name
	Tokenizer string // tokenizer.json
	// Normalize: config.json's normalize (Model2Vec) or a Normalize module.
	Normalize bool
	// DropUnk: the unknown token is left out of the mean (Model2Vec).
	DropUnk bool
	// MaxLength is config.json's max_length (Model2Vec; 512 when absent,
	// model2vec's default; 0 when null: no truncation).
	MaxLength int
	// Rows and Dims are the embeddings' shape; Weighted and Mapped say
	// whether the file has weights and mapping tensors (Model2Vec).
	Rows, Dims       int
	DType            string // the embeddings' safetensors dtype (F32, F16, I8, …)
	Weighted, Mapped bool
	// Vocab is the number of token ids the file covers: the mapping's
	// length, else the embeddings' rows.
	Vocab int
}

// IsStatic reports whether dir is a static model directory (ReadStatic
// reads it): a model.safetensors with an embeddings tensor, or a
// modules.json whose first module is StaticEmbedding.
func IsStatic(dir string) bool {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return false
	}
	if mods, err := readModulesJSON(dir); err == nil && len(mods) > 0 && isStaticEmbedding(mods[0].Type) {
		return true
	}
	f, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return false
	}
	defer f.Close()
	_, ok := f.Tensors[TensorModel2Vec]
	return ok
}

// isStaticEmbedding reports whether a modules.json type is
// sentence-transformers' StaticEmbedding: sentence_transformers.models.StaticEmbedding
// (versions up to 5), ….sentence_transformer.modules.static_embedding.StaticEmbedding (6).
func isStaticEmbedding(typ string) bool {
	return kindOf(typ) == StaticEmbeddings ||
		strings.HasPrefix(typ, "sentence_transformers.") && strings.HasSuffix(typ, "."+StaticEmbeddings)
}

// ReadStatic reads a static model directory (IsStatic). A module after
// StaticEmbedding other than Normalize, a missing file or an embeddings
// tensor of another rank is ErrModule.
func ReadStatic(dir string) (Static, error) {
	s := Static{Dir: dir, Weights: filepath.Join(dir, "model.safetensors"), Tokenizer: filepath.Join(dir, "tokenizer.json")}
	mods, err := readModulesJSON(dir)
	if err != nil {
		return s, err
	}
	refuse := func(format string, args ...any) (Static, error) {
		return s, fmt.Errorf("hfmodel: %s: %w: %s", dir, ErrModule, fmt.Sprintf(format, args...))
	}
	if len(mods) > 0 {
		if !isStaticEmbedding(mods[0].Type) {
			return refuse("the first module is %s, not StaticEmbedding", mods[0].Type)
		}
		sub, err := moduleDir(dir, mods[0].Path)
		if err != nil {
			return refuse("module 0 (%s): %v", mods[0].Type, err)
		}
		s.Weights, s.Tokenizer = filepath.Join(sub, "model.safetensors"), filepath.Join(sub, "tokenizer.json")
		for i, m := range mods[1:] {
			if kindOf(m.Type) != ModNormalize {
				return refuse("module %d is %s; after StaticEmbedding synapse applies only Normalize", i+1, m.Type)
			}
			s.Normalize = true
		}
	}
	for _, p := range []string{s.Weights, s.Tokenizer} {
		if !exists(p) {
			return refuse("no %s", p)
		}
	}
	if err := s.readTensors(); err != nil {
		return s, err
	}
	if s.Kind == StaticModel2Vec {
		s.MaxLength = model2VecMaxLength
		if p := filepath.Join(s.Dir, "config.json"); exists(p) {
			return s, s.readModel2VecConfig(p)
		}
	}
	return s, nil
}

// readTensors finds the embeddings tensor and checks the shapes of the
// others against it.
func (s *Static) readTensors() error {
	f, err := safetensors.Open(s.Weights)
	if err != nil {
		return fmt.Errorf("hfmodel: %w: %w", ErrModule, err)
	}
	defer f.Close()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("hfmodel: %s: %w: %s", s.Weights, ErrModule, fmt.Sprintf(format, args...))
	}
	_, st := f.Tensors[TensorStatic]
	_, m2v := f.Tensors[TensorModel2Vec]
	switch {
	case st:
		s.Kind, s.Tensor = StaticEmbeddings, TensorStatic
	case m2v: // only model2vec writes "embeddings"; its engine applies weights and mapping, when there are
		s.Kind, s.Tensor, s.DropUnk = StaticModel2Vec, TensorModel2Vec, true
	default:
		return bad("no %s or %s tensor (tensors: %v)", TensorStatic, TensorModel2Vec, f.Names())
	}
	t := f.Tensors[s.Tensor]
	if len(t.Shape) != 2 || t.Shape[0] == 0 || t.Shape[1] == 0 {
		return bad("tensor %s has shape %v; want [rows, dims]", s.Tensor, t.Shape)
	}
	s.Rows, s.Dims, s.DType, s.Vocab = int(t.Shape[0]), int(t.Shape[1]), t.DType, int(t.Shape[0])
	if s.Kind != StaticModel2Vec {
		return nil
	}
	w, hasW := f.Tensors[TensorWeights]
	m, hasM := f.Tensors[TensorMapping]
	if hasW && len(w.Shape) != 1 {
		return bad("tensor %s has shape %v; want [vocab]", TensorWeights, w.Shape)
	}
	if hasM && len(m.Shape) != 1 {
		return bad("tensor %s has shape %v; want [vocab]", TensorMapping, m.Shape)
	}
	s.Weighted, s.Mapped = hasW, hasM
	s.Vocab = s.Rows
	if hasM {
		s.Vocab = int(m.Shape[0])
	}
	if hasW && int(w.Shape[0]) != s.Vocab {
		return bad("%d weights for %d tokens (the %s)", w.Shape[0], s.Vocab, map[bool]string{true: "mapping's length", false: "embeddings' rows"}[hasM])
	}
	return nil
}

// readModel2VecConfig reads config.json's normalize and max_length.
func (s *Static) readModel2VecConfig(path string) error {
	b, err := readlimit.ReadFile(path, readlimit.Config)
	if err != nil {
		return fmt.Errorf("hfmodel: %w", err)
	}
	var c struct {
		Normalize *bool           `json:"normalize"`
		MaxLength json.RawMessage `json:"max_length"` // absent: empty; null: "null"
	}
	if err := readlimit.UnmarshalJSON(b, &c); err != nil {
		return fmt.Errorf("hfmodel: %s: %w", path, err)
	}
	s.Normalize = c.Normalize != nil && *c.Normalize // model2vec's default is false, whatever modules.json says
	switch {
	case len(c.MaxLength) == 0:
	case string(c.MaxLength) == "null":
		s.MaxLength = 0
	default:
		var n int
		if err := json.Unmarshal(c.MaxLength, &n); err != nil || n <= 0 {
			return fmt.Errorf("hfmodel: %s: %w: max_length %s is not a positive integer", path, ErrModule, c.MaxLength)
		}
		s.MaxLength = n
	}
	return nil
}
