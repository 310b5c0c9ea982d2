package parity

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/convert"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// TestGemmaGGUFHFParity: the SentencePiece vocabulary synapse writes into an
// EmbeddingGemma's GGUF file (model/convert/testdata/gemma-tiny, whose
// tokenizer.json is transformers' GemmaTokenizer over a small trained
// vocabulary) tokenizes the corpus sample, its split pieces and generated
// texts (special texts spliced in, invalid UTF-8, astral runes) into the ids
// Hugging Face tokenizers gives for the directory's tokenizer.json — the
// tokenizer synapse (and llama.cpp) runs for the model against the one
// sentence-transformers runs — for every combination of AddSpecial and
// ParseSpecial.
func TestGemmaGGUFHFParity(t *testing.T) {
	dir, node := testenv.HFTokenizers(t)
	src, err := convert.Open(filepath.Join("..", "..", "convert", "testdata", "gemma-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := src.WriteGGUF(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tokenize.VocabFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.New(v)
	if err != nil {
		t.Fatal(err)
	}
	texts := corpusTexts(t)
	compareHF(t, dir, node, "gemma-tiny", filepath.Join(src.Dir, "tokenizer.json"), tok, append(slices.Clip(texts), generated(t, tok, len(texts), 460)...))
}
