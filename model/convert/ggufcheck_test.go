package convert

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// checkGGUFConversion converts testdata/name (a decoder the GGUF route
// takes; what names it in messages) and checks the GGUF file: the route,
// the metadata keys, its tokenizer against the ids Hugging Face tokenizers
// gave for the reference texts (testdata/name.reference.json, special
// tokens added), and that WriteONNX refuses it.
func checkGGUFConversion(t *testing.T, name, what string, keys map[string]uint64) {
	t.Helper()
	var ref struct {
		Texts    []string  `json:"texts"`
		TokenIDs [][]int32 `json:"token_ids"`
	}
	b, err := os.ReadFile(filepath.Join("testdata", name+".reference.json"))
	if err == nil {
		err = json.Unmarshal(b, &ref)
	}
	if err != nil {
		t.Fatal(err)
	}
	src, err := Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if src.Route() != FormatGGUF {
		t.Errorf("route %s; want gguf", src.Route())
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := src.WriteGGUF(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range keys {
		if got, _ := f.Uint(key); got != want {
			t.Errorf("%s = %d; want %d", key, got, want)
		}
	}
	v, err := tokenize.VocabFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.New(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.Texts) == 0 || len(ref.TokenIDs) != len(ref.Texts) {
		t.Fatalf("%d texts, %d token id lists", len(ref.Texts), len(ref.TokenIDs))
	}
	for i, text := range ref.Texts {
		if got := tok.Tokenize(text, tokenize.Options{AddSpecial: true}).IDs(); !slices.Equal(got, ref.TokenIDs[i]) {
			t.Errorf("%q: ids %v; Hugging Face tokenizers: %v", text, got, ref.TokenIDs[i])
		}
	}
	if err := src.WriteONNX(filepath.Join(t.TempDir(), "model.onnx")); !errors.Is(err, ErrRefused) {
		t.Errorf("WriteONNX of %s: %v; want it refused (it converts to GGUF)", what, err)
	}
}

// refusal is one edit of a checkpoint's file (key set to value) that the
// converter must refuse, saying says.
type refusal struct {
	name, file, key string
	value           any
	says            string
}

// checkRefusedGGUF applies each edit to a copy of testdata/name: Open or
// WriteGGUF must refuse it, saying what it names, and write nothing.
func checkRefusedGGUF(t *testing.T, name string, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := editedCopy(t, name, tc.file, tc.key, tc.value)
			src, err := Open(dir)
			out := filepath.Join(dir, "model.gguf")
			if err == nil {
				err = src.WriteGGUF(out)
			}
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got %v; want it refused, saying %q", err, tc.says)
			}
			if _, serr := os.Stat(out); serr == nil {
				t.Errorf("%s written despite the refusal", out)
			}
		})
	}
}
