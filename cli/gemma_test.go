package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/modelcache"
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
	b, err := os.ReadFile("../model/convert/testdata/gemma-tiny.reference.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := []string{"SYNAPSE_MODELS=" + filepath.Join(dir, "models")}
	write := func(name string, texts []string) string {
		var docs []map[string]any
		for i, s := range texts {
			docs = append(docs, map[string]any{"id": fmt.Sprint(i), "text": s})
		}
		p := filepath.Join(dir, name)
		writeJSONL(t, p, docs)
		return p
	}
	docs, queries := write("docs.jsonl", ref.Texts), write("queries.jsonl", ref.Queries)
	check := func(name string, got vecFile, want [][]float64) {
		t.Helper()
		if len(got.ids) != len(want) {
			t.Fatalf("%s: %d vectors; want %d", name, len(got.ids), len(want))
		}
		worst := 1.0
		for i, id := range got.ids {
			var k int
			fmt.Sscan(id, &k)
			worst = min(worst, cosine64(got.floats(i), want[k]))
		}
		t.Logf("%s: min cosine %.7f to sentence-transformers over %d texts", name, worst, len(want))
		if worst < 0.9999 {
			t.Errorf("%s: min cosine %.6f to sentence-transformers; want ≥ 0.9999", name, worst)
		}
	}
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
	cfg := filepath.Join(model, "config.json")
	var m map[string]any
	b, err := os.ReadFile(cfg)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatal(err)
	}
	m["use_bidirectional_attention"] = false
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(work, "models")
	env := append(ortEnv(t), "SYNAPSE_MODELS="+store) // a refused directory is checked after the engine libraries
	in := filepath.Join(work, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "a", "text": "the cell"}})
	for _, args := range [][]string{{"embed", in, "-m", model, "-o", filepath.Join(work, "out.arrow")}, {"models", "add", model}} {
		r := runSynapse(t, env, args...)
		r.wantCode(t, exitUsage)
		for _, w := range []string{"config.json", "use_bidirectional_attention false", "gemma-embedding"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("synapse %s: stderr does not name %q:\n%s", args[0], w, r.stderr)
			}
		}
	}
	s, err := modelcache.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := s.Entries(); len(entries) != 0 {
		t.Errorf("cache entries %v; want none", entries)
	}
}
