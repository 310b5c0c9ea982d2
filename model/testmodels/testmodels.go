// Package testmodels writes the generated models and corpora that tests and
// benchmarks of several packages share, once per test process. Tests use
// the generated WordPiece vocabulary of Words, which covers every text they
// embed, so they run in a fresh clone; benchmarks over SciFact use the
// bert-bge fixture vocabulary (BGE), as real models would.
package testmodels

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
)

var (
	mu      sync.Mutex
	dir     string
	written = map[string]error{}
)

// File returns the path of the model name, written by write the first time
// it is asked for in this process. Call RemoveAll from TestMain.
func File(tb testing.TB, name string, write func(path string) error) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	err, done := written[name]
	if !done {
		if dir == "" {
			dir, err = os.MkdirTemp("", "synapse-test-models-")
		}
		if err == nil {
			err = write(filepath.Join(dir, name+".gguf"))
		}
		written[name] = err
	}
	if err != nil {
		tb.Fatalf("model %s: %v", name, err)
	}
	return filepath.Join(dir, name+".gguf")
}

// Model returns the path of the BERT model name, built by build from the
// generated vocabulary (Vocab).
func Model(tb testing.TB, name string, build func(modelgen.Vocab) modelgen.BERT) string {
	tb.Helper()
	return File(tb, name, func(path string) error { return build(Vocab()).Write(path) })
}

// Embedder is modelgen.TinyEmbedder (2 layers, 128 wide, F16, mean pooling)
// with the generated vocabulary.
func Embedder(tb testing.TB) string { return Model(tb, "tiny-embed", modelgen.TinyEmbedder) }

// Reranker is modelgen.TinyReranker with the generated vocabulary.
func Reranker(tb testing.TB) string { return Model(tb, "tiny-rerank", modelgen.TinyReranker) }

// Llama is modelgen.TinyLlama (2 layers, 64 wide, 8 dims per head) with a
// generated SentencePiece vocabulary of Words.
func Llama(tb testing.TB) string {
	tb.Helper()
	return File(tb, "tiny-llama", func(path string) error {
		return modelgen.TinyLlama(modelgen.SPMVocab(Words())).Write(path)
	})
}

// Llama2ChatTemplate is a llama-2 style chat template (Jinja), as chat
// models carry it in tokenizer.chat_template.
const Llama2ChatTemplate = "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}" +
	"{{ '<<SYS>>\\n' + message['content'] + '\\n<</SYS>>\\n\\n' }}{% elif message['role'] == 'user' %}" +
	"{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}"

// LlamaChat is Llama with a llama-2 style chat template.
func LlamaChat(tb testing.TB) string {
	tb.Helper()
	return File(tb, "tiny-llama-chat", func(path string) error {
		m := modelgen.TinyLlama(modelgen.SPMVocab(Words()))
		m.ChatTemplate = Llama2ChatTemplate
		return m.Write(path)
	})
}

// BGE returns the path of the model name, written by build from the
// bert-bge fixture vocabulary (for benchmarks over SciFact); it skips
// without the fixtures.
func BGE(tb testing.TB, name string, build func(modelgen.Vocab) modelgen.BERT) string {
	tb.Helper()
	vocab := testenv.Fixture(tb, "vocab", "ggml-vocab-bert-bge.gguf")
	return File(tb, name, func(path string) error {
		v, err := modelgen.VocabFromGGUF(vocab)
		if err != nil {
			return err
		}
		return build(v).Write(path)
	})
}

// MiniLM is the MiniLM-L6-shaped F16 benchmark model (modelgen.MiniLM) with
// the bert-bge vocabulary.
func MiniLM(tb testing.TB) string { return BGE(tb, "minilm", modelgen.MiniLM) }

// RemoveAll removes the models written by this process.
func RemoveAll() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// LabelledReranker is Reranker with a classifier of len(labels) outputs
// named labels (bert.classifier.output_labels): output k's row of
// cls.output and its bias are ClassifierOutput(k); every other weight is
// Reranker's.
func LabelledReranker(tb testing.TB, labels ...string) string {
	tb.Helper()
	return File(tb, "tiny-rerank-labels-"+strings.Join(labels, "-"), func(path string) error {
		c := modelgen.TinyReranker(Vocab())
		c.Labels = labels
		rows, bias := make([][]float32, len(labels)), make([]float32, len(labels))
		for k := range labels {
			rows[k], bias[k] = ClassifierOutput(k, c.Width)
		}
		c.Fill = map[string]func(int, []float32){
			"cls.output.weight": func(r int, dst []float32) { copy(dst, rows[r]) },
			"cls.output.bias":   func(_ int, dst []float32) { copy(dst, bias) },
		}
		return c.Write(path)
	})
}

// OutputReranker is Reranker with one output: output k of
// LabelledReranker's classifier, so that its score is that model's
// logits[k], computed apart.
func OutputReranker(tb testing.TB, k int) string {
	tb.Helper()
	return File(tb, fmt.Sprintf("tiny-rerank-output-%d", k), func(path string) error {
		c := modelgen.TinyReranker(Vocab())
		row, bias := ClassifierOutput(k, c.Width)
		c.Fill = map[string]func(int, []float32){
			"cls.output.weight": func(_ int, dst []float32) { copy(dst, row) },
			"cls.output.bias":   func(_ int, dst []float32) { dst[0] = bias },
		}
		return c.Write(path)
	})
}

// ClassifierOutput is the cls.output row (width values) and bias of
// classifier output k in LabelledReranker and OutputReranker: fixed, and
// different for every k.
func ClassifierOutput(k, width int) ([]float32, float32) {
	r := rand.New(rand.NewPCG(uint64(k)+1, 0xc1a55))
	row := make([]float32, width)
	for i := range row {
		row[i] = float32(r.NormFloat64()) * 0.05
	}
	return row, 0.3 - 0.5*float32(k)
}
