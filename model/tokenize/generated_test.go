package tokenize

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
)

// genSPM names, for spTestVocab, the generated SentencePiece vocabulary:
// byte fallback at <0x00> = 3 like llama's, for tests that need a
// SentencePiece vocabulary but not llama.cpp's own.
const genSPM = "generated-spm"

var (
	genOnce sync.Once
	genDir  string
	genErr  error
)

// generatedVocabs writes, once per process, vocabulary-only GGUF files of
// modelgen's WordPiece and SentencePiece vocabularies of its demo words.
func generatedVocabs(t testing.TB) (wpm, spm string) {
	t.Helper()
	genOnce.Do(func() {
		if genDir, genErr = os.MkdirTemp("", "synapse-tokenize-vocab-"); genErr != nil {
			return
		}
		for name, v := range map[string]modelgen.Vocab{
			"wpm.gguf": modelgen.WordPieceVocab(modelgen.DemoWords),
			"spm.gguf": modelgen.SPMVocab(modelgen.DemoWords),
		} {
			w := gguf.NewWriter()
			for _, kv := range v.KV {
				if genErr = w.SetKV(kv); genErr != nil {
					return
				}
			}
			if genErr = w.WriteFile(filepath.Join(genDir, name)); genErr != nil {
				return
			}
		}
	})
	if genErr != nil {
		t.Fatalf("generated vocabularies: %v", genErr)
	}
	return filepath.Join(genDir, "wpm.gguf"), filepath.Join(genDir, "spm.gguf")
}

func generatedSPM(t testing.TB) string { _, spm := generatedVocabs(t); return spm }

// fuzzTokenizers are the tokenizers FuzzTokenize runs: the generated
// WordPiece and SentencePiece ones always, and every supported fixture
// vocabulary when the fixtures are there.
func fuzzTokenizers(t testing.TB) []Tokenizer {
	t.Helper()
	var toks []Tokenizer
	wpm, spm := generatedVocabs(t)
	for _, p := range []string{wpm, spm} {
		tok, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	if testenv.HaveFixtures() {
		_, fx := supportedVocabs(t)
		toks = append(toks, fx...)
	}
	return toks
}

func TestMain(m *testing.M) {
	code := m.Run()
	if genDir != "" {
		os.RemoveAll(genDir)
	}
	os.Exit(code)
}
