package ingest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/tokenize"
)

// wordPieceJSON is a BERT-like tokenizer.json: [unusedN] tokens before and
// after the special ones, a post-processor, padding and truncation.
const wordPieceJSON = `{"version":"1.0",
 "truncation":{"max_length":128,"strategy":"LongestFirst","stride":0},
 "padding":{"strategy":{"Fixed":128},"direction":"Right","pad_to_multiple_of":null,"pad_id":0,"pad_type_id":0,"pad_token":"[PAD]"},
 "added_tokens":[
  {"id":0,"content":"[PAD]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},
  {"id":3,"content":"[UNK]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},
  {"id":4,"content":"[CLS]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},
  {"id":5,"content":"[SEP]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},
  {"id":6,"content":"[MASK]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],
 "normalizer":{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true},
 "pre_tokenizer":{"type":"BertPreTokenizer"},
 "post_processor":{"type":"TemplateProcessing",
  "single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}}],
  "pair":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}},{"Sequence":{"id":"B","type_id":1}},{"SpecialToken":{"id":"[SEP]","type_id":1}}],
  "special_tokens":{"[CLS]":{"id":"[CLS]","ids":[4],"tokens":["[CLS]"]},"[SEP]":{"id":"[SEP]","ids":[5],"tokens":["[SEP]"]}}},
 "decoder":{"type":"WordPiece","prefix":"##","cleanup":true},
 "model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":100,
  "vocab":{"[PAD]":0,"[unused0]":1,"[unused1]":2,"[UNK]":3,"[CLS]":4,"[SEP]":5,"[MASK]":6,"[unused2]":7,
   "the":8,"cell":9,"##s":10,"grow":11,"[":12,"unused":13,"]":14,".":15}}}`

// TestRebuildVocab: the distilled vocabulary is model2vec's: [unusedN] and
// the special tokens other than [UNK] and [PAD] removed, the rest
// renumbered in id order (IDs maps row → the model's id), the added tokens
// renumbered, no post-processor, padding or truncation. The rebuilt
// tokenizer.json loads, and tokenizes a text to the renumbered ids of the
// model's tokens, without special tokens.
func TestRebuildVocab(t *testing.T) {
	v, err := rebuildVocab([]byte(wordPieceJSON), "")
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := []int32{0, 3, 8, 9, 10, 11, 12, 13, 14, 15}
	if !reflect.DeepEqual(v.IDs, wantIDs) || v.Removed != 6 {
		t.Errorf("kept ids %v, %d removed; want %v, 6 removed ([unused0-2], [CLS], [SEP], [MASK])", v.IDs, v.Removed, wantIDs)
	}
	var doc struct {
		Added []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(v.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	wantVocab := map[string]int{"[PAD]": 0, "[UNK]": 1, "the": 2, "cell": 3, "##s": 4, "grow": 5, "[": 6, "unused": 7, "]": 8, ".": 9}
	if !reflect.DeepEqual(doc.Model.Vocab, wantVocab) {
		t.Errorf("vocab %v; want %v", doc.Model.Vocab, wantVocab)
	}
	if len(doc.Added) != 2 || doc.Added[0].Content != "[PAD]" || doc.Added[0].ID != 0 || doc.Added[1].Content != "[UNK]" || doc.Added[1].ID != 1 {
		t.Errorf("added tokens %+v; want [PAD] 0 and [UNK] 1", doc.Added)
	}
	var sections map[string]json.RawMessage
	_ = json.Unmarshal(v.JSON, &sections)
	for _, k := range []string{"post_processor", "padding", "truncation"} {
		if string(sections[k]) != "null" {
			t.Errorf("%s is %s; want null (a static model adds, pads and truncates nothing by its tokenizer)", k, sections[k])
		}
	}
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(p, v.JSON, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.LoadHF(p)
	if err != nil {
		t.Fatalf("the rebuilt tokenizer.json does not load: %v", err)
	}
	got := tok.Tokenize("The cells grow [unused0] x.", tokenize.Options{}).IDs()
	// [unused0] is no token now: "[", "unused0" (no ##0 in the vocabulary:
	// the word is [UNK]), "]"; x is [UNK] too
	want := []int32{2, 3, 4, 5, 6, 1, 8, 1, 9}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tokens %v; want %v", got, want)
	}
}

// TestRebuildVocabOther: a BPE vocabulary loses the merges of removed
// tokens, a Unigram one is a renumbered list with its unk_id moved, and the
// padding token comes from tokenizer_config.json when tokenizer.json has
// no padding.
func TestRebuildVocabOther(t *testing.T) {
	bpe := `{"added_tokens":[{"id":0,"content":"<s>","special":true},{"id":1,"content":"<pad>","special":true},{"id":2,"content":"</s>","special":true},{"id":3,"content":"<unk>","special":true}],
	 "post_processor":null,"padding":null,
	 "model":{"type":"BPE","unk_token":"<unk>","vocab":{"<s>":0,"<pad>":1,"</s>":2,"<unk>":3,"a":4,"b":5,"ab":6,"<":7,"s":8,"<s":9,">":10},
	  "merges":["a b",["<","s"],["<s",">"]]}}`
	v, err := rebuildVocab([]byte(bpe), "<pad>")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(v.JSON), `"<pad>":0`) {
		t.Errorf("BPE: tokenizer.json %s; want the tokens unescaped (\"<pad>\":0)", v.JSON)
	}
	if want := []int32{1, 3, 4, 5, 6, 7, 8, 9, 10}; !reflect.DeepEqual(v.IDs, want) {
		t.Errorf("BPE: kept ids %v; want %v (<s> and </s> removed, <pad> kept from the config)", v.IDs, want)
	}
	var b struct {
		Model struct {
			Merges []json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	_ = json.Unmarshal(v.JSON, &b)
	if len(b.Model.Merges) != 2 || string(b.Model.Merges[0]) != `"a b"` || string(b.Model.Merges[1]) != `["<","s"]` {
		t.Errorf("BPE merges %s; want \"a b\" and [\"<\",\"s\"] (<s > makes the removed <s>)", b.Model.Merges)
	}
	uni := `{"added_tokens":[{"id":0,"content":"<pad>","special":true},{"id":1,"content":"</s>","special":true},{"id":2,"content":"<unk>","special":true}],
	 "model":{"type":"Unigram","unk_id":2,"vocab":[["<pad>",0],["</s>",0],["<unk>",0],["▁the",-1.5],["s",-2.5]]}}`
	if v, err = rebuildVocab([]byte(uni), ""); err != nil {
		t.Fatal(err)
	}
	var u struct {
		Model struct {
			UnkID int      `json:"unk_id"`
			Vocab [][2]any `json:"vocab"`
		} `json:"model"`
	}
	_ = json.Unmarshal(v.JSON, &u)
	if want := []int32{2, 3, 4}; !reflect.DeepEqual(v.IDs, want) || u.Model.UnkID != 0 || len(u.Model.Vocab) != 3 || u.Model.Vocab[1][0] != "▁the" {
		t.Errorf("Unigram: kept %v, unk_id %d, vocab %v; want [2 3 4], 0, [<unk> ▁the s]", v.IDs, u.Model.UnkID, u.Model.Vocab)
	}
	for _, bad := range []string{`{}`, `{"model":{"type":"WordPiece"}}`, `{"model":{"type":"WordPiece","vocab":{"[unused0]":0}}}`, `[`} {
		if _, err := rebuildVocab([]byte(bad), ""); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestConfigPadToken: pad_token as a string or an added-token object.
func TestConfigPadToken(t *testing.T) {
	dir := t.TempDir()
	if p, err := configPadToken(dir); p != "" || err != nil {
		t.Errorf("no config: %q, %v; want \"\"", p, err)
	}
	os.WriteFile(filepath.Join(dir, "special_tokens_map.json"), []byte(`{"pad_token":{"content":"<pad>","lstrip":false}}`), 0o644)
	if p, err := configPadToken(dir); p != "<pad>" || err != nil {
		t.Errorf("object: %q, %v; want <pad>", p, err)
	}
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"pad_token":"[PAD]"}`), 0o644)
	if p, err := configPadToken(dir); p != "[PAD]" || err != nil {
		t.Errorf("string: %q, %v; want [PAD] (tokenizer_config.json first)", p, err)
	}
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{`), 0o644)
	if _, err := configPadToken(dir); err == nil {
		t.Error("a broken tokenizer_config.json: no error")
	}
}
