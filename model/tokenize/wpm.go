package tokenize

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// BERT WordPiece (llama.cpp's LLAMA_VOCAB_TYPE_WPM, GGUF model "bert").
//
// llama.cpp's llm_tokenizer_wpm_session: the fragment is decoded into code
// points; with strip_accents each becomes the first code point of its NFD
// form and accent marks (\p{M}) are dropped. Whitespace separates words; NUL,
// U+FFFD and control characters are dropped; punctuation, ASCII symbols and
// CJK ideographs are words of their own. Each code point is lowercased
// (unless the vocabulary keeps case). Each word, prefixed with U+2581 (the
// GGUF converter's mark of a word start; continuation pieces carry no "##"),
// is covered greedily by the longest vocabulary tokens from the left; if some
// position matches no token the whole word becomes UNK.

// wpmPrefix marks a word start in WPM vocabularies converted to GGUF.
const wpmPrefix = "\u2581"

// wpmFragmenter is the WPM tokenizer for one vocabulary. It is immutable
// after construction; per-call buffers come from a pool.
type wpmFragmenter struct {
	ids       map[string]int32
	maxLen    int
	unk       int32
	lowercase bool
	strip     bool
	table     *cptTable
	pool      sync.Pool // *wpmScratch
}

type wpmScratch struct {
	word     []byte  // "▁" + the normalized word
	charOf   []int32 // for each byte of word past the prefix, its character
	srcStart []int32 // per character: byte span of its source code point
	srcEnd   []int32
}

// newWPMFragmenter builds the WPM tokenizer for v.
func newWPMFragmenter(v *Vocab) (fragmenter, error) {
	if v.UNK < 0 || int(v.UNK) >= len(v.Tokens) {
		return nil, fmt.Errorf("wpm: unknown token %d is not in the vocabulary", v.UNK)
	}
	f := &wpmFragmenter{
		ids:       make(map[string]int32, len(v.Tokens)),
		unk:       v.UNK,
		lowercase: !v.KeepCase,
		strip:     !v.KeepAccents,
		table:     unicodeFlags(),
	}
	for id, t := range v.Tokens {
		if _, dup := f.ids[t]; !dup {
			f.ids[t] = int32(id)
		}
		f.maxLen = max(f.maxLen, len(t))
	}
	f.pool.New = func() any { return &wpmScratch{} }
	return f, nil
}

func (f *wpmFragmenter) appendTokens(out []Token, frag string, off int, _ bool) []Token {
	s := f.pool.Get().(*wpmScratch)
	s.reset()
	for i := 0; i < len(frag); {
		c, n := rune(frag[i]), 1
		if c >= 0x80 {
			c, n = decodeRune(frag, i)
		}
		start := i
		i += n
		if f.strip {
			c = nfdFirst(c)
		}
		fl := f.table.of(c)
		if fl&flagWhitespace != 0 {
			out = f.flush(out, s, off)
			continue
		}
		if c == 0 || c == utf8.RuneError || fl&flagControl != 0 || f.strip && fl&flagMark != 0 {
			continue
		}
		if f.lowercase {
			c = toLower(c)
		}
		alone := fl&flagPunctuation != 0 || c < 0x7F && fl&flagSymbol != 0 || isChineseChar(c)
		if alone {
			out = f.flush(out, s, off)
		}
		s.addChar(c, start, i)
		if alone {
			out = f.flush(out, s, off)
		}
	}
	out = f.flush(out, s, off)
	f.pool.Put(s)
	return out
}

func (s *wpmScratch) reset() {
	s.word = append(s.word[:0], wpmPrefix...)
	s.charOf, s.srcStart, s.srcEnd = s.charOf[:0], s.srcStart[:0], s.srcEnd[:0]
}

func (s *wpmScratch) addChar(c rune, start, end int) {
	n := len(s.word)
	s.word = utf8.AppendRune(s.word, c)
	ci := int32(len(s.srcStart))
	for ; n < len(s.word); n++ {
		s.charOf = append(s.charOf, ci)
	}
	s.srcStart = append(s.srcStart, int32(start))
	s.srcEnd = append(s.srcEnd, int32(end))
}

// flush tokenizes the word collected in s, if any, and starts a new one.
func (f *wpmFragmenter) flush(out []Token, s *wpmScratch, off int) []Token {
	if len(s.srcStart) == 0 {
		return out
	}
	w := s.word
	n := len(w)
	mark := len(out)
	for i := 0; i < n; {
		j := min(n, i+f.maxLen+1)
		for ; j > i; j-- {
			if j < n && !utf8.RuneStart(w[j]) {
				continue // tokens are whole characters
			}
			if id, ok := f.ids[string(w[i:j])]; ok {
				out = append(out, Token{ID: id, Start: int32(off + s.span(i, true)), End: int32(off + s.span(j, false))})
				break
			}
		}
		if j == i { // no token at i: the whole word is unknown
			out = append(out[:mark], Token{ID: f.unk, Start: int32(off + s.span(0, true)), End: int32(off + s.span(n, false))})
			break
		}
		i = j
	}
	s.reset()
	return out
}

// span maps a byte offset of the prefixed word to a byte offset of the
// fragment: the start of the character there (start) or the end of the
// character before it.
func (s *wpmScratch) span(b int, start bool) int {
	p := len(wpmPrefix)
	if b <= p {
		return int(s.srcStart[0])
	}
	if start {
		return int(s.srcStart[s.charOf[b-p]])
	}
	return int(s.srcEnd[s.charOf[b-1-p]])
}

// isChineseChar is llama.cpp's (and BERT's) CJK ideograph test.
func isChineseChar(c rune) bool {
	return c >= 0x4E00 && c <= 0x9FFF ||
		c >= 0x3400 && c <= 0x4DBF ||
		c >= 0x20000 && c <= 0x2A6DF ||
		c >= 0x2A700 && c <= 0x2B73F ||
		c >= 0x2B740 && c <= 0x2B81F ||
		c >= 0x2B920 && c <= 0x2CEAF || // 0x2B820 in Unicode; llama.cpp follows HF's 0x2B920
		c >= 0x0F900 && c <= 0x0FAFF ||
		c >= 0x2F800 && c <= 0x2FA1F
}
