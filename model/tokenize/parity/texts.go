// Package parity checks that the module's Go tokenizers give the ids
// llama.cpp's own tokenizer gives, as the workers run it, and supplies the
// texts those checks and the tokenizer benchmarks use.
package parity

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"unicode/utf8"
)

// Corpus reads up to n documents (n < 0: all) of a BEIR corpus.jsonl as
// title + "\n" + text.
func Corpus(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var docs []string
	for line := 1; sc.Scan() && (n < 0 || len(docs) < n); line++ {
		var d struct{ Title, Text string }
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			return nil, fmt.Errorf("parity: %s:%d: %w", path, line, err)
		}
		docs = append(docs, d.Title+"\n"+d.Text)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parity: %s: %w", path, err)
	}
	return docs, nil
}

// Splits cuts each text in two at a random byte (which may fall inside a
// UTF-8 sequence and leave invalid bytes at the cut) and in two at a random
// rune boundary, and returns the four pieces of every text in order.
func Splits(r *rand.Rand, texts []string) []string {
	out := make([]string, 0, 4*len(texts))
	for _, t := range texts {
		b := r.IntN(len(t) + 1)
		out = append(out, t[:b], t[b:])
		runes := utf8.RuneCountInString(t)
		k, cut := r.IntN(runes+1), 0
		for i := 0; i < k; i++ {
			_, size := utf8.DecodeRuneInString(t[cut:])
			cut += size
		}
		out = append(out, t[:cut], t[cut:])
	}
	return out
}

// A Generator writes random text that stresses tokenizers: accents (composed
// and decomposed), combining marks, CJK, emoji with ZWJ sequences, control
// and format characters, long runs of one character, mixed scripts,
// whitespace variants, invalid UTF-8 bytes, code, numbers and contractions,
// any code point, and (when Specials is set) the text of special tokens.
// It never writes a NUL byte, which the llama.cpp engine refuses.
type Generator struct {
	R        *rand.Rand
	Specials []string // special-token texts to splice in ("<s>", "[CLS]")
}

// segment writes one kind of text.
type segment func(g *Generator, b *strings.Builder)

// segments are the kinds of text a generated text mixes; Text picks among
// them uniformly.
var segments = []segment{
	(*Generator).ascii, (*Generator).accents, (*Generator).combining, (*Generator).cjk,
	(*Generator).emoji, (*Generator).control, (*Generator).run, (*Generator).scripts,
	(*Generator).whitespace, (*Generator).invalid, (*Generator).code, (*Generator).anyRune,
	(*Generator).special,
}

// Text returns a text of 1 to 12 segments.
func (g *Generator) Text() string {
	var b strings.Builder
	for n := 1 + g.R.IntN(12); n > 0; n-- {
		segments[g.R.IntN(len(segments))](g, &b)
		if g.R.IntN(3) == 0 {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// Texts returns n texts.
func (g *Generator) Texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = g.Text()
	}
	return out
}

func (g *Generator) pick(s []string) string { return s[g.R.IntN(len(s))] }

// runeIn returns a rune in [lo, hi].
func (g *Generator) runeIn(lo, hi rune) rune { return lo + g.R.Int32N(hi-lo+1) }

var words = []string{"the", "The", "THE", "hello", "World", "token", "ization", "a", "I", "x", "naïve",
	"don't", "I'm", "you're", "we'll", "they've", "it's", "O'Neil", "''", "'s", "'LL", "it’s",
	"1", "12", "123", "1234", "12345678901", "3.14159", "1,000,000", "0x1F", "2024-01-31", "v1.2.3",
	"e-mail", "U.S.A.", "...", "?!", "—", "“quoted”", "(paren)", "[bracket]", "{brace}", "#tag", "@user",
	"http://example.com/a?b=c", "snake_case", "camelCase", "ALLCAPS", "Mixed123Case"}

func (g *Generator) ascii(b *strings.Builder) {
	for n := 1 + g.R.IntN(8); n > 0; n-- {
		b.WriteString(g.pick(words))
		b.WriteString(g.pick([]string{" ", " ", " ", "", ", ", ". ", "\n", "  "}))
	}
}

var accented = []string{"à", "á", "â", "ã", "ä", "å", "æ", "ç", "è", "é", "ê", "ë", "ì", "í", "î", "ï",
	"ñ", "ò", "ó", "ô", "õ", "ö", "ø", "ù", "ú", "û", "ü", "ý", "ÿ", "À", "É", "Î", "Õ", "Ü", "ß", "œ",
	"Œ", "ǅ", "ﬁ", "Å", "İ", "ı", "ẞ", "Ω", "K", "e\u0301", "a\u0308", "n\u0303", "A\u030a", "o\u0302\u0323",
	"café", "cafe\u0301", "résumé", "Ångström", "façade", "Straße", "İstanbul"}

func (g *Generator) accents(b *strings.Builder) {
	for n := 1 + g.R.IntN(10); n > 0; n-- {
		b.WriteString(g.pick(accented))
		if g.R.IntN(4) == 0 {
			b.WriteByte(' ')
		}
	}
}

func (g *Generator) combining(b *strings.Builder) {
	if g.R.IntN(4) == 0 { // a mark with nothing to combine with
		b.WriteRune(g.runeIn(0x300, 0x36f))
	}
	for n := 1 + g.R.IntN(4); n > 0; n-- {
		b.WriteRune(g.pick2('a', 'z', 0x3b1, 0x3c9))
		for k := 1 + g.R.IntN(6); k > 0; k-- {
			switch g.R.IntN(3) {
			case 0:
				b.WriteRune(g.runeIn(0x20d0, 0x20ff))
			default:
				b.WriteRune(g.runeIn(0x300, 0x36f))
			}
		}
	}
}

// pick2 returns a rune from one of two ranges.
func (g *Generator) pick2(lo1, hi1, lo2, hi2 rune) rune {
	if g.R.IntN(2) == 0 {
		return g.runeIn(lo1, hi1)
	}
	return g.runeIn(lo2, hi2)
}

var cjkRanges = [][2]rune{{0x4e00, 0x9fff}, {0x3040, 0x309f}, {0x30a0, 0x30ff}, {0xac00, 0xd7a3},
	{0x3000, 0x303f}, {0xff01, 0xff5e}, {0x3400, 0x4dbf}, {0x20000, 0x2a6df}}

func (g *Generator) cjk(b *strings.Builder) {
	for n := 1 + g.R.IntN(16); n > 0; n-- {
		rg := cjkRanges[g.R.IntN(len(cjkRanges))]
		b.WriteRune(g.runeIn(rg[0], rg[1]))
	}
}

var emojis = []string{"😀", "👍", "👍🏽", "❤️", "❤", "🇺🇸", "🇫🇷🇩🇪", "1️⃣", "#️⃣", "👨‍👩‍👧‍👦", "👩🏽‍💻",
	"🏳️‍🌈", "🧑‍🤝‍🧑", "🐈‍⬛", "👁️‍🗨️", "☺", "☺️", "✌🏿", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "\u200d", "\ufe0f", "🫠"}

func (g *Generator) emoji(b *strings.Builder) {
	for n := 1 + g.R.IntN(6); n > 0; n-- {
		if g.R.IntN(3) == 0 {
			b.WriteRune(g.runeIn(0x1f300, 0x1faff))
		} else {
			b.WriteString(g.pick(emojis))
		}
	}
}

// controls are control and format characters other than NUL.
var controls = [][2]rune{{0x01, 0x08}, {0x0e, 0x1f}, {0x7f, 0x9f}, {0x200e, 0x200f}, {0x202a, 0x202e},
	{0x2060, 0x2064}, {0x2066, 0x2069}, {0xad, 0xad}, {0x61c, 0x61c}, {0xfff9, 0xfffb}, {0xe0001, 0xe0001}}

func (g *Generator) control(b *strings.Builder) {
	for n := 1 + g.R.IntN(4); n > 0; n-- {
		rg := controls[g.R.IntN(len(controls))]
		b.WriteRune(g.runeIn(rg[0], rg[1]))
		if g.R.IntN(2) == 0 {
			b.WriteString(g.pick(words))
		}
	}
}

var runChars = []string{"a", "A", " ", "\n", "\t", "!", "=", "-", "_", "0", "9", ".", "中", "😀", "é",
	"\u0301", "\u00a0", "\u3000", "\r\n", "ab", "<", "/", "*", "#"}

func (g *Generator) run(b *strings.Builder) {
	b.WriteString(strings.Repeat(g.pick(runChars), 2+g.R.IntN(299)))
}

var scriptWords = []string{"Привет", "мир", "Ёлка", "Καλημέρα", "κόσμε", "مرحبا", "بالعالم", "שלום",
	"עולם", "नमस्ते", "दुनिया", "สวัสดีชาวโลก", "გამარჯობა", "Բարեւ", "வணக்கம்", "ሰላም", "ᚠᚢᚦ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
	"𝟙𝟚𝟛", "Ⅻ", "①②", "ﷺ", "ǈ", "ꙮ"}

var scriptRanges = [][2]rune{{0x400, 0x4ff}, {0x370, 0x3ff}, {0x600, 0x6ff}, {0x590, 0x5ff},
	{0x900, 0x97f}, {0xe00, 0xe7f}, {0x10a0, 0x10ff}, {0x1d400, 0x1d7ff}, {0x1e00, 0x1eff}}

func (g *Generator) scripts(b *strings.Builder) {
	for n := 1 + g.R.IntN(6); n > 0; n-- {
		if g.R.IntN(2) == 0 {
			b.WriteString(g.pick(scriptWords))
		} else {
			rg := scriptRanges[g.R.IntN(len(scriptRanges))]
			for k := 1 + g.R.IntN(6); k > 0; k-- {
				b.WriteRune(g.runeIn(rg[0], rg[1]))
			}
		}
		b.WriteString(g.pick([]string{" ", "", "-", "a", "1", "\u200c", "\u200d"}))
	}
}

var spaces = []string{" ", "  ", "\t", "\n", "\n\n", "\r\n", "\r", "\v", "\f", "\u0085", "\u00a0",
	"\u1680", "\u2000", "\u2003", "\u2009", "\u200a", "\u200b", "\u2028", "\u2029", "\u202f", "\u205f",
	"\u3000", "\ufeff", "\u180e", " \n ", "\t\t"}

func (g *Generator) whitespace(b *strings.Builder) {
	for n := 1 + g.R.IntN(8); n > 0; n-- {
		b.WriteString(g.pick(spaces))
		if g.R.IntN(3) == 0 {
			b.WriteString(g.pick(words))
		}
	}
}

// invalidBytes are byte strings that are not UTF-8: stray continuation
// bytes, bytes that never occur, truncated and overlong sequences,
// surrogates, and code points above U+10FFFF.
var invalidBytes = []string{"\x80", "\xbf", "\xc0", "\xc1\xbf", "\xf5", "\xf8\x88\x80\x80\x80", "\xfe", "\xff",
	"\xc3", "\xe2\x82", "\xf0\x9f\x98", "\xed\xa0\x80", "\xed\xbf\xbf", "\xc0\xaf", "\xe0\x80\xaf",
	"\xf4\x90\x80\x80", "\xe2\x28\xa1", "\xf0\x28\x8c\x28"}

func (g *Generator) invalid(b *strings.Builder) {
	for n := 1 + g.R.IntN(3); n > 0; n-- {
		b.WriteString(g.pick(invalidBytes))
		if g.R.IntN(2) == 0 {
			b.WriteString(g.pick(words))
		}
	}
}

var code = []string{"func main() {\n\tfmt.Println(\"hi\")\n}\n", "    x = [1, 2, 3]  # comment\n",
	"if (a && b || !c) { return -1; }", "def f(x):\n    return x**2\n", "<div class=\"a\">&amp;</div>",
	"SELECT * FROM t WHERE id=42;", "#include <stdio.h>", "a+=1;b-=2;c*=3", "::", "=>", "!==", "//",
	"/* c */", "```go\n", "\\n\\t", "$HOME/.cache", "C:\\Users\\x", "x_1,y_2", "0.5e-10", "0b1010"}

func (g *Generator) code(b *strings.Builder) {
	for n := 1 + g.R.IntN(3); n > 0; n-- {
		b.WriteString(g.pick(code))
	}
}

// anyRune writes random valid code points of every plane, assigned or not,
// private use and noncharacters included (not NUL, not surrogates).
func (g *Generator) anyRune(b *strings.Builder) {
	for n := 1 + g.R.IntN(8); n > 0; n-- {
		var r rune
		switch g.R.IntN(4) {
		case 0:
			r = g.runeIn(1, 0x7ff)
		case 1:
			r = g.runeIn(0x800, 0xffff)
		default:
			r = g.runeIn(0x10000, 0x10ffff)
		}
		if r >= 0xd800 && r <= 0xdfff {
			r = 0xfffd
		}
		b.WriteRune(r)
	}
}

// special writes a special token's text, sometimes with spaces around it
// (which LSTRIP/RSTRIP tokens swallow) or glued to a word.
func (g *Generator) special(b *strings.Builder) {
	if len(g.Specials) == 0 {
		b.WriteString(g.pick(words))
		return
	}
	b.WriteString(g.pick([]string{"", " ", "  ", "\n", "a"}))
	b.WriteString(g.pick(g.Specials))
	b.WriteString(g.pick([]string{"", " ", "  ", "\n", "b"}))
}
