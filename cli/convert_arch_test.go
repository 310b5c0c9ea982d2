package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
)

// checkConvertedReference runs the random-weight checkpoint NAME of
// model/convert/testdata (made by transformers and saved by
// sentence-transformers: examples/models/tiny_*.py) from its directory with
// -m DIR, converted to ONNX, and compares its vectors with the
// sentence-transformers vectors committed beside it (cosine ≥ 0.9999), in
// small requests and large ones (the CLI's ONNX runs are unpadded; the
// engine's TestONNXConvertedPadded runs them padded); inspect must name the
// architecture and the route. --truncate: sentence-transformers truncates at
// max_seq_length.
func checkConvertedReference(t *testing.T, name, arch string) {
	t.Helper()
	model := "../model/convert/testdata/" + name
	var ref struct {
		Texts   []string    `json:"texts"`
		Vectors [][]float64 `json:"vectors"`
	}
	readConvertReference(t, name, &ref)
	dir := t.TempDir()
	env := []string{"SYNAPSE_MODELS=" + filepath.Join(dir, "models"), "SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	var docs []map[string]any
	for i, s := range ref.Texts {
		docs = append(docs, map[string]any{"id": fmt.Sprint(i), "text": s})
	}
	in := filepath.Join(dir, "docs.jsonl")
	writeJSONL(t, in, docs)
	for _, tc := range []struct{ how, batch string }{{"requests of 128 tokens", "128"}, {"requests of 4,096 tokens", "4096"}} {
		out := filepath.Join(dir, "docs-"+tc.batch+".arrow")
		runSynapse(t, env, embedArgs(in, model, out, "--truncate", "--batch-tokens", tc.batch)...).wantCode(t, exitOK)
		got := readVecFile(t, out)
		worst := 1.0
		for i, id := range got.ids {
			var k int
			fmt.Sscan(id, &k)
			worst = min(worst, cosine64(got.floats(i), ref.Vectors[k]))
		}
		t.Logf("%s, %s: min cosine %.7f to sentence-transformers over %d texts", name, tc.how, worst, len(got.ids))
		if len(got.ids) != len(ref.Texts) || worst < 0.9999 {
			t.Errorf("%s, %s: %d vectors, min cosine %.6f; want %d at ≥ 0.9999", name, tc.how, len(got.ids), worst, len(ref.Texts))
		}
	}
	res := runSynapse(t, env, "inspect", model)
	res.wantCode(t, exitOK)
	if !strings.Contains(res.stdout, arch) {
		t.Errorf("inspect does not name the architecture %s:\n%s", arch, res.stdout)
	}
	if !strings.Contains(res.stdout, "route            converted from ") || !strings.Contains(res.stdout, name+" (safetensors) to ONNX, run by ONNX Runtime") {
		t.Errorf("inspect does not name the route (converted to ONNX):\n%s", res.stdout)
	}
}

// TestDistilBERTEmbedding: a DistilBERT embedder's directory, saved as
// multi-qa-distilbert-cos-v1 is (Transformer, Pooling mean, Normalize),
// gives sentence-transformers' vectors.
func TestDistilBERTEmbedding(t *testing.T) {
	checkConvertedReference(t, "distilbert-tiny", "distilbert")
}

// TestMPNetEmbedding: an MPNet embedder's directory, saved as
// all-mpnet-base-v2 is, gives sentence-transformers' vectors — a text of
// 158 tokens, truncated to 128, puts keys up to 127 positions from their
// queries, in the logarithmic buckets of the relative position bias.
func TestMPNetEmbedding(t *testing.T) { checkConvertedReference(t, "mpnet-tiny", "mpnet") }

// TestModernBERTEmbedding: a ModernBERT embedder's directory, saved as
// modernbert-embed-base is, gives sentence-transformers' vectors — texts of
// up to 119 tokens against local layers that see 8 positions each way, and
// rotary positions of two bases.
func TestModernBERTEmbedding(t *testing.T) {
	checkConvertedReference(t, "modernbert-tiny", "modernbert")
}
