package tokenize

import (
	"testing"
	"unicode/utf8"
)

// FuzzTokenize feeds arbitrary bytes to every vocabulary in vocabDir (all
// kinds), with and without special tokens: no panic, ids in the vocabulary,
// Result.Text valid UTF-8 with the replacements counted, spans ordered and
// within Result.Text.
func FuzzTokenize(f *testing.F) {
	seeds := []string{
		"",                                   // nothing
		"Hello world",                        // plain ASCII
		"   \t\n\r\n  x  ",                   // whitespace runs (the \s+(?!\S) rules)
		"I'm you'RE it's 'll",                // contractions, both cases
		"1234567 3.14 ٣٤٥",                   // digit grouping, non-ASCII digits
		"Café naïve 中文 한국어 🦙",                // accents, CJK, Hangul, emoji
		"a\xffb\xe2\x82\xc0\x80\xed\xa0\x80", // invalid UTF-8 of every kind
		"<|endoftext|>[CLS]<s></s>[MASK]",    // special-token text
		"x<|endoftext|<|endoftext|>>y",       // overlapping special-token text
		"\u00a0\u3000\u2028\u0085",           // non-ASCII whitespace
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", // a long word
		"\u0301\u0301x\u200b\u0000", // marks, format and NUL characters
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	toks := fuzzTokenizers(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := string(data)
		for _, tok := range toks {
			n := int32(len(tok.Vocab().Tokens))
			for _, opt := range []Options{{}, {AddSpecial: true, ParseSpecial: true}} {
				res := tok.Tokenize(in, opt)
				if !utf8.ValidString(res.Text) {
					t.Fatalf("%s: Text %q is not valid UTF-8", tok.Vocab().Model, res.Text)
				}
				if want := len(res.Text) - len(in); want != 2*res.Replaced {
					t.Fatalf("%s: %d replacements for %d added bytes", tok.Vocab().Model, res.Replaced, want)
				}
				prev := 0
				for _, tk := range res.Tokens {
					if tk.ID < 0 || tk.ID >= n {
						t.Fatalf("%s: %q: id %d outside [0,%d)", tok.Vocab().Model, in, tk.ID, n)
					}
					if int(tk.Start) < prev || tk.End < tk.Start || int(tk.End) > len(res.Text) {
						t.Fatalf("%s: %q: span [%d,%d) after %d, text length %d", tok.Vocab().Model, in, tk.Start, tk.End, prev, len(res.Text))
					}
					prev = int(tk.End)
				}
			}
		}
	})
}
