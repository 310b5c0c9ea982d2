package tokenize

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/gguf"
)

// spanTexts returns texts for the span tests: the vocabulary's test cases and
// the first SciFact abstracts.
func spanTexts(t *testing.T, name string, docs int) []string {
	t.Helper()
	texts, _ := readCases(t, name)
	return append(texts, scifactDocs(t, docs)...)
}

// scifactDocs returns the first n SciFact documents (title + "\n" + text),
// all of them for n < 0.
func scifactDocs(t testing.TB, n int) []string {
	t.Helper()
	f, err := os.Open(testenv.Fixture(t, "corpora", "scifact", "corpus.jsonl"))
	if err != nil {
		testenv.MissingFixture(t, "scifact corpus: %v", err)
	}
	defer f.Close()
	var docs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() && (n < 0 || len(docs) < n) {
		var d struct{ Title, Text string }
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d.Title+"\n"+d.Text)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return docs
}

// checkSpans checks what holds for every kind: spans lie in Result.Text, do
// not overlap and come in order; added tokens are empty spans at the ends.
func checkSpans(t *testing.T, tok Tokenizer, res Result) {
	t.Helper()
	prev := 0
	for i, tk := range res.Tokens {
		if int(tk.Start) < prev || tk.End < tk.Start || int(tk.End) > len(res.Text) {
			t.Fatalf("%q: token %d (id %d) span [%d,%d) after %d; want ordered spans within [0,%d]", res.Text, i, tk.ID, tk.Start, tk.End, prev, len(res.Text))
		}
		if tk.ID < 0 || int(tk.ID) >= len(tok.Vocab().Tokens) {
			t.Fatalf("%q: token %d id %d outside the vocabulary", res.Text, i, tk.ID)
		}
		prev = int(tk.End)
	}
}

func TestSpansBPE(t *testing.T) {
	names, toks := supportedVocabs(t)
	for i, name := range names {
		tok := toks[i]
		if tok.Vocab().Kind != KindBPE {
			continue
		}
		_, dec := byteEncoding()
		t.Run(name, func(t *testing.T) {
			for _, text := range spanTexts(t, name, 50) {
				res := tok.Tokenize(text, Options{})
				checkSpans(t, tok, res)
				var joined strings.Builder
				for _, tk := range res.Tokens {
					piece := res.Text[tk.Start:tk.End]
					joined.WriteString(piece)
					want := tok.Vocab().Tokens[tk.ID]
					if raw, ok := decodeByteLevel(want, dec); ok && tok.Vocab().Attrs[tk.ID] == TokenNormal {
						want = raw
					}
					if piece != want {
						t.Fatalf("%q: token %d %q covers %q", text, tk.ID, want, piece)
					}
				}
				if joined.String() != res.Text {
					t.Fatalf("spans of %q join to %q; want the whole text", res.Text, joined.String())
				}
			}
		})
	}
}

// wpmNormalize is what WPM makes of a piece of text it kept.
func wpmNormalize(s string) string {
	tab := unicodeFlags()
	var b strings.Builder
	for _, c := range s {
		c = nfdFirst(c)
		f := tab.of(c)
		if f&(flagWhitespace|flagControl|flagMark) != 0 || c == 0 || c == utf8.RuneError {
			continue
		}
		b.WriteRune(toLower(c))
	}
	return b.String()
}

func TestSpansWPM(t *testing.T) {
	name := "ggml-vocab-bert-bge.gguf"
	tok := loadVocabFile(t, name)
	v := tok.Vocab()
	for _, text := range spanTexts(t, name, 200) {
		res := tok.Tokenize(text, Options{})
		checkSpans(t, tok, res)
		prev := 0
		for _, tk := range res.Tokens {
			if gap := wpmNormalize(res.Text[prev:tk.Start]); gap != "" {
				t.Fatalf("%q: text %q before token %d is not covered", text, gap, tk.ID)
			}
			prev = int(tk.End)
			if tk.ID == v.UNK {
				continue
			}
			if got, want := wpmNormalize(res.Text[tk.Start:tk.End]), strings.TrimPrefix(v.Tokens[tk.ID], wpmPrefix); got != want {
				t.Fatalf("%q: token %d %q covers %q (normalized %q)", text, tk.ID, v.Tokens[tk.ID], res.Text[tk.Start:tk.End], got)
			}
		}
		if gap := wpmNormalize(res.Text[prev:]); gap != "" {
			t.Fatalf("%q: trailing text %q not covered", text, gap)
		}
	}
}

func TestWPM(t *testing.T) {
	tok := loadVocabFile(t, "ggml-vocab-bert-bge.gguf")
	v := tok.Vocab()
	ids := func(words ...string) []int32 {
		var out []int32
		for _, w := range words {
			found := false
			for i, tt := range v.Tokens {
				if tt == w {
					out = append(out, int32(i))
					found = true
					break
				}
			}
			if !found {
				t.Fatalf("token %q not in the vocabulary", w)
			}
		}
		return out
	}
	cases := []struct {
		text string
		want []int32
	}{
		{"Hello, World!", ids("▁hello", "▁,", "▁world", "▁!")},
		{"Café  naïve", ids("▁cafe", "▁naive")},  // accents stripped, case folded
		{"a\u0000b\u200bc", ids("▁abc")},         // NUL and format characters dropped
		{"中文", ids("▁中", "▁文")},                  // each CJK ideograph a word
		{"unaffable", ids("▁una", "ffa", "ble")}, // greedy longest match
		{"\U0001F600x", []int32{v.UNK}},          // a word with an unmatched character is UNK
		{"$5", ids("▁$", "▁5")},                  // ASCII symbols split
	}
	for _, c := range cases {
		if got := tok.Tokenize(c.text, Options{}).IDs(); !slices.Equal(got, c.want) {
			t.Errorf("Tokenize(%q) = %v; want %v", c.text, got, c.want)
		}
	}
}

func TestAddSpecial(t *testing.T) {
	cases := []struct {
		vocab       string
		first, last int32 // NoToken: nothing added
	}{
		{"ggml-vocab-bert-bge.gguf", 101, 102},             // WPM: CLS ... SEP
		{"ggml-vocab-gpt-2.gguf", NoToken, NoToken},        // gpt-2 adds nothing by default
		{"ggml-vocab-deepseek-coder.gguf", 32013, NoToken}, // add_bos_token = true
	}
	for _, c := range cases {
		tok := loadVocabFile(t, c.vocab)
		plain := tok.Tokenize("hello world", Options{}).Tokens
		res := tok.Tokenize("hello world", Options{AddSpecial: true})
		want := len(plain)
		if c.first != NoToken {
			want++
			if got := res.Tokens[0]; got != (Token{ID: c.first}) {
				t.Errorf("%s: first token %+v; want {ID:%d Start:0 End:0}", c.vocab, got, c.first)
			}
		}
		if c.last != NoToken {
			want++
			n := len(res.Text)
			if got := res.Tokens[len(res.Tokens)-1]; got != (Token{ID: c.last, Start: int32(n), End: int32(n)}) {
				t.Errorf("%s: last token %+v; want {ID:%d Start:%d End:%d}", c.vocab, got, c.last, n, n)
			}
		}
		if len(res.Tokens) != want {
			t.Errorf("%s: %d tokens with AddSpecial; want %d", c.vocab, len(res.Tokens), want)
		}
	}
}

func TestParseSpecial(t *testing.T) {
	gpt2 := loadVocabFile(t, "ggml-vocab-gpt-2.gguf")
	text := "a<|endoftext|>b"
	plain := gpt2.Tokenize(text, Options{})
	for _, tk := range plain.Tokens {
		if tk.ID == 50256 {
			t.Fatalf("control token matched without ParseSpecial: %v", plain.IDs())
		}
	}
	parsed := gpt2.Tokenize(text, Options{ParseSpecial: true})
	want := []Token{{ID: 64, Start: 0, End: 1}, {ID: 50256, Start: 1, End: 14}, {ID: 65, Start: 14, End: 15}}
	if len(parsed.Tokens) != len(want) {
		t.Fatalf("got %+v; want %+v", parsed.Tokens, want)
	}
	for i := range want {
		if parsed.Tokens[i] != want[i] {
			t.Errorf("token %d = %+v; want %+v", i, parsed.Tokens[i], want[i])
		}
	}
	// deepseek-coder's user-defined tokens ("õ" is one) are matched even
	// without ParseSpecial, as llama.cpp does.
	ds := loadVocabFile(t, "ggml-vocab-deepseek-coder.gguf")
	got := ds.Tokenize("xõy", Options{})
	if len(got.Tokens) != 3 || got.Tokens[1] != (Token{ID: 32000, Start: 1, End: 3}) {
		t.Errorf("deepseek-coder %q = %+v; want the user-defined token 32000 at [1,3)", "xõy", got.Tokens)
	}
}

func TestSplitFragmentStrip(t *testing.T) {
	const text = "a  <m>  b<m><m> "
	cases := []struct {
		name           string
		lstrip, rstrip bool
		want           []fragment
	}{
		{"none", false, false, []fragment{{0, 3, -1}, {3, 6, 0}, {6, 9, -1}, {9, 12, 0}, {12, 15, 0}, {15, 16, -1}}},
		{"lstrip", true, false, []fragment{{0, 1, -1}, {3, 6, 0}, {6, 9, -1}, {9, 12, 0}, {12, 15, 0}, {15, 16, -1}}},
		{"rstrip", false, true, []fragment{{0, 3, -1}, {3, 6, 0}, {8, 9, -1}, {9, 12, 0}, {12, 15, 0}}},
	}
	for _, c := range cases {
		s := &special{text: "<m>", lstrip: c.lstrip, rstrip: c.rstrip}
		got := splitFragment(nil, text, fragment{start: 0, end: len(text), special: -1}, s, 0)
		if len(got) != len(c.want) {
			t.Errorf("%s: got %v; want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: got %v; want %v", c.name, got, c.want)
				break
			}
		}
	}
}

func TestInvalidUTF8(t *testing.T) {
	cases := []struct {
		in       string
		repaired string
		replaced int
	}{
		{"plain", "plain", 0},
		{"a\xffb", "a\uFFFDb", 1},
		{"\xe2\x82", "\uFFFD\uFFFD", 2},           // truncated sequence: one per byte
		{"x\xc0\x80y", "x\uFFFD\uFFFDy", 2},       // overlong NUL
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD", 3}, // surrogate
		{"é\x80", "é\uFFFD", 1},                   // stray continuation byte
	}
	names, toks := supportedVocabs(t)
	for i, name := range names {
		tok := toks[i]
		for _, c := range cases {
			res := tok.Tokenize(c.in, Options{})
			if res.Text != c.repaired || res.Replaced != c.replaced {
				t.Errorf("%s: Tokenize(%q): Text %q, Replaced %d; want %q, %d", name, c.in, res.Text, res.Replaced, c.repaired, c.replaced)
			}
			if want := tok.Tokenize(c.repaired, Options{}).IDs(); !slices.Equal(res.IDs(), want) {
				t.Errorf("%s: Tokenize(%q) = %v; want the ids of the repaired text %v", name, c.in, res.IDs(), want)
			}
			checkSpans(t, tok, res)
		}
	}
}

// buildGGUF writes a vocabulary-only GGUF with the given keys and reads it back.
func buildGGUF(t *testing.T, kv map[string]any) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for k, v := range kv {
		if err := w.Set(k, v); err != nil {
			t.Fatalf("Set(%s): %v", k, err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestVocabFromGGUFErrors(t *testing.T) {
	tokens := []string{"a", "b", "ab"}
	cases := []struct {
		name   string
		kv     map[string]any
		want   string
		unsupp bool
	}{
		{"no model", map[string]any{"tokenizer.ggml.tokens": tokens}, "tokenizer.ggml.model missing", false},
		{"unknown model", map[string]any{"tokenizer.ggml.model": "rwkv", "tokenizer.ggml.tokens": tokens}, `"rwkv"`, true},
		{"unknown pre", map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "nonesuch", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": []string{"a b"}}, `"nonesuch"`, true},
		{"no merges", map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2", "tokenizer.ggml.tokens": tokens}, "merges missing", false},
		{"duplicate", map[string]any{"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": []string{"a", "a"}}, "duplicate token", false},
		{"add_bos without bos", map[string]any{"tokenizer.ggml.model": "t5", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.add_bos_token": true}, "no BOS", false},
	}
	for _, c := range cases {
		_, err := VocabFromGGUF(buildGGUF(t, c.kv))
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, ErrUnsupported) != c.unsupp {
			t.Errorf("%s: got error %v; want one containing %q (unsupported %v)", c.name, err, c.want, c.unsupp)
		}
	}
}

func TestVocabFromGGUFDefaults(t *testing.T) {
	many := make([]string, 200)
	for i := range many {
		many[i] = "t" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	cases := []struct {
		name  string
		kv    map[string]any
		check func(v *Vocab) bool
	}{
		{"bert defaults", map[string]any{"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": many},
			func(v *Vocab) bool {
				return v.Kind == KindWPM && v.BOS == 101 && v.SEP == 102 && v.UNK == 100 && v.PAD == 0 && v.MASK == 103 &&
					v.EOS == NoToken && v.AddBOS && v.AddSEP && !v.KeepCase && !v.KeepAccents
			}},
		{"bert keeps case", map[string]any{"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": many, "tokenizer.ggml.normalizer.lowercase": false},
			func(v *Vocab) bool { return v.KeepCase && v.KeepAccents }},
		{"gpt2 defaults", map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2", "tokenizer.ggml.tokens": many, "tokenizer.ggml.merges": []string{}},
			func(v *Vocab) bool {
				return v.Kind == KindBPE && v.BOS == 11 && v.EOS == 11 && v.UNK == NoToken && !v.AddBOS
			}},
		{"llama3 adds bos", map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "llama-bpe", "tokenizer.ggml.tokens": many, "tokenizer.ggml.merges": []string{}},
			func(v *Vocab) bool { return v.AddBOS && v.BOS == 11 }},
		{"key overrides, out of range ignored", map[string]any{"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": many,
			"tokenizer.ggml.bos_token_id": uint32(7), "tokenizer.ggml.eos_token_id": uint32(5000)},
			func(v *Vocab) bool {
				return v.Kind == KindSPM && v.BOS == 7 && v.EOS == 2 && v.AddBOS && v.AddSpacePrefix
			}},
		{"t5 defaults", map[string]any{"tokenizer.ggml.model": "t5", "tokenizer.ggml.tokens": many},
			func(v *Vocab) bool {
				return v.Kind == KindUGM && v.EOS == 1 && v.UNK == 2 && v.PAD == 0 && v.AddEOS && !v.AddBOS
			}},
		{"small vocab disables defaults", map[string]any{"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": many[:50]},
			func(v *Vocab) bool { return v.BOS == NoToken && v.UNK == NoToken && v.PAD == 0 }},
	}
	for _, c := range cases {
		v, err := VocabFromGGUF(buildGGUF(t, c.kv))
		if err != nil {
			if c.name != "small vocab disables defaults" {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if !c.check(v) {
			t.Errorf("%s: got %+v", c.name, *v)
		}
	}
}

func TestVocabFromGGUFForcedControl(t *testing.T) {
	tokens := []string{"a", "b", "<|im_end|>", "<|fim_prefix|>", "<|channel|>", "ab"}
	types := []int32{1, 1, 1, 1, 3, 1}
	v, err := VocabFromGGUF(buildGGUF(t, map[string]any{
		"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
		"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types,
		"tokenizer.ggml.merges": []string{"a b"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{2, 3}; !slices.Equal(v.ForcedControl, want) {
		t.Errorf("ForcedControl = %v; want %v", v.ForcedControl, want)
	}
	if v.EOT != 2 {
		t.Errorf("EOT = %d; want 2", v.EOT)
	}
	if v.Attrs[4] != TokenUserDefined {
		t.Errorf("<|channel|> type %d; want user-defined", v.Attrs[4])
	}
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	// user-defined: matched always; forced control: only with ParseSpecial.
	if got, want := tok.Tokenize("a<|channel|><|im_end|>", Options{}).IDs()[:2], []int32{0, 4}; !slices.Equal(got, want) {
		t.Errorf("without ParseSpecial: ids start %v; want %v", got, want)
	}
	if got, want := tok.Tokenize("ab<|im_end|>", Options{ParseSpecial: true}).IDs(), []int32{5, 2}; !slices.Equal(got, want) {
		t.Errorf("with ParseSpecial: %v; want %v", got, want)
	}
}

func TestNewErrors(t *testing.T) {
	cases := []struct {
		name string
		v    Vocab
		want string
	}{
		{"empty", Vocab{Kind: KindBPE}, "empty vocabulary"},
		{"kind", Vocab{Kind: "rwkv", Tokens: []string{"a"}}, "rwkv"},
		{"pre", Vocab{Kind: KindBPE, Pre: "nonesuch", Tokens: []string{"a"}}, "nonesuch"},
		{"wpm without unk", Vocab{Kind: KindWPM, Tokens: []string{"a"}, UNK: NoToken, BOS: 0, SEP: 0}, "unknown token"},
		{"bpe add_bos without bos", Vocab{Kind: KindBPE, Pre: "gpt-2", Tokens: []string{"a"}, BOS: NoToken, AddBOS: true}, "add_bos"},
	}
	for _, c := range cases {
		_, err := New(&c.v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v; want an error containing %q", c.name, err, c.want)
		}
	}
}
