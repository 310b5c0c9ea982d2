package tokenize

import (
	"slices"
	"strings"
	"testing"
)

const ugmTestVocab = "ggml-vocab-opus-mt-en-ugm.gguf"

func TestUGMConformance(t *testing.T) {
	spCheckConformance(t, ugmTestVocab, newUGMFragmenter)
}

func ugmTestFragmenter(t testing.TB, edit func(*Vocab)) (*Vocab, *ugmFragmenter) {
	t.Helper()
	v := spTestVocab(t, ugmTestVocab)
	if edit != nil {
		edit(v)
	}
	f, err := newUGMFragmenter(v)
	if err != nil {
		t.Fatal(err)
	}
	return v, f.(*ugmFragmenter)
}

// TestUGMNormalize checks the normalizer flags on text the nmt_nfkc
// charsmap leaves alone, and one character it rewrites.
func TestUGMNormalize(t *testing.T) {
	tests := []struct {
		name                          string
		prefix, merge, escape, suffix bool
		text, want                    string
	}{
		{"defaults", true, true, true, false, "  a  b ", "▁a▁b"},
		{"no merge", true, false, true, false, " a  b ", "▁▁a▁▁b▁"},
		{"no prefix", false, false, true, false, "a b", "a▁b"},
		{"merge without prefix", false, true, true, false, "a b", "▁a▁b"},
		{"no escape", true, true, false, false, "a  b", " a b"},
		{"suffix", true, false, true, true, "a b", "a▁b▁"},
		{"empty", true, true, true, false, "", ""},
		{"spaces only", true, true, true, false, "   ", ""},
		{"fullwidth A (NFKC)", true, true, true, false, "\uff21", "▁A"},
		{"invalid byte", true, true, true, false, "a\xffb", "▁a\ufffdb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, f := ugmTestFragmenter(t, func(v *Vocab) {
				v.AddSpacePrefix, v.RemoveExtraWhitespaces = tt.prefix, tt.merge
				v.EscapeWhitespaces, v.TreatWhitespaceAsSuffix = tt.escape, tt.suffix
			})
			s := new(ugmScratch)
			f.normalize(s, tt.text)
			if got := string(s.norm); got != tt.want {
				t.Errorf("normalize(%q): got %q; want %q", tt.text, got, tt.want)
			}
		})
	}
}

// TestUGMSpans checks that every token's span covers the text its piece was
// normalized from: for these inputs (no charsmap rewrites), the piece itself
// with "▁" read as a space and the inserted spaces left out.
func TestUGMSpans(t *testing.T) {
	v, f := ugmTestFragmenter(t, nil)
	tests := []struct {
		text string
		want []string // the span texts
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"  Hello   world  ", []string{"Hello", " world"}},
	}
	for _, tt := range tests {
		toks := f.appendTokens(nil, tt.text, 0, true)
		spCheckSpans(t, tt.text, 0, toks, len(v.Tokens))
		var got []string
		for _, tk := range toks {
			got = append(got, tt.text[tk.Start:tk.End])
		}
		// The merged runs of spaces before "world" belong to no token.
		for i := range got {
			got[i] = strings.TrimLeft(got[i], " ")
		}
		for i := range tt.want {
			tt.want[i] = strings.TrimLeft(tt.want[i], " ")
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q: got spans %q; want %q", tt.text, got, tt.want)
		}
	}
	for _, c := range spReadCases(t, ugmTestVocab) {
		for _, off := range []int{0, 5} {
			spCheckSpans(t, c.text, off, f.appendTokens(nil, c.text, off, false), len(v.Tokens))
		}
	}
}

// TestUGMPiecesRebuildNormalized checks that the token texts, joined,
// are the normalized text wherever no unknown token stands for some of it.
func TestUGMPiecesRebuildNormalized(t *testing.T) {
	v, f := ugmTestFragmenter(t, nil)
	texts := []string{"Hello World!", "  many   spaces  ", "ＡＢＣ fullwidth", "ﬁne ½ ①"}
	for _, c := range spReadCases(t, ugmTestVocab) {
		texts = append(texts, c.text)
	}
	checked := 0
	for _, text := range texts {
		s := new(ugmScratch)
		f.normalize(s, text)
		var b strings.Builder
		unk := false
		for _, tk := range f.appendTokens(nil, text, 0, true) {
			unk = unk || tk.ID == v.UNK
			b.WriteString(v.Tokens[tk.ID])
		}
		if unk {
			continue
		}
		checked++
		if got := b.String(); got != string(s.norm) {
			t.Errorf("%q: pieces join to %q; want the normalized %q", text, got, s.norm)
		}
	}
	if checked < len(texts)/2 {
		t.Errorf("only %d of %d texts had no unknown token", checked, len(texts))
	}
}

// TestUGMUnknownRun checks that a run of characters without tokens becomes
// one unknown token spanning all of them.
func TestUGMUnknownRun(t *testing.T) {
	v, f := ugmTestFragmenter(t, nil)
	text := "ok \U0001F999\U0001F99A ok"
	toks := f.appendTokens(nil, text, 0, true)
	spCheckSpans(t, text, 0, toks, len(v.Tokens))
	n := 0
	for _, tk := range toks {
		if tk.ID == v.UNK {
			n++
			if got := text[tk.Start:tk.End]; got != "\U0001F999\U0001F99A" {
				t.Errorf("unknown token spans %q; want both emoji", got)
			}
		}
	}
	if n != 1 {
		t.Errorf("%q: got %d unknown tokens in %v; want 1", text, n, toks)
	}
}

// TestUGMUserDefined checks that user-defined tokens score 0 (so win) and
// bypass the charsmap.
func TestUGMUserDefined(t *testing.T) {
	const user = "\uff21\uff22" // fullwidth "AB": NFKC would make it "AB"
	v, f := ugmTestFragmenter(t, func(v *Vocab) {
		v.Tokens = append(slices.Clone(v.Tokens), user)
		v.Scores = append(slices.Clone(v.Scores), -100)
		v.Attrs = append(slices.Clone(v.Attrs), TokenUserDefined)
	})
	id := int32(len(v.Tokens) - 1)
	toks := f.appendTokens(nil, "x"+user, 0, true)
	if len(toks) == 0 || toks[len(toks)-1].ID != id {
		t.Fatalf("got %v; want the user-defined token %d last", toks, id)
	}
	if last := toks[len(toks)-1]; last.Start != 1 || int(last.End) != 1+len(user) {
		t.Errorf("user-defined token span [%d,%d); want [1,%d)", last.Start, last.End, 1+len(user))
	}
}

func TestUGMNoUnknownToken(t *testing.T) {
	v := spTestVocab(t, ugmTestVocab)
	v.UNK = NoToken
	if _, err := newUGMFragmenter(v); err == nil {
		t.Error("newUGMFragmenter without an unknown token: got nil error; want one")
	}
}

func TestUGMBadCharsmap(t *testing.T) {
	for _, cm := range [][]byte{{1, 2}, {8, 0, 0, 0, 1, 2, 3, 4}, {0xff, 0xff, 0xff, 0xff, 0}} {
		v := spTestVocab(t, ugmTestVocab)
		v.PrecompiledCharsmap = cm
		if _, err := newUGMFragmenter(v); err == nil {
			t.Errorf("charsmap % x: got nil error; want one", cm)
		}
	}
}

func TestUGMTrie(t *testing.T) {
	keys := []spTrieKey{{"a", 1}, {"ab", 2}, {"abc", 3}, {"b", 4}, {"ab", 5}, {"", 6}}
	tr := newSPTrie(keys)
	lookup := func(s string) int32 {
		node := int32(0)
		for i := 0; i < len(s); i++ {
			if node = tr.child(node, s[i]); node < 0 {
				return -2
			}
		}
		return tr.value[node]
	}
	for s, want := range map[string]int32{"a": 1, "ab": 5, "abc": 3, "b": 4, "abd": -2, "c": -2, "": NoToken} {
		if got := lookup(s); got != want {
			t.Errorf("lookup(%q): got %d; want %d", s, got, want)
		}
	}
	for s, want := range map[string]int{"abx": 2, "abcd": 3, "x": 0, "": 0, "b": 1} {
		if got := tr.longestPath(s); got != want {
			t.Errorf("longestPath(%q): got %d; want %d", s, got, want)
		}
	}
}

// FuzzUGM: arbitrary bytes never panic, and give in-vocabulary ids with
// ordered spans inside the fragment.
func FuzzUGM(f *testing.F) {
	v, fr := ugmTestFragmenter(f, nil)
	f.Add("Hello world", true)              // plain words
	f.Add("   ", false)                     // spaces only: no tokens
	f.Add("", true)                         // empty fragment
	f.Add("\uff21\u00bd \u2460 ﬁ", true)    // charsmap rewrites (NFKC) to several bytes
	f.Add("\xff\xfe\x80 \xc3", true)        // invalid UTF-8 becomes U+FFFD
	f.Add("\U0001F999\U0001F99A x", false)  // a run of unknown characters
	f.Add("\u00a8 \u00b4 a\u0301", true)    // compatibility characters with spaces
	f.Add("\t\n\r\x00 mixed\u3000ws", true) // control characters and wide spaces
	f.Fuzz(func(t *testing.T, text string, first bool) {
		toks := fr.appendTokens(nil, text, 3, first)
		spCheckSpans(t, text, 3, toks, len(v.Tokens))
	})
}

// BenchmarkUGMScifact: go test ./tokenize -run '^$' -bench UGMScifact
func BenchmarkUGMScifact(b *testing.B) {
	_, f := ugmTestFragmenter(b, nil)
	spBench(b, f)
}
