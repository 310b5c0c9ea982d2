package testmodels

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// TestVocabCoversCorpus: the generated vocabulary tokenizes every word of
// the corpus and of the tests' hand-written texts as one token, never
// [UNK], and word ids reach above 1,000.
func TestVocabCoversCorpus(t *testing.T) {
	path := Model(t, "tiny-embed", modelgen.TinyEmbedder)
	tok, err := tokenize.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	docs := Corpus(200)
	texts := []string{"hello world", "goodbye", "first document", "second document", "a short one"}
	for _, d := range docs {
		texts = append(texts, d.Title, d.Text)
	}
	maxID := int32(0)
	for _, text := range texts {
		res := tok.Tokenize(text, tokenize.Options{})
		words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return r == ' ' || r == ',' || r == '.' })
		var ids []int32
		for _, tk := range res.Tokens {
			if tk.ID == 100 {
				t.Fatalf("%q: [UNK] in %v", text, res.Tokens)
			}
			ids = append(ids, tk.ID)
			maxID = max(maxID, tk.ID)
		}
		punct := strings.Count(text, ",") + strings.Count(text, ".")
		digits := 0
		for _, w := range words {
			if strings.Trim(w, "0123456789") == "" {
				digits += len(w) - 1 // numbers are one token per digit
			}
		}
		if len(ids) != len(words)+punct+digits {
			t.Errorf("%.40q: %d tokens; want one per word (%d) and punctuation mark (%d), digits apart", text, len(ids), len(words), punct)
		}
	}
	if maxID <= 1000 {
		t.Errorf("largest word id %d; want some above 1000", maxID)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	RemoveAll()
	os.Exit(code)
}

func TestCorpusDeterministic(t *testing.T) {
	a, b := Corpus(50), Corpus(10)
	if !slices.Equal(a[:10], b) {
		t.Error("the first 10 documents depend on how many are asked for")
	}
	long := 0
	for _, d := range a {
		if len(strings.Fields(d.Text)) > 100 {
			long++
		}
	}
	if long == 0 {
		t.Error("no document over 100 words")
	}
}
