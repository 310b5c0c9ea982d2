package wordvec

import (
	"bytes"
	"fmt"

	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// Report says what a model was learned from.
type Report struct {
	Texts, Words, VocabSize int
	Tokens, Pairs           int // tokens counted, distinct co-occurring pairs
	Dims                    int // content dimensions (the model is Dims+2 wide)
}

// Built is a model learned from a corpus.
type Built struct {
	Model     modelgen.BERT      // the pass-through BERT (Model)
	Vectors   *Vectors           // the learned vectors, by token id
	Tokenizer tokenize.Tokenizer // the model's tokenizer, as llama.cpp applies it
	Report
}

// Build learns a vocabulary and token vectors from texts and returns the
// model (Model) with what went into it.
func Build(texts []string, cfg Config, name string) (*Built, error) {
	cfg = cfg.withDefaults()
	words := Words(texts, cfg.MinCount, cfg.MaxWords)
	if len(words) == 0 {
		return nil, fmt.Errorf("%w: no word occurs %d times in the %d texts", ErrConfig, cfg.MinCount, len(texts))
	}
	vocab := modelgen.WordPieceVocab(words)
	tok, err := tokenizerOf(vocab)
	if err != nil {
		return nil, err
	}
	seqs := make([][]int32, len(texts))
	for i, t := range texts {
		seqs[i] = tok.Tokenize(t, tokenize.Options{}).IDs()
	}
	skip := []int32{modelgen.BertPAD, modelgen.BertUNK, modelgen.BertCLS, modelgen.BertSEP, modelgen.BertMASK}
	vecs, err := Learn(seqs, vocab.Size(), skip, cfg)
	if err != nil {
		return nil, err
	}
	m, err := Model(vocab, vecs, name)
	if err != nil {
		return nil, err
	}
	rep := Report{Texts: len(texts), Words: len(words), VocabSize: vocab.Size(), Tokens: vecs.Tokens, Pairs: vecs.Pairs, Dims: cfg.Dims}
	return &Built{Model: m, Vectors: vecs, Tokenizer: tok, Report: rep}, nil
}

// tokenizerOf returns synapse's tokenizer for a generated vocabulary: the
// one llama.cpp applies to the model (both read the same GGUF metadata).
func tokenizerOf(vocab modelgen.Vocab) (tokenize.Tokenizer, error) {
	shell := modelgen.BERT{Layers: 1, Width: 1, Heads: 1, FFN: 1, Context: 1, WeightType: gguf.GGMLTypeF32, Vocab: vocab}
	var buf bytes.Buffer
	if _, err := shell.WriteTo(&buf); err != nil {
		return nil, err
	}
	f, err := gguf.Read(&buf)
	if err != nil {
		return nil, err
	}
	v, err := tokenize.VocabFromGGUF(f)
	if err != nil {
		return nil, err
	}
	return tokenize.New(v)
}
