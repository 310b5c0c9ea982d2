package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// qwen3Reference is model/convert/testdata/qwen3-tiny.reference.json: what
// sentence-transformers computes for the random-weight Qwen3 embedder beside
// it (examples/models/tiny_qwen3.py).
type qwen3Reference struct {
	Texts        []string    `json:"texts"`
	Vectors      [][]float64 `json:"vectors"`
	TokenIDs     [][]int32   `json:"token_ids"`
	Queries      []string    `json:"queries"`
	QueryVectors [][]float64 `json:"query_vectors"`
}

const qwen3Dir = "../model/convert/testdata/qwen3-tiny"

func readQwen3Reference(t *testing.T) qwen3Reference {
	t.Helper()
	var r qwen3Reference
	readConvertReference(t, "qwen3-tiny", &r)
	return r
}

// TestQwen3Embedding: a Qwen3 embedder's Hub directory (safetensors, as
// sentence-transformers saves Qwen3-Embedding) runs with -m DIR: converted
// to GGUF, run by llama.cpp with last-token pooling, its vectors are
// sentence-transformers' (cosine ≥ 0.9999) on unseen texts — in small
// requests and large ones — and --prompt-name query puts the model's
// instruction in front of the queries as sentence-transformers does.
func TestQwen3Embedding(t *testing.T) {
	ref := readQwen3Reference(t)
	dir := t.TempDir()
	env := []string{"SYNAPSE_MODELS=" + filepath.Join(dir, "models")}
	docs, queries := writeTexts(t, dir, "docs.jsonl", ref.Texts), writeTexts(t, dir, "queries.jsonl", ref.Queries)
	check := func(name string, got vecFile, want [][]float64) { t.Helper(); checkSTCosines(t, name, got, want) }
	for _, tc := range []struct{ name, batch string }{{"requests of 128 tokens", "128"}, {"requests of 4,096 tokens", "4096"}} {
		out := filepath.Join(dir, fmt.Sprintf("docs-%s.arrow", tc.batch))
		runSynapse(t, env, embedArgs(docs, qwen3Dir, out, "--batch-tokens", tc.batch)...).wantCode(t, exitOK)
		check(tc.name, readVecFile(t, out), ref.Vectors)
	}
	out := filepath.Join(dir, "queries.arrow")
	runSynapse(t, env, embedArgs(queries, qwen3Dir, out, "--prompt-name", "query")...).wantCode(t, exitOK)
	check("queries with --prompt-name query", readVecFile(t, out), ref.QueryVectors)

	res := runSynapse(t, env, "inspect", qwen3Dir)
	res.wantCode(t, exitOK)
	for _, want := range []string{"architecture     qwen3", "pooling          last", "to GGUF, run by llama.cpp"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("inspect: %q missing\n%s", want, res.stdout)
		}
	}
}
