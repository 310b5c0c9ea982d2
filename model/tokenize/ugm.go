package tokenize

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// SentencePiece Unigram (llama.cpp's LLAMA_VOCAB_TYPE_UGM, GGUF model "t5":
// T5, XLM-R and the embedders built on it such as bge-m3 and multilingual-e5).
//
// llama.cpp's llm_tokenizer_ugm_session normalizes each fragment first: at
// every position the longest user-defined-token path is copied verbatim,
// else the longest prefix in the precompiled charsmap is replaced, else one
// UTF-8 character is copied (an invalid byte becomes U+FFFD). Spaces in the
// result become "▁" (escape_whitespaces), runs of them collapse to one before
// each word when remove_extra_whitespaces is set, and add_space_prefix puts
// one "▁" before the first word (or after the text, with
// treat_whitespace_as_suffix). Unlike SPM, this prefix is added to every
// fragment, not only the first.
//
// Then a Viterbi pass moves over the normalized text one UTF-8 character at a
// time and, walking a trie of the normal, user-defined and unused tokens,
// scores every token starting there (user-defined tokens score 0); a
// character no single token covers may be an unknown token scored at the
// lowest normal score minus 10. The best path is read back from the end,
// consecutive unknown tokens becoming one.

// ugmUnknownPenalty is llama.cpp's unknown_token_score_penalty.
const ugmUnknownPenalty = 10.0

// ugmFragmenter is the UGM tokenizer for one vocabulary. It is immutable
// after construction; per-call buffers come from a pool.
type ugmFragmenter struct {
	tokens      *spTrie
	userDefined *spTrie // nil when the vocabulary has no user-defined tokens
	charsmap    *ugmCharsmap
	score       []float64 // per token id; user-defined tokens score 0
	unk         int32
	unkScore    float64

	space                            string // "▁", or " " without escape_whitespaces
	prependSpace, appendSpace, merge bool

	pool sync.Pool // *ugmScratch
}

// ugmChunk is the byte range of the fragment that produced some normalized
// bytes; inserted spaces have a chunk of zero width.
type ugmChunk struct{ start, end int32 }

// ugmBest is the best tokenization of the normalized text up to an offset:
// its last token and where that token starts.
type ugmBest struct {
	id    int32
	from  int32
	score float64
}

type ugmPiece struct {
	id       int32
	from, to int32 // normalized offsets
}

type ugmScratch struct {
	norm   []byte
	chunk  []int32 // per normalized byte, an index into chunks
	chunks []ugmChunk
	best   []ugmBest
	pieces []ugmPiece
}

var errNoUNK = errors.New("the vocabulary has no unknown token")

// newUGMFragmenter builds the UGM tokenizer for v.
func newUGMFragmenter(v *Vocab) (fragmenter, error) {
	if v.UNK < 0 || int(v.UNK) >= len(v.Tokens) {
		return nil, fmt.Errorf("ugm: %w (unknown_token_id %d)", errNoUNK, v.UNK)
	}
	if _, err := spTokenIndex(v); err != nil {
		return nil, fmt.Errorf("ugm: %w", err)
	}
	cm, err := newUGMCharsmap(v.PrecompiledCharsmap)
	if err != nil {
		return nil, fmt.Errorf("ugm: %w", err)
	}
	f := &ugmFragmenter{
		charsmap:     cm,
		score:        make([]float64, len(v.Tokens)),
		unk:          v.UNK,
		space:        " ",
		prependSpace: !v.TreatWhitespaceAsSuffix && v.AddSpacePrefix,
		appendSpace:  v.TreatWhitespaceAsSuffix && v.AddSpacePrefix,
		merge:        v.RemoveExtraWhitespaces,
	}
	if v.EscapeWhitespaces {
		f.space = spmSpace
	}
	minScore, keys, userKeys := f.collect(v)
	f.unkScore = float64(minScore - ugmUnknownPenalty) // float arithmetic, as llama.cpp
	f.tokens = newSPTrie(keys)
	if len(userKeys) > 0 {
		f.userDefined = newSPTrie(userKeys)
	}
	f.pool.New = func() any { return new(ugmScratch) }
	return f, nil
}

// collect scores the tokens and gathers the trie keys, returning the lowest
// normal token score.
func (f *ugmFragmenter) collect(v *Vocab) (minScore float32, keys, userKeys []spTrieKey) {
	minScore = math.MaxFloat32
	for i, text := range v.Tokens {
		attr := TokenNormal
		if v.Attrs != nil && i < len(v.Attrs) {
			attr = v.Attrs[i]
		}
		var s float32
		if i < len(v.Scores) {
			s = v.Scores[i]
		}
		f.score[i] = float64(s)
		switch attr {
		case TokenNormal:
			minScore = min(minScore, s)
		case TokenUserDefined:
			f.score[i] = 0
			userKeys = append(userKeys, spTrieKey{text, int32(i)})
		case TokenUnused:
		default:
			continue
		}
		keys = append(keys, spTrieKey{text, int32(i)})
	}
	return minScore, keys, userKeys
}

func (f *ugmFragmenter) appendTokens(out []Token, frag string, off int, first bool) []Token {
	s := f.pool.Get().(*ugmScratch)
	defer func() {
		if cap(s.norm) <= spKeepScratch {
			f.pool.Put(s)
		}
	}()
	f.normalize(s, frag)
	if len(s.norm) == 0 {
		return out
	}
	f.viterbi(s)
	return f.emit(out, s, off)
}

// normalize writes frag's normalized text to s.norm, with each byte's chunk.
func (f *ugmFragmenter) normalize(s *ugmScratch, frag string) {
	s.norm, s.chunk, s.chunks = s.norm[:0], s.chunk[:0], s.chunks[:0]
	spacePrepended, inWord := false, false
	for off := 0; off < len(frag); {
		repl, n := f.normalizePrefix(frag, off)
		c := ugmChunk{int32(off), int32(off + n)}
		for i := 0; i < len(repl); i++ {
			if b := repl[i]; b != ' ' {
				if !inWord {
					inWord = true
					if (f.prependSpace && !spacePrepended) || f.merge {
						s.add(f.space, ugmChunk{c.start, c.start})
						spacePrepended = true
					}
				}
				s.addByte(b, c)
			} else {
				inWord = false
				if !f.merge {
					s.add(f.space, c)
				}
			}
		}
		off += n
	}
	if f.appendSpace {
		s.add(f.space, ugmChunk{int32(len(frag)), int32(len(frag))})
	}
}

// add appends text produced by chunk c.
func (s *ugmScratch) add(text string, c ugmChunk) {
	for i := 0; i < len(text); i++ {
		s.addByte(text[i], c)
	}
}

func (s *ugmScratch) addByte(b byte, c ugmChunk) {
	if n := len(s.chunks); n == 0 || s.chunks[n-1] != c {
		s.chunks = append(s.chunks, c)
	}
	s.norm = append(s.norm, b)
	s.chunk = append(s.chunk, int32(len(s.chunks)-1))
}

// normalizePrefix is llama.cpp's normalize_prefix: the normalized form of the
// text at frag[off:] and how many bytes of frag it consumes.
func (f *ugmFragmenter) normalizePrefix(frag string, off int) (repl string, n int) {
	rest := frag[off:]
	if f.userDefined != nil {
		if n := f.userDefined.longestPath(rest); n > 0 {
			return rest[:n], n
		}
	}
	if r, n := f.charsmap.match(rest); n > 0 {
		return r, n
	}
	if n := spValidUTF8Len(rest); n > 0 {
		return rest[:n], n
	}
	return "\uFFFD", 1
}

// spValidUTF8Len is the length of the character at the start of s as
// llama.cpp's unicode_cpt_from_utf8 decodes it, or 0 where that throws. It
// checks only the lead and continuation bit patterns.
func spValidUTF8Len(s string) int {
	b := s[0]
	var n int
	switch {
	case b&0x80 == 0:
		return 1
	case b&0x40 == 0:
		return 0
	case b&0x20 == 0:
		n = 2
	case b&0x10 == 0:
		n = 3
	case b&0x08 == 0:
		n = 4
	default:
		return 0
	}
	if len(s) < n {
		return 0
	}
	for i := 1; i < n; i++ {
		if s[i]&0xC0 != 0x80 {
			return 0
		}
	}
	return n
}

// viterbi finds the best tokenization of s.norm and leaves its pieces, in
// order, in s.pieces.
func (f *ugmFragmenter) viterbi(s *ugmScratch) {
	norm := s.norm
	n := len(norm)
	s.best = s.best[:0]
	for i := 0; i <= n; i++ {
		s.best = append(s.best, ugmBest{id: f.unk, score: -math.MaxFloat64})
	}
	best := s.best
	best[0].score = 0
	for i := 0; i < n; {
		units := min(spUTF8Len(norm[i]), n-i)
		cur := best[i].score
		single := false
		node := f.tokens.child(0, norm[i])
		p := i + 1
		for node >= 0 {
			if id := f.tokens.value[node]; id != NoToken {
				if p-i == units {
					single = true
				}
				if sc := cur + f.score[id]; sc > best[p].score {
					best[p] = ugmBest{id: id, from: int32(i), score: sc}
				}
			}
			if p >= n {
				break
			}
			node = f.tokens.child(node, norm[p])
			p++
		}
		if !single {
			p = i + units
			if sc := cur + f.unkScore; sc > best[p].score {
				best[p] = ugmBest{id: f.unk, from: int32(i), score: sc}
			}
		}
		i += units
	}

	// Walk back from the end; a run of unknown tokens becomes one.
	s.pieces = s.pieces[:0]
	prevUnk := false
	for to := int32(n); ; {
		b := best[to]
		unk := b.id == f.unk
		if prevUnk && unk {
			s.pieces[len(s.pieces)-1].from = b.from
		} else {
			s.pieces = append(s.pieces, ugmPiece{id: b.id, from: b.from, to: to})
		}
		if b.from == 0 {
			break
		}
		prevUnk = unk
		to = b.from
	}
	for i, j := 0, len(s.pieces)-1; i < j; i, j = i+1, j-1 {
		s.pieces[i], s.pieces[j] = s.pieces[j], s.pieces[i]
	}
}

// emit appends the pieces with their spans in the whole text. A piece starts
// at its first byte's chunk start, or at that chunk's end when it begins
// inside a chunk (one character normalized to several tokens); it ends at its
// last byte's chunk end. Starts are clamped so spans never go backwards.
func (f *ugmFragmenter) emit(out []Token, s *ugmScratch, off int) []Token {
	prevEnd := int32(0)
	for _, p := range s.pieces {
		c := s.chunk[p.from]
		start := s.chunks[c].start
		if p.from > 0 && s.chunk[p.from-1] == c {
			start = s.chunks[c].end
		}
		end := s.chunks[s.chunk[p.to-1]].end
		start = max(start, prevEnd)
		end = max(end, start)
		prevEnd = end
		out = append(out, Token{ID: p.id, Start: int32(off + int(start)), End: int32(off + int(end))})
	}
	return out
}
