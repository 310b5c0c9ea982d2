package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
)

// TestDistilBERTEmbedding: a DistilBERT embedder's Hub directory
// (safetensors, saved by sentence-transformers as multi-qa-distilbert-cos-v1
// is: Transformer, Pooling mean, Normalize) runs with -m DIR, converted to
// ONNX; its vectors are sentence-transformers' (cosine ≥ 0.9999) on unseen
// texts, in padded batches and one text a request.
func TestDistilBERTEmbedding(t *testing.T) {
	const model = "../model/convert/testdata/distilbert-tiny"
	b, err := os.ReadFile("../model/convert/testdata/distilbert-tiny.reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Texts   []string    `json:"texts"`
		Vectors [][]float64 `json:"vectors"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := []string{"SYNAPSE_MODELS=" + filepath.Join(dir, "models"), "SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	var docs []map[string]any
	for i, s := range ref.Texts {
		docs = append(docs, map[string]any{"id": fmt.Sprint(i), "text": s})
	}
	in := filepath.Join(dir, "docs.jsonl")
	writeJSONL(t, in, docs)
	for _, tc := range []struct{ name, batch string }{{"one text a request", "64"}, {"padded batches", "4096"}} {
		out := filepath.Join(dir, "docs-"+tc.batch+".arrow")
		// --truncate: sentence-transformers truncates at max_seq_length (64)
		runSynapse(t, env, embedArgs(in, model, out, "--truncate", "--batch-tokens", tc.batch)...).wantCode(t, exitOK)
		got := readVecFile(t, out)
		worst := 1.0
		for i, id := range got.ids {
			var k int
			fmt.Sscan(id, &k)
			worst = min(worst, cosine64(got.floats(i), ref.Vectors[k]))
		}
		t.Logf("%s: min cosine %.7f to sentence-transformers over %d texts", tc.name, worst, len(got.ids))
		if len(got.ids) != len(ref.Texts) || worst < 0.9999 {
			t.Errorf("%s: %d vectors, min cosine %.6f; want %d at ≥ 0.9999", tc.name, len(got.ids), worst, len(ref.Texts))
		}
	}
	res := runSynapse(t, env, "inspect", model)
	res.wantCode(t, exitOK)
	if !strings.Contains(res.stdout, "distilbert") {
		t.Errorf("inspect does not name the architecture:\n%s", res.stdout)
	}
}
