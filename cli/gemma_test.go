package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gemmaReference is model/convert/testdata/gemma-tiny.reference.json: what
// sentence-transformers computes for the random-weight EmbeddingGemma beside
// it (examples/models/tiny_gemma.py).
type gemmaReference struct {
	Texts           []string    `json:"texts"`
	Vectors         [][]float64 `json:"vectors"`
	DocumentVectors [][]float64 `json:"document_vectors"`
	Queries         []string    `json:"queries"`
	QueryVectors    [][]float64 `json:"query_vectors"`
}

const gemmaDir = "../model/convert/testdata/gemma-tiny"

// TestGemmaEmbedding: an EmbeddingGemma Hub directory (safetensors, as
// sentence-transformers saves google/embeddinggemma-300m: Transformer,
// Pooling, two Dense modules, Normalize) runs with -m DIR: converted to
// GGUF, run by llama.cpp's gemma-embedding with the Dense projections
// inside, its vectors are sentence-transformers' (cosine ≥ 0.9999) on
// unseen texts longer than the sliding window — in small requests and large
// ones, with no prompt, --prompt-name document and --prompt-name query.
func TestGemmaEmbedding(t *testing.T) {
	var ref gemmaReference
	readConvertReference(t, "gemma-tiny", &ref)
	dir := t.TempDir()
	env := []string{"SYNAPSE_MODELS=" + filepath.Join(dir, "models")}
	docs, queries := writeTexts(t, dir, "docs.jsonl", ref.Texts), writeTexts(t, dir, "queries.jsonl", ref.Queries)
	check := func(name string, got vecFile, want [][]float64) { t.Helper(); checkSTCosines(t, name, got, want) }
	for _, tc := range []struct{ name, batch string }{{"requests of 128 tokens", "128"}, {"requests of 4,096 tokens", "4096"}} {
		out := filepath.Join(dir, fmt.Sprintf("docs-%s.arrow", tc.batch))
		runSynapse(t, env, embedArgs(docs, gemmaDir, out, "--batch-tokens", tc.batch)...).wantCode(t, exitOK)
		check(tc.name, readVecFile(t, out), ref.Vectors)
	}
	out := filepath.Join(dir, "docs-prompted.arrow")
	runSynapse(t, env, embedArgs(docs, gemmaDir, out, "--prompt-name", "document")...).wantCode(t, exitOK)
	check("documents with --prompt-name document", readVecFile(t, out), ref.DocumentVectors)
	out = filepath.Join(dir, "queries.arrow")
	runSynapse(t, env, embedArgs(queries, gemmaDir, out, "--prompt-name", "query")...).wantCode(t, exitOK)
	check("queries with --prompt-name query", readVecFile(t, out), ref.QueryVectors)

	res := runSynapse(t, env, "inspect", gemmaDir)
	res.wantCode(t, exitOK)
	for _, want := range []string{"gemma-embedding", "to GGUF, run by llama.cpp"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("inspect: %q missing\n%s", want, res.stdout)
		}
	}
}

// TestGemmaRefusedCausal: a Gemma 3 text model without bidirectional
// attention (a generator, not EmbeddingGemma) exits 2 from embed and models
// add, naming the setting and the architecture synapse converts, and the
// model cache stays empty.
func TestGemmaRefusedCausal(t *testing.T) {
	work := t.TempDir()
	model := filepath.Join(work, "gemma-causal")
	if err := os.CopyFS(model, os.DirFS(gemmaDir)); err != nil {
		t.Fatal(err)
	}
	setJSON(t, filepath.Join(model, "config.json"), "use_bidirectional_attention", false)
	wantRefusedUncached(t, work, model, "config.json", "use_bidirectional_attention false", "gemma-embedding")
}
