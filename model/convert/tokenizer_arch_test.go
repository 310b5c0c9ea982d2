package convert

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/synapse-embed/synapse/model/tokenize"
)

// TestArchTokenizers: the tokenizer.json of the random-weight DistilBERT,
// MPNet and ModernBERT embedders (testdata/*-tiny, made by
// examples/models/tiny_*.py) tokenizes the reference texts — accents,
// digits, punctuation, a text longer than max_seq_length — into the ids
// Hugging Face tokenizers gave: [CLS] … [SEP] for DistilBERT's WordPiece and
// ModernBERT's byte-level BPE, <s> … </s> for MPNet's.
func TestArchTokenizers(t *testing.T) {
	for name, specials := range map[string][2]string{"distilbert-tiny": {"[CLS]", "[SEP]"}, "mpnet-tiny": {"<s>", "</s>"}, "modernbert-tiny": {"[CLS]", "[SEP]"}} {
		var ref struct {
			Texts    []string  `json:"texts"`
			TokenIDs [][]int32 `json:"token_ids"`
		}
		b, err := os.ReadFile("testdata/" + name + ".reference.json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatal(err)
		}
		if len(ref.Texts) == 0 || len(ref.TokenIDs) != len(ref.Texts) {
			t.Fatalf("%s: %d texts, %d token id lists", name, len(ref.Texts), len(ref.TokenIDs))
		}
		tok, err := tokenize.LoadHF("testdata/" + name + "/tokenizer.json")
		if err != nil {
			t.Fatal(err)
		}
		for i, text := range ref.Texts {
			got := tok.Tokenize(text, tokenize.Options{AddSpecial: true}).IDs()
			if !slices.Equal(got, ref.TokenIDs[i]) {
				t.Errorf("%s %q: ids %v; Hugging Face tokenizers: %v", name, text, got, ref.TokenIDs[i])
			}
		}
		pre, suf := tok.Affixes()
		toks := tok.Vocab().Tokens
		if len(pre) != 1 || len(suf) != 1 || toks[pre[0]] != specials[0] || toks[suf[0]] != specials[1] {
			t.Errorf("%s: affixes %v … %v; want %s … %s", name, pre, suf, specials[0], specials[1])
		}
	}
}
