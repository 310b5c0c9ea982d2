package tokenize

import (
	"slices"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
)

func TestAffixesMatchAddSpecial(t *testing.T) {
	for _, name := range []string{"ggml-vocab-bert-bge.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"} {
		tok, err := Load(testenv.Fixture(t, "vocab", name))
		if err != nil {
			t.Fatal(err)
		}
		pre, suf := tok.Affixes()
		plain := tok.Tokenize("hello world", Options{}).IDs()
		with := tok.Tokenize("hello world", Options{AddSpecial: true}).IDs()
		want := slices.Concat(pre, plain, suf)
		if !slices.Equal(with, want) {
			t.Errorf("%s: AddSpecial gives %v; affixes around plain give %v", name, with, want)
		}
	}
	tok, err := Load(testenv.Fixture(t, "vocab", "ggml-vocab-bert-bge.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if pre, suf := tok.Affixes(); !slices.Equal(pre, []int32{101}) || !slices.Equal(suf, []int32{102}) {
		t.Errorf("bert affixes %v %v; want [101] [102]", pre, suf)
	}
}
