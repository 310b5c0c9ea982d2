package parity

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// Each text's byte split and rune split rebuild it; the rune split leaves
// valid UTF-8 valid.
func TestSplits(t *testing.T) {
	texts := []string{"", "a", "héllo wörld", "中文 😀‍👩", "a\xffb"}
	pieces := Splits(rand.New(rand.NewPCG(1, 2)), texts)
	if len(pieces) != 4*len(texts) {
		t.Fatalf("got %d pieces; want %d", len(pieces), 4*len(texts))
	}
	for i, text := range texts {
		p := pieces[4*i : 4*i+4]
		if p[0]+p[1] != text || p[2]+p[3] != text {
			t.Errorf("%q: pieces %q do not rebuild it", text, p)
		}
		if utf8.ValidString(text) && (!utf8.ValidString(p[2]) || !utf8.ValidString(p[3])) {
			t.Errorf("%q: rune split %q, %q is not valid UTF-8", text, p[2], p[3])
		}
	}
}

// The generator is deterministic for a seed, never writes NUL, and over a
// few hundred texts writes invalid UTF-8, the special texts and runes
// beyond the BMP.
func TestGenerator(t *testing.T) {
	gen := func() []string {
		g := Generator{R: rand.New(rand.NewPCG(3, 4)), Specials: []string{"<|special|>"}}
		return g.Texts(300)
	}
	a, b := gen(), gen()
	var invalid, special, astral bool
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("text %d differs between runs with one seed: %q, %q", i, a[i], b[i])
		}
		if strings.IndexByte(a[i], 0) >= 0 {
			t.Errorf("text %d %q holds a NUL byte", i, a[i])
		}
		invalid = invalid || !utf8.ValidString(a[i])
		special = special || strings.Contains(a[i], "<|special|>")
		for _, r := range a[i] {
			astral = astral || r > 0xffff
		}
	}
	if !invalid || !special || !astral {
		t.Errorf("300 texts: invalid UTF-8 %t, special text %t, astral runes %t; want all true", invalid, special, astral)
	}
}
