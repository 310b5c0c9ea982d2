// Package testmodels writes the generated models that tests and benchmarks
// of several packages share, once per test process, with the bert-bge
// fixture vocabulary.
package testmodels

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/synapse-embed/synapse/gguf/modelgen"
	"github.com/synapse-embed/synapse/internal/testenv"
)

var (
	mu      sync.Mutex
	dir     string
	written = map[string]error{}
)

// BGE returns the path of the model name, written by build from the bert-bge
// vocabulary the first time it is asked for in this process. Call
// RemoveAll from TestMain.
func BGE(tb testing.TB, name string, build func(modelgen.Vocab) modelgen.BERT) string {
	tb.Helper()
	vocab := testenv.Fixture(tb, "vocab", "ggml-vocab-bert-bge.gguf")
	mu.Lock()
	defer mu.Unlock()
	err, done := written[name]
	if !done {
		err = write(vocab, name, build)
		written[name] = err
	}
	if err != nil {
		tb.Fatalf("model %s: %v", name, err)
	}
	return filepath.Join(dir, name+".gguf")
}

func write(vocab, name string, build func(modelgen.Vocab) modelgen.BERT) error {
	v, err := modelgen.VocabFromGGUF(vocab)
	if err != nil {
		return err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "synapse-test-models-"); err != nil {
			return err
		}
	}
	return build(v).Write(filepath.Join(dir, name+".gguf"))
}

// MiniLM is the MiniLM-L6-shaped F16 benchmark model (modelgen.MiniLM).
func MiniLM(tb testing.TB) string { return BGE(tb, "minilm", modelgen.MiniLM) }

// RemoveAll removes the models written by this process.
func RemoveAll() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
	}
}
