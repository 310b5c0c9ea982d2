package tokenize

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// hfTestTokenizers are small tokenizer.json tokenizers of the three model
// kinds, written here (no fixtures): a BERT WordPiece, a Unigram behind NFKC
// and Metaspace with added tokens, and a byte-level BPE.
func hfTestTokenizers(tb testing.TB) []Tokenizer {
	tb.Helper()
	bert, err := onnxtest.BertTokenizerJSON(onnxtest.BertVocab(onnxtest.Words), 512)
	if err != nil {
		tb.Fatal(err)
	}
	var pieces [][2]any
	for _, p := range []string{"<unk>", "<s>", "</s>", "▁", "▁the", "the", "a", "b", "c", "ab", "▁a", "é", "中"} {
		pieces = append(pieces, [2]any{p, -float64(len(pieces))})
	}
	unigram, _ := json.Marshal(map[string]any{
		"version": "1.0",
		"added_tokens": []any{
			map[string]any{"id": 1, "content": "<s>", "special": true, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false},
			map[string]any{"id": 13, "content": "<mask>", "special": true, "normalized": false, "lstrip": true, "rstrip": false, "single_word": false},
			map[string]any{"id": 14, "content": "ab", "special": false, "normalized": true, "lstrip": false, "rstrip": true, "single_word": true},
		},
		"normalizer":     map[string]any{"type": "NFKC"},
		"pre_tokenizer":  map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true},
		"post_processor": map[string]any{"type": "RobertaProcessing", "sep": []any{"</s>", 2}, "cls": []any{"<s>", 1}},
		"model":          map[string]any{"type": "Unigram", "unk_id": 0, "vocab": pieces},
	})
	enc, _ := byteEncoding()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(enc[b])] = b
	}
	vocab["Ġt"], vocab["Ġth"], vocab["Ġthe"], vocab["<|endoftext|>"] = 256, 257, 258, 259
	bpe, _ := json.Marshal(map[string]any{
		"version":        "1.0",
		"added_tokens":   []any{map[string]any{"id": 259, "content": "<|endoftext|>", "special": true, "normalized": false}},
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true},
		"post_processor": map[string]any{"type": "ByteLevel"},
		"model":          map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{"Ġ t", "Ġt h", "Ġth e"}},
	})
	var out []Tokenizer
	for _, j := range [][]byte{bert, unigram, bpe} {
		tok, err := NewHF(j)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, tok)
	}
	return out
}

// FuzzHFTokenize feeds arbitrary bytes to the tokenizer.json tokenizers,
// with and without special tokens: no panic, ids in the vocabulary,
// Result.Text valid UTF-8, spans ordered and within Result.Text.
func FuzzHFTokenize(f *testing.F) {
	for _, s := range []string{
		"",                                   // nothing
		"Hello world, the cell!",             // plain ASCII
		"<s>x<mask> ab abc</s><|endoftext|>", // special and added tokens
		"Café naïve 中文 한국어 🦙 ﬁ",              // accents, CJK, Hangul (NFD splits it), ligature (NFKC)
		"a\xffb\xe2\x82\xc0\x80\xed\xa0\x80", // invalid UTF-8
		"\u0301\u0301x\u200b\u0000\t\n ",     // marks, format, NUL and whitespace
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", // over 100 characters
	} {
		f.Add([]byte(s))
	}
	toks := hfTestTokenizers(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := string(data)
		for k, tok := range toks {
			n := int32(len(tok.Vocab().Tokens))
			for _, opt := range []Options{{}, {AddSpecial: true, ParseSpecial: true}} {
				res := tok.Tokenize(in, opt)
				if !utf8.ValidString(res.Text) {
					t.Fatalf("tokenizer %d: Text %q is not valid UTF-8", k, res.Text)
				}
				prev := 0
				for _, tk := range res.Tokens {
					if tk.ID < 0 || tk.ID >= n {
						t.Fatalf("tokenizer %d: %q: id %d outside [0,%d)", k, in, tk.ID, n)
					}
					if int(tk.Start) < prev || tk.End < tk.Start || int(tk.End) > len(res.Text) {
						t.Fatalf("tokenizer %d: %q: span [%d,%d) after %d, text length %d", k, in, tk.Start, tk.End, prev, len(res.Text))
					}
					prev = int(tk.End)
				}
			}
		}
	})
}
