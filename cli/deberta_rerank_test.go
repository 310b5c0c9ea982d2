//go:build cgo

package cli

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebertaRerank: a DeBERTa-v3 cross-encoder's directory
// (DebertaV2ForSequenceClassification, one logit; the random-weight
// model/convert/testdata/deberta-tiny saved by sentence-transformers'
// CrossEncoder, examples/models/tiny_deberta.py) reranks with -m DIR,
// converted to ONNX, within 1e-3 of CrossEncoder.predict's scores — raw
// logits, and with --sigmoid its default sigmoid — over pairs of 7 to 128
// tokens (keys up to 127 positions from their queries, far into the log
// buckets that keep 8 positions exact each way), two of them cut to 128
// tokens (the document's end dropped, as CrossEncoder's truncation drops
// it, and marked truncated). The same for deberta-v2-tiny (token types 0
// and 1 fed to type embeddings, no buckets: relative positions clamped at
// 48, rel_embeddings without LayerNorm). Inspect names the architecture and the route.
// Rerank runs are unpadded (pairs of one length per run); the padded graph
// is checked in the engine (TestDebertaPadded).
func TestDebertaRerank(t *testing.T) {
	for _, name := range []string{"deberta-tiny", "deberta-v2-tiny"} {
		checkDebertaRerank(t, name)
	}
}

// checkDebertaRerank reranks the reference pairs of testdata/NAME and
// compares the scores with CrossEncoder's; inspect must name the route.
func checkDebertaRerank(t *testing.T, name string) {
	t.Helper()
	model := "../model/convert/testdata/" + name
	var ref struct {
		Pairs     []struct{ Query, Doc string }
		Scores    []float64 `json:"scores"`
		Sigmoid   []float64 `json:"sigmoid"`
		Truncated []bool    `json:"truncated"`
	}
	readConvertReference(t, name, &ref)
	if len(ref.Pairs) == 0 || len(ref.Scores) != len(ref.Pairs) || len(ref.Sigmoid) != len(ref.Pairs) || len(ref.Truncated) != len(ref.Pairs) {
		t.Fatalf("reference: %d pairs, %d scores, %d sigmoid scores, %d truncated flags", len(ref.Pairs), len(ref.Scores), len(ref.Sigmoid), len(ref.Truncated))
	}
	dir := t.TempDir()
	env := append(ortEnv(t), "SYNAPSE_MODELS="+filepath.Join(dir, "models"))
	var rows []map[string]any
	for i, p := range ref.Pairs {
		rows = append(rows, map[string]any{"query_id": fmt.Sprintf("q%d", i), "query": p.Query,
			"candidates": []map[string]any{{"id": fmt.Sprintf("d%d", i), "text": p.Doc}}})
	}
	in := filepath.Join(dir, "q.jsonl")
	writeJSONL(t, in, rows)
	for _, tc := range []struct {
		flag string
		want []float64
	}{{"", ref.Scores}, {"--sigmoid", ref.Sigmoid}} {
		out := filepath.Join(dir, "out"+tc.flag+".jsonl")
		args := []string{"rerank", in, "-m", model, "-o", out, "--workers", "1", "--threads", "1"}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		runSynapse(t, env, args...).wantCode(t, exitOK)
		got := readRerankJSONL(t, out)
		if len(got) != len(ref.Pairs) {
			t.Fatalf("rerank %s: %d rows; want %d", tc.flag, len(got), len(ref.Pairs))
		}
		worst := 0.0
		for _, r := range got {
			var k int
			fmt.Sscanf(r.DocID, "d%d", &k)
			d := math.Abs(float64(r.Score) - tc.want[k])
			worst = max(worst, d)
			if d > 1e-3 {
				t.Errorf("rerank %s: pair %d scored %.6f; CrossEncoder %.6f (want within 1e-3)", tc.flag, k, r.Score, tc.want[k])
			}
			if r.Truncated != ref.Truncated[k] {
				t.Errorf("rerank %s: pair %d truncated %v; want %v", tc.flag, k, r.Truncated, ref.Truncated[k])
			}
		}
		t.Logf("%s, rerank %s: max |score - CrossEncoder| %.2g over %d pairs", name, tc.flag, worst, len(got))
	}
	res := runSynapse(t, env, "inspect", model)
	res.wantCode(t, exitOK)
	for _, want := range []string{"deberta-v2", "converted from ", name + " (safetensors) to ONNX, run by ONNX Runtime",
		"cross-encoder (synapse rerank)", "pair            [CLS] A:0 [SEP] B:1 [SEP]:1"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("inspect lacks %q:\n%s", want, res.stdout)
		}
	}
}
