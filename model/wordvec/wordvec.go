// Package wordvec learns word vectors from a corpus and builds from them an
// embedding model that llama.cpp runs unchanged: a real, if simple, model
// for the demo and the examples, where no pretrained weights can be had.
//
// The vectors are the classic count-based ones (Levy, Goldberg and Dagan,
// "Improving Distributional Similarity with Lessons Learned from Word
// Embeddings", TACL 2015): co-occurrence counts of the corpus's tokens within
// a window, weighted by distance, turned into positive pointwise mutual
// information with context-distribution smoothing (α = 0.75), and factored by
// a truncated eigendecomposition of that symmetric matrix (a randomized range
// finder, Halko, Martinsson and Tropp 2011), each token's vector being its
// row of U·|Λ|^½. Tokens are the model's own WordPiece tokens, so every token
// a text can produce, word pieces included, has a vector.
//
// Model places them in a one-layer BERT whose attention and feed-forward
// outputs are zero and whose position and token-type embeddings are zero, so
// that every layer passes a token's embedding through (its layer norms see an
// already normalised vector). Each embedding row carries the token's unit
// vector scaled by its smooth inverse frequency weight a/(a+p) (Arora, Liang
// and Ma, "A Simple but Tough-to-Beat Baseline for Sentence Embeddings", ICLR
// 2017) in the content dimensions, and the rest of its unit length in two
// sink dimensions (+s, −s) that the last layer norm's weight zeroes: the mean
// pooling llama.cpp applies then averages SIF-weighted word vectors.
package wordvec

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"
)

// Config sets how vectors are learned. Zero fields take the defaults.
type Config struct {
	Dims      int     // content dimensions (default 126; the model is Dims+2 wide)
	Window    int     // tokens on each side counted as context (default 5)
	MinCount  int     // a word enters the vocabulary when seen this often (default 2)
	MaxWords  int     // most frequent words kept in the vocabulary (default 30,000)
	Smoothing float64 // context-distribution smoothing exponent (default 0.75)
	SIF       float64 // the a of the weight a/(a+p) (default 1e-3)
	Seed      uint64  // seed of the randomized range finder
}

// Defaults of Config.
const (
	DefaultDims      = 126
	DefaultWindow    = 5
	DefaultMinCount  = 2
	DefaultMaxWords  = 30000
	DefaultSmoothing = 0.75
	DefaultSIF       = 1e-3
)

func (c Config) withDefaults() Config {
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	set(&c.Dims, DefaultDims)
	set(&c.Window, DefaultWindow)
	set(&c.MinCount, DefaultMinCount)
	set(&c.MaxWords, DefaultMaxWords)
	if c.Smoothing == 0 {
		c.Smoothing = DefaultSmoothing
	}
	if c.SIF == 0 {
		c.SIF = DefaultSIF
	}
	return c
}

// ErrConfig reports a configuration or corpus vectors cannot be learned from.
var ErrConfig = errors.New("wordvec")

// Words returns the vocabulary words of texts: lower-cased runs of letters
// and digits seen at least minCount times, the maxWords most frequent ones,
// most frequent first (ties in byte order).
func Words(texts []string, minCount, maxWords int) []string {
	counts := map[string]int{}
	for _, t := range texts {
		for _, w := range strings.FieldsFunc(strings.ToLower(t), notWordRune) {
			counts[w]++
		}
	}
	words := make([]string, 0, len(counts))
	for w, n := range counts {
		if n >= minCount {
			words = append(words, w)
		}
	}
	sort.Slice(words, func(i, j int) bool {
		if counts[words[i]] != counts[words[j]] {
			return counts[words[i]] > counts[words[j]]
		}
		return words[i] < words[j]
	})
	if len(words) > maxWords {
		words = words[:maxWords]
	}
	return words
}

func notWordRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// Vectors are learned token vectors.
type Vectors struct {
	// Unit holds one vector per token id: zero-sum, unit length, or all
	// zeros for a token that never occurred with a context.
	Unit [][]float32
	// Weight is each token's SIF weight a/(a+p), p its relative frequency in
	// the corpus; 0 for special and unseen tokens.
	Weight []float32
	// Tokens is the number of tokens counted, Pairs the distinct
	// co-occurring token pairs.
	Tokens, Pairs int
}

// Learn learns vectors for a vocabulary of vocabSize tokens from seqs, the
// corpus's texts as token ids (without special tokens). skip lists token ids
// that get no vector and weight 0 (the special tokens).
func Learn(seqs [][]int32, vocabSize int, skip []int32, cfg Config) (*Vectors, error) {
	cfg = cfg.withDefaults()
	if cfg.Dims < 1 || cfg.Window < 1 {
		return nil, fmt.Errorf("%w: dims %d and window %d must be positive", ErrConfig, cfg.Dims, cfg.Window)
	}
	skipped := make([]bool, vocabSize)
	for _, id := range skip {
		if id >= 0 && int(id) < vocabSize {
			skipped[id] = true
		}
	}
	counts := cooccurrences(seqs, vocabSize, skipped, cfg.Window)
	if counts.tokens == 0 {
		return nil, fmt.Errorf("%w: the corpus has no tokens to learn from", ErrConfig)
	}
	if rank := counts.activeTokens(); cfg.Dims+2 > rank {
		return nil, fmt.Errorf("%w: %d dimensions need more than the %d distinct tokens the corpus has (use fewer dimensions or a larger corpus)", ErrConfig, cfg.Dims, rank)
	}
	a := counts.ppmi(cfg.Smoothing)
	vecs := topEigen(a, cfg.Dims, cfg.Seed)
	v := &Vectors{Unit: vecs, Weight: make([]float32, vocabSize), Tokens: counts.tokens, Pairs: counts.pairs}
	for id := range v.Unit {
		if skipped[id] || !centreAndNormalize(v.Unit[id]) {
			clear(v.Unit[id])
			continue
		}
		p := float64(counts.unigram[id]) / float64(counts.tokens)
		v.Weight[id] = float32(cfg.SIF / (cfg.SIF + p))
	}
	return v, nil
}

// centreAndNormalize makes v zero-sum and unit length; false when nothing
// is left of it.
func centreAndNormalize(v []float32) bool {
	var mean float64
	for _, x := range v {
		mean += float64(x)
	}
	mean /= float64(len(v))
	var ss float64
	for i := range v {
		v[i] -= float32(mean)
		ss += float64(v[i]) * float64(v[i])
	}
	if ss < 1e-20 || math.IsNaN(ss) {
		return false
	}
	inv := float32(1 / math.Sqrt(ss))
	for i := range v {
		v[i] *= inv
	}
	return true
}
