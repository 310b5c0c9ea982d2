package tokenize

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
)

// vocabDir is the directory of llama.cpp's vocabulary test files
// (ggml-vocab-*.gguf with .inp/.out): $SYNAPSE_VOCAB_DIR when set (for
// example a llama.cpp checkout's models/, which has more of them), else the
// shared fixtures' vocab/.
func vocabDir(t testing.TB) string {
	if d := os.Getenv("SYNAPSE_VOCAB_DIR"); d != "" {
		return d
	}
	return testenv.Fixture(t, "vocab")
}

// vocabFiles lists the vocabularies in vocabDir that have test cases.
func vocabFiles(t testing.TB) []string {
	dir := vocabDir(t)
	paths, err := filepath.Glob(filepath.Join(dir, "ggml-vocab-*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		if _, err := os.Stat(p + ".out"); err == nil {
			names = append(names, filepath.Base(p))
		}
	}
	if len(names) == 0 {
		testenv.MissingFixture(t, "no ggml-vocab-*.gguf with test cases in %s", dir)
	}
	return names
}

// loaded caches the tokenizers tests load, by path.
var loaded sync.Map // path -> loadResult

type loadResult struct {
	tok Tokenizer
	err error
}

// supportedVocabs loads every vocabulary of vocabFiles that this package
// implements, skipping the others.
func supportedVocabs(t testing.TB) (names []string, toks []Tokenizer) {
	for _, name := range vocabFiles(t) {
		tok, err := loadCached(t, name)
		if errors.Is(err, ErrUnsupported) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		names, toks = append(names, name), append(toks, tok)
	}
	return names, toks
}

func loadCached(t testing.TB, name string) (Tokenizer, error) {
	path := filepath.Join(vocabDir(t), name)
	r, ok := loaded.Load(path)
	if !ok {
		tok, err := Load(path)
		r, _ = loaded.LoadOrStore(path, loadResult{tok, err})
	}
	return r.(loadResult).tok, r.(loadResult).err
}

// loadVocabFile loads a tokenizer from vocabDir; a kind or pre-tokenizer this
// package does not (yet) implement skips the test.
func loadVocabFile(t testing.TB, name string) Tokenizer {
	t.Helper()
	tok, err := loadCached(t, name)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("%s: %v", name, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// readCases reads name.inp (cases separated by "\n__ggml_vocab_test__\n",
// the file ending with one) and name.out (one line of space-separated ids
// per case).
func readCases(t testing.TB, name string) (inputs []string, want [][]int32) {
	t.Helper()
	base := filepath.Join(vocabDir(t), name)
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(base + ".out")
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	inputs = strings.Split(string(inp), sep)
	if last := inputs[len(inputs)-1]; last != "" {
		t.Fatalf("%s.inp does not end with the separator (last case %q)", name, last)
	}
	inputs = inputs[:len(inputs)-1]
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("%s: %d inputs but %d output lines", name, len(inputs), len(lines))
	}
	for i, l := range lines {
		var ids []int32
		for _, f := range strings.Fields(l) {
			id, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", name, i+1, err)
			}
			ids = append(ids, int32(id))
		}
		want = append(want, ids)
	}
	return inputs, want
}

// runConformance tokenizes every case of vocabulary file name (in vocabDir)
// without added special tokens and without parsing special text, as
// llama.cpp's test-tokenizer-0 does, and compares the ids with the .out file.
func runConformance(t *testing.T, name string) {
	tok := loadVocabFile(t, name)
	inputs, want := readCases(t, name)
	bad := 0
	for i, in := range inputs {
		got := tok.Tokenize(in, Options{}).IDs()
		if !slices.Equal(got, want[i]) {
			bad++
			if bad <= 10 {
				t.Errorf("case %d %q:\n got  %v\n want %v", i, in, got, want[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d cases differ", name, bad, len(inputs))
	}
}

func TestConformance(t *testing.T) {
	for _, name := range vocabFiles(t) {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(name, "ggml-vocab-"), ".gguf"), func(t *testing.T) {
			runConformance(t, name)
		})
	}
}
