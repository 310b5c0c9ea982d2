package tokenize

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// pieces renders a result as its vocabulary strings.
func pieces(tok Tokenizer, r Result) []string {
	out := make([]string, len(r.Tokens))
	for i, t := range r.Tokens {
		out[i] = tok.Vocab().Tokens[t.ID]
	}
	return out
}

// TestHFWordPiece checks hand-worked cases of the BERT pipeline: lowercase,
// accents stripped, punctuation and CJK split off, greedy longest-match
// pieces, [UNK] for a word with no cover and for words over 100 characters
// (Hugging Face's limit, where llama.cpp has none), special tokens.
func TestHFWordPiece(t *testing.T) {
	tok := hfTestTokenizers(t)[0]
	long := strings.Repeat("a", 101)
	tests := []struct {
		text string
		opt  Options
		want []string
	}{
		{"Hello, World!", Options{AddSpecial: true}, []string{"[CLS]", "hello", ",", "world", "!", "[SEP]"}},
		{"Cells  STUDY\tgene", Options{}, []string{"cells", "study", "gene"}},
		{"cellz", Options{}, []string{"cell", "##z"}},
		{"Çéll", Options{}, []string{"cell"}},
		{"Çélls!x", Options{}, []string{"cells", "!", "x"}},
		{"the中gene", Options{}, []string{"the", "[UNK]", "gene"}},
		{"hello €", Options{}, []string{"hello", "[UNK]"}},
		{long[:100], Options{}, slices.Concat([]string{"a"}, slices.Repeat([]string{"##a"}, 99))},
		{long, Options{}, []string{"[UNK]"}},
		{"a[MASK]b", Options{ParseSpecial: true}, []string{"a", "[MASK]", "b"}},
		{"a[MASK]b", Options{}, []string{"a", "[", "m", "##a", "##s", "##k", "]", "b"}},
		{"\u0000\ufffd\u200b", Options{}, []string{}},
	}
	for _, tt := range tests {
		res := tok.Tokenize(tt.text, tt.opt)
		if got := pieces(tok, res); !slices.Equal(got, tt.want) {
			t.Errorf("%q %+v: got %q; want %q", tt.text, tt.opt, got, tt.want)
		}
	}
	res := tok.Tokenize("Çéll world", Options{})
	if s := res.Tokens[len(res.Tokens)-1]; res.Text[s.Start:s.End] != "world" {
		t.Errorf("span of the last token: %q; want \"world\"", res.Text[s.Start:s.End])
	}
	pre, suf := tok.Affixes()
	v := tok.Vocab()
	if len(pre) != 1 || v.Tokens[pre[0]] != "[CLS]" || len(suf) != 1 || v.Tokens[suf[0]] != "[SEP]" {
		t.Errorf("Affixes: %v %v; want [CLS] and [SEP]", pre, suf)
	}
	ids, types := tok.(*hfTokenizer).Pair([]int32{10}, []int32{11, 12})
	if !slices.Equal(ids, []int32{pre[0], 10, suf[0], 11, 12, suf[0]}) || !slices.Equal(types, []int32{0, 0, 0, 1, 1, 1}) {
		t.Errorf("Pair: ids %v types %v; want [CLS] a [SEP] b [SEP] with types 0 0 0 1 1 1", ids, types)
	}
}

// TestHFUnsupported: a component the module does not implement is an
// ErrUnsupported error naming it.
func TestHFUnsupported(t *testing.T) {
	base := `{"version":"1.0","model":{"type":"WordPiece","unk_token":"[UNK]","vocab":{"[UNK]":0,"a":1}}%s}`
	tests := []struct{ extra, want string }{
		{`,"normalizer":{"type":"Fancy"}`, `normalizer "Fancy"`},
		{`,"pre_tokenizer":{"type":"Split","pattern":{"Regex":"\\s+"},"behavior":"Removed","invert":false}`, `pre-tokenizer "Split"`},
		{`,"post_processor":{"type":"Foo"}`, `post-processor "Foo"`},
		{`,"normalizer":{"type":"Replace","pattern":{"Regex":"\\s+"},"content":" "}`, `\s`},
	}
	for _, tt := range tests {
		_, err := NewHF([]byte(strings.Replace(base, "%s", tt.extra, 1)))
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v; want ErrUnsupported naming %s", tt.extra, err, tt.want)
		}
	}
	_, err := NewHF([]byte(`{"version":"1.0","model":{"type":"WordLevel","vocab":{},"unk_token":"x"}}`))
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `model "WordLevel"`) {
		t.Errorf("WordLevel: got %v; want ErrUnsupported naming it", err)
	}
}

// TestHFUnigramBPE checks hand-worked cases of the Unigram (best total
// score, unknown characters fused) and byte-level BPE (merges by rank)
// tokenizers of hfTestTokenizers.
func TestHFUnigramBPE(t *testing.T) {
	toks := hfTestTokenizers(t)
	tests := []struct {
		tok  Tokenizer
		text string
		opt  Options
		want []string
	}{
		// "▁the" (score -4) beats "▁"+"the" (-3-5); "ab" is an added token (single word, rstrip).
		{toks[1], "the abc", Options{}, []string{"▁the", "▁", "ab", "c"}},
		{toks[1], "the ab  c", Options{}, []string{"▁the", "▁", "ab", "c"}},
		{toks[1], "xyz the", Options{AddSpecial: true}, []string{"<s>", "▁", "<unk>", "▁the", "</s>"}},
		{toks[1], "<s>the", Options{ParseSpecial: true}, []string{"<s>", "the"}}, // prepend_scheme first: not after <s>
		{toks[2], "the thé", Options{}, []string{"Ġthe", "Ġth", "Ã", "©"}},
	}
	for _, tt := range tests {
		if got := pieces(tt.tok, tt.tok.Tokenize(tt.text, tt.opt)); !slices.Equal(got, tt.want) {
			t.Errorf("%q %+v: got %q; want %q", tt.text, tt.opt, got, tt.want)
		}
	}
}
