package artifact

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// FormatStatic is a static model's format (package wire): its embeddings
// file, served by the workers' Go engine.
const FormatStatic = "static"

// staticContext is a static model's context when its directory names no
// max_length: model2vec's default truncation. A static model has no
// position limit; the chunking cuts longer texts as for any model.
const staticContext = 512

// openStatic opens a static model directory (hfmodel.ReadStatic): LOAD
// names its safetensors file, the digest is that file's. Its tokenizer
// adds no special tokens, as model2vec and sentence-transformers'
// StaticEmbedding tokenize, and a Model2Vec model's leaves the unknown
// token out of the mean (PoolSkip).
func openStatic(dir string) (*Artifact, error) {
	s, err := hfmodel.ReadStatic(dir)
	if errors.Is(err, hfmodel.ErrModule) || errors.Is(err, hfmodel.ErrLayout) {
		return nil, fmt.Errorf("model %s: %w: %w", dir, ErrInvalid, err)
	}
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	tok, err := tokenize.LoadHF(s.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w: %w", dir, ErrInvalid, err)
	}
	if n := len(tok.Vocab().Tokens); n > s.Vocab {
		return nil, fmt.Errorf("model %s: %w: %s has %d tokens but %s covers %d", dir, ErrInvalid, s.Tokenizer, n, s.Weights, s.Vocab)
	}
	entry, cached := modelcache.EntryFor(s.Weights)
	size, digest := entry.Size, entry.Digest
	if !cached {
		if size, digest, err = hfmodel.Digest(s.Weights); err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
	}
	a := &Artifact{Path: s.Weights, Format: FormatStatic, Digest: digest, Size: size, Name: filepath.Base(filepath.Clean(dir)),
		Arch: s.Kind, Dims: s.Dims, ContextLength: staticContext, Pooling: "mean", Tokenizer: staticTokenizer(tok, s), Static: &s}
	if s.MaxLength > 0 {
		a.ContextLength = s.MaxLength
	}
	if cached {
		a.Entry, a.Name = &entry, entry.Name
	}
	return a, nil
}

// plainTokenizer is a static model's tokenizer: no special tokens. A
// Model2Vec model's unknown token stays in its tokens (model2vec truncates
// at max_length before it drops it) and PoolSkip leaves it out of the mean.
type plainTokenizer struct {
	tokenize.Tokenizer
	skip int32 // tokenize.NoToken for none
}

func staticTokenizer(t tokenize.Tokenizer, s hfmodel.Static) tokenize.Tokenizer {
	p := &plainTokenizer{Tokenizer: t, skip: tokenize.NoToken}
	if s.DropUnk {
		p.skip = t.Vocab().UNK
	}
	return p
}

// Tokenize tokenizes without special tokens.
func (p *plainTokenizer) Tokenize(text string, opt tokenize.Options) tokenize.Result {
	opt.AddSpecial = false
	return p.Tokenizer.Tokenize(text, opt)
}

// PoolSkip reports whether the model leaves token id out of a text's
// vector (Model2Vec's unknown token); the embedding job drops such ids
// from each chunk after cutting it.
func (p *plainTokenizer) PoolSkip(id int32) bool { return p.skip != tokenize.NoToken && id == p.skip }

// Affixes are none: a static model's texts have no special tokens.
func (p *plainTokenizer) Affixes() (prefix, suffix []int32) { return nil, nil }

// openStaticAs opens the static model r resolved ref to, named as the
// user named it (a hub id's snapshot directory is named for its commit).
func openStaticAs(r resolved) (*Artifact, error) {
	a, err := openStatic(r.path)
	if err == nil && r.name != "" && a.Entry == nil {
		a.Name = r.name
	}
	return a, err
}
