//go:build cgo

package convert_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/synapse-embed/synapse/model/convert"
)

// TestModernBERTRerankGraph: the random-weight ModernBERT reranker
// (testdata/modernbert-rerank-tiny, made by transformers, saved by
// sentence-transformers' CrossEncoder) converted to ONNX gives CrossEncoder's
// logits within 1e-3 for both classifier_pooling modes (config.json edited
// to "cls" for the second), its pairs of 30 to 168 tokens run one at a time
// and padded together in one batch: the mean must leave padding out.
func TestModernBERTRerankGraph(t *testing.T) {
	initORT(t)
	var ref struct {
		TokenIDs [][]int32            `json:"token_ids"`
		Scores   map[string][]float64 `json:"scores"`
	}
	b, err := os.ReadFile("testdata/modernbert-rerank-tiny.reference.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	for _, pooling := range []string{"mean", "cls"} {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS("testdata/modernbert-rerank-tiny")); err != nil {
			t.Fatal(err)
		}
		convert.EditJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["classifier_pooling"] = pooling })
		src, err := convert.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		graph := filepath.Join(dir, "model.onnx")
		if err := src.WriteONNX(graph); err != nil {
			t.Fatal(err)
		}
		want := ref.Scores[pooling]
		if len(want) != len(ref.TokenIDs) || len(want) == 0 {
			t.Fatalf("%s: %d scores for %d pairs", pooling, len(want), len(ref.TokenIDs))
		}
		padded := runGraph(t, graph, "logits", ref.TokenIDs)
		worst := [2]float64{}
		for i, ids := range ref.TokenIDs {
			one := runGraph(t, graph, "logits", [][]int32{ids})
			worst[0] = math.Max(worst[0], math.Abs(one[0][0][0]-want[i]))
			worst[1] = math.Max(worst[1], math.Abs(padded[i][0][0]-want[i]))
		}
		t.Logf("%s pooling: max |Δ| to CrossEncoder %.2g unpadded, %.2g padded", pooling, worst[0], worst[1])
		if worst[0] > 1e-3 || worst[1] > 1e-3 {
			t.Errorf("%s pooling: max |Δ| %.4g unpadded, %.4g padded; want ≤ 1e-3", pooling, worst[0], worst[1])
		}
	}
}
