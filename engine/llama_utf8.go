package engine

import (
	"math"
	"unicode/utf8"

	"github.com/hybridgroup/yzma/pkg/llama"
)

// The generated text is valid UTF-8, always: a token whose bytes would
// break UTF-8 (a continuation byte without its lead, a lead byte where a
// continuation is due) is never sampled, and an incomplete last character
// is not returned. Without this, byte-fallback tokens can leave invalid
// bytes, which JSON would silently turn into U+FFFD on their way to the
// module, and which llama.cpp's grammar matching lets through (it reads a
// pending character's next byte without checking it is a continuation).

// pieces are the bytes each token of the vocabulary writes.
func (m *llamaModel) tokenPieces() [][]byte {
	if m.pieces != nil {
		return m.pieces
	}
	m.pieces = make([][]byte, m.nVocab)
	buf := make([]byte, 256)
	for t := range m.pieces {
		n := llama.TokenToPiece(m.vocab, llama.Token(t), buf, 0, false)
		if n > 0 {
			m.pieces[t] = append([]byte(nil), buf[:n]...)
		}
	}
	return m.pieces
}

// sampleValid samples the next token with the chain, among the tokens that
// keep the text valid UTF-8 after pending (the bytes of an unfinished last
// character); TokenNull when the chain allows none of them.
func (m *llamaModel) sampleValid(chain llama.Sampler, pending []byte) llama.Token {
	pieces := m.tokenPieces()
	logits, err := llama.GetLogitsIth(m.gen, -1, int(m.nVocab))
	if err != nil || len(logits) < len(pieces) {
		return llama.SamplerSample(chain, m.gen, -1)
	}
	if cap(m.cur) < len(pieces) {
		m.cur = make([]llama.TokenData, len(pieces))
	}
	cur := m.cur[:len(pieces)]
	inf := float32(math.Inf(-1))
	for t, p := range pieces {
		l := logits[t]
		if !validPrefix(pending, p) {
			l = inf
		}
		cur[t] = llama.TokenData{Id: llama.Token(t), Logit: l}
	}
	arr := llama.TokenDataArray{Data: &cur[0], Size: uint64(len(cur)), Selected: -1}
	llama.SamplerApply(chain, &arr)
	if arr.Selected < 0 || arr.Selected >= int64(len(cur)) || math.IsInf(float64(cur[arr.Selected].Logit), -1) {
		return llama.TokenNull
	}
	tok := cur[arr.Selected].Id
	llama.SamplerAccept(chain, tok)
	return tok
}

// validPrefix reports whether pending followed by piece is valid UTF-8 but
// for an unfinished last character.
func validPrefix(pending, piece []byte) bool {
	if len(pending) == 0 && utf8.Valid(piece) {
		return true
	}
	b := append(append(make([]byte, 0, len(pending)+len(piece)), pending...), piece...)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return !utf8.FullRune(b) && startsRune(b)
		}
		b = b[n:]
	}
	return true
}

// startsRune reports whether b (shorter than its character) can begin a
// valid UTF-8 character.
func startsRune(b []byte) bool {
	lo, hi := byte(0x80), byte(0xBF) // the second byte's range
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF, c >= 0xE1 && c <= 0xEC, c == 0xEE || c == 0xEF, c >= 0xF1 && c <= 0xF3:
	case c == 0xE0:
		lo = 0xA0
	case c == 0xED:
		hi = 0x9F
	case c == 0xF0:
		lo = 0x90
	case c == 0xF4:
		hi = 0x8F
	default:
		return false
	}
	for i, x := range b[1:] {
		if (i == 0 && (x < lo || x > hi)) || (i > 0 && (x < 0x80 || x > 0xBF)) {
			return false
		}
	}
	return true
}

// unfinished is the bytes of an unfinished last character of b ("" when b
// ends on a character boundary or is not valid UTF-8 before its end).
func unfinished(b []byte) []byte {
	for i := max(0, len(b)-3); i < len(b); i++ {
		if tail := b[i:]; !utf8.FullRune(tail) && startsRune(tail) && utf8.Valid(b[:i]) {
			return tail
		}
	}
	return nil
}
