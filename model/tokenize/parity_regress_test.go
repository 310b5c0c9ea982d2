package tokenize

import (
	"slices"
	"testing"
)

// Texts on which the worker parity test (model/tokenize/parity) found the Go
// tokenizers and llama.cpp apart, with llama.cpp's ids (v0.5.0, through a
// `synapse worker`), fixed since.
func TestParityRegressions(t *testing.T) {
	tests := []struct {
		vocab string
		text  string
		opt   Options
		want  []int32
	}{
		// deepseek-coder's CJK class [一-龥ࠀ-一가-퟿] spans U+2000-U+200A, but
		// llama.cpp's std::wregex sees non-ASCII whitespace as U+000B, so
		// U+2009 stays the \s? prefix of "snake" and "ī s" merges.
		{"ggml-vocab-deepseek-coder.gguf", "\u2009snake", Options{}, []int32{350, 6950, 77, 647}},
		{"ggml-vocab-deepseek-coder.gguf", "酧턽癏\u2009snake_case", Options{AddSpecial: true},
			[]int32{32013, 1940, 100, 167, 213, 121, 1845, 224, 350, 6950, 77, 647, 62, 5875}},
	}
	for _, tc := range tests {
		tok := loadVocabFile(t, tc.vocab)
		if got := tok.Tokenize(tc.text, tc.opt).IDs(); !slices.Equal(got, tc.want) {
			t.Errorf("%s %q %+v: got %v; want %v", tc.vocab, tc.text, tc.opt, got, tc.want)
		}
	}
}

// Bracket classes (regexes without \p{...}) never match non-ASCII
// whitespace: the pre-tokenizer words of deepseek-coder.
func TestBracketClassSkipsUnicodeSpace(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"\u2009snake", []string{"\u2009snake"}},
		{"中\u3000文", []string{"中", "\u3000", "文"}},
		{"中\u2003国", []string{"中", "\u2003", "国"}},
		{"一\u00a0a", []string{"一", "\u00a0a"}},
	}
	tok := loadVocabFile(t, "ggml-vocab-deepseek-coder.gguf")
	f := tok.(*tokenizer).frag.(*bpeFragmenter)
	for _, tc := range tests {
		var b splitBuf
		b.load(tc.text, f.table)
		var got []string
		start := 0
		for _, e := range b.split(f.pre.steps) {
			got = append(got, tc.text[b.offs[start]:b.offs[e]])
			start = int(e)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: got words %q; want %q", tc.text, got, tc.want)
		}
	}
}
