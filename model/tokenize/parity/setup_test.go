package parity

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/wire"
)

// Environment of the long runs (see /work/notes/tokenize-readme.md).
const (
	envN    = "SYNAPSE_PARITY_N"    // corpus documents: a number or "all" (default sampleDocs)
	envSeed = "SYNAPSE_PARITY_SEED" // seed of the splits and generated texts (default 1)
	envDump = "SYNAPSE_PARITY_DUMP" // append every mismatch to this JSONL file
)

// sampleDocs is how many corpus documents `go test` checks by default; each
// gives five texts (itself and four split pieces), and as many generated
// texts are added, so 600 texts per vocabulary.
const sampleDocs = 30

// target is a vocabulary both tokenizers load: every vocabulary-only GGUF
// of the fixtures (loaded vocab_only) and two full models loaded as the
// workers run them.
type target struct {
	name   string
	path   string
	config wire.RuntimeConfig
}

func targets(t testing.TB) []target {
	t.Helper()
	paths, err := filepath.Glob(testenv.Fixture(t, "vocab", "ggml-vocab-*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		testenv.MissingFixture(t, "no vocabulary fixtures in vocab/")
	}
	var out []target
	for _, p := range paths {
		out = append(out, target{filepath.Base(p), p, wire.RuntimeConfig{VocabOnly: true}})
	}
	out = append(out,
		target{"ref-bert-embed.gguf", testenv.Fixture(t, "models", "ref-bert-embed.gguf"), wire.RuntimeConfig{Embeddings: true, Threads: 1}},
		target{"llama-2-tiny-random.gguf", testenv.Fixture(t, "models", "llama-2-tiny-random.gguf"), wire.RuntimeConfig{Threads: 1, ContextSize: 512}},
	)
	return append(out, realTargets(t)...)
}

// realModelVocabs are the real models (`make real-models`) whose
// vocabularies the parity checks cover too, loaded vocab_only.
var realModelVocabs = []string{"SmolLM2-135M-Instruct-Q4_1/SmolLM2-135M-Instruct.Q4_1.gguf"}

// realTargets are the real models' vocabularies that are fetched, when
// real-model tests are enabled (testenv.RealTestsEnabled); a missing one is
// no target, unless SYNAPSE_REQUIRE_REAL=1 (`make test-real`), where it
// fails the test.
func realTargets(t testing.TB) []target {
	t.Helper()
	var out []target
	if !testenv.RealTestsEnabled() {
		return nil
	}
	for _, name := range realModelVocabs {
		p := filepath.Join(testenv.RealModelsDir(), name)
		if _, err := os.Stat(p); err != nil {
			if os.Getenv(testenv.RequireRealEnv) == "1" {
				t.Fatalf("needs real models: %s is not fetched: %v (%s=1)", name, err, testenv.RequireRealEnv)
			}
			continue
		}
		out = append(out, target{filepath.Base(name), p, wire.RuntimeConfig{VocabOnly: true}})
	}
	return out
}

// digest is "sha256:<hex>" of a file.
func digest(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// docCount is the number of corpus documents to use: envN or sampleDocs
// (-1: all).
func docCount(t testing.TB) int {
	switch s := os.Getenv(envN); s {
	case "":
		return sampleDocs
	case "all":
		return -1
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number or \"all\"", envN, s)
		}
		return n
	}
}

func seed(t testing.TB) uint64 {
	s := os.Getenv(envSeed)
	if s == "" {
		return 1
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", envSeed, s, err)
	}
	return n
}

var (
	corpusOnce sync.Once
	corpus     []string
	corpusErr  error
)

// corpusTexts returns the corpus documents and their split pieces, the
// same for every vocabulary.
func corpusTexts(t testing.TB) []string {
	t.Helper()
	path := testenv.Fixture(t, "corpora", "scifact", "corpus.jsonl")
	corpusOnce.Do(func() {
		var docs []string
		docs, corpusErr = Corpus(path, docCount(t))
		corpus = append(docs, Splits(rand.New(rand.NewPCG(seed(t), 0)), docs)...)
	})
	if corpusErr != nil {
		t.Fatal(corpusErr)
	}
	return corpus
}

// generated returns n generated texts that splice in tok's special tokens.
func generated(t testing.TB, tok tokenize.Tokenizer, n int, salt uint64) []string {
	g := Generator{R: rand.New(rand.NewPCG(seed(t), salt)), Specials: specialTexts(tok.Vocab())}
	return g.Texts(n)
}

// specialTexts lists the texts of v's control, user-defined and unknown
// tokens and of the tokens llama.cpp forces to control.
func specialTexts(v *tokenize.Vocab) []string {
	var out []string
	seen := map[int32]bool{}
	add := func(id int32) {
		if !seen[id] && v.Tokens[id] != "" {
			seen[id] = true
			out = append(out, v.Tokens[id])
		}
	}
	for i, a := range v.Attrs {
		if a == tokenize.TokenControl || a == tokenize.TokenUserDefined || a == tokenize.TokenUnknown {
			add(int32(i))
		}
	}
	for _, id := range v.ForcedControl {
		add(id)
	}
	return out
}

// optionSets are the four combinations of AddSpecial and ParseSpecial.
var optionSets = []tokenize.Options{{}, {AddSpecial: true}, {ParseSpecial: true}, {AddSpecial: true, ParseSpecial: true}}
