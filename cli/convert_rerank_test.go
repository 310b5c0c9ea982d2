//go:build cgo

package cli

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModernBERTRerank: a ModernBERT reranker's directory
// (ModernBertForSequenceClassification, one label, saved as
// sentence-transformers' CrossEncoder saves gte-reranker-modernbert-base;
// model/convert/testdata/modernbert-rerank-tiny) reranks with -m DIR,
// converted to ONNX, giving CrossEncoder's scores within 1e-3 with either
// classifier_pooling ("mean", as saved, and "cls", config.json edited), on 1
// worker and 2, and with --sigmoid CrossEncoder.predict's default (sigmoid)
// scores; inspect names the route and the cross-encoder. (Rerank's
// ONNX runs are never padded; model/convert's TestModernBERTRerankGraph runs
// the same pairs padded.) A head synapse does not convert is refused with
// exit 2 before any output.
func TestModernBERTRerank(t *testing.T) {
	src := "../model/convert/testdata/modernbert-rerank-tiny"
	var ref struct {
		Pairs  [][2]string          `json:"pairs"`
		Scores map[string][]float64 `json:"scores"`
	}
	readConvertReference(t, "modernbert-rerank-tiny", &ref)
	work := t.TempDir()
	in := filepath.Join(work, "pairs.jsonl")
	var rows []map[string]any
	for i, p := range ref.Pairs {
		rows = append(rows, map[string]any{"query_id": fmt.Sprintf("q%d", i), "query": p[0],
			"candidates": []map[string]any{{"id": fmt.Sprintf("d%d", i), "text": p[1]}}})
	}
	writeJSONL(t, in, rows)
	env := append(ortEnv(t), "SYNAPSE_MODELS="+filepath.Join(work, "models"))
	edited := func(key string, value any) string {
		dir := filepath.Join(t.TempDir(), "modernbert-rerank-tiny")
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		setJSON(t, filepath.Join(dir, "config.json"), key, value)
		return dir
	}
	for _, pooling := range []string{"mean", "cls"} {
		model := src
		if pooling == "cls" {
			model = edited("classifier_pooling", "cls")
		}
		for _, workers := range []string{"1", "2"} {
			out := filepath.Join(work, pooling+"-"+workers+".jsonl")
			runSynapse(t, env, "rerank", in, "-m", model, "-o", out, "--workers", workers, "--threads", "1").wantCode(t, exitOK)
			got := readRerankJSONL(t, out)
			if len(got) != len(ref.Pairs) {
				t.Fatalf("%s pooling, %s workers: %d rows; want %d", pooling, workers, len(got), len(ref.Pairs))
			}
			worst := 0.0
			for _, r := range got {
				var i int
				fmt.Sscanf(r.DocID, "d%d", &i)
				worst = math.Max(worst, math.Abs(float64(r.Score)-ref.Scores[pooling][i]))
			}
			t.Logf("%s pooling, %s workers: max |Δ| %.2g to CrossEncoder over %d pairs", pooling, workers, worst, len(got))
			if worst > 1e-3 {
				t.Errorf("%s pooling, %s workers: max |Δ| %.4g to CrossEncoder; want ≤ 1e-3", pooling, workers, worst)
			}
		}
	}
	// --sigmoid: what CrossEncoder.predict gives by default for one label
	// (its config_sentence_transformers.json names Sigmoid).
	sig := filepath.Join(work, "sigmoid.jsonl")
	runSynapse(t, env, "rerank", in, "-m", src, "-o", sig, "--workers", "1", "--threads", "1", "--sigmoid").wantCode(t, exitOK)
	sigRows := readRerankJSONL(t, sig)
	if len(sigRows) != len(ref.Pairs) {
		t.Fatalf("--sigmoid: %d rows; want %d", len(sigRows), len(ref.Pairs))
	}
	for _, r := range sigRows {
		var i int
		fmt.Sscanf(r.DocID, "d%d", &i)
		if want := 1 / (1 + math.Exp(-ref.Scores["mean"][i])); math.Abs(float64(r.Score)-want) > 1e-3 {
			t.Errorf("--sigmoid: %s scored %.6f; CrossEncoder.predict %.6f", r.DocID, r.Score, want)
		}
	}
	res := runSynapse(t, env, "inspect", src)
	res.wantCode(t, exitOK)
	for _, want := range []string{"architecture    modernbert", "modernbert-rerank-tiny (safetensors) to ONNX, run by ONNX Runtime", "cross-encoder (synapse rerank)", "logits[0] (1 label)"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("inspect lacks %q:\n%s", want, res.stdout)
		}
	}
	out := filepath.Join(work, "refused.jsonl")
	bad := edited("classifier_pooling", "max")
	r := runSynapse(t, env, "rerank", in, "-m", bad, "-o", out)
	r.wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, "config.json") || !strings.Contains(r.stderr, `classifier_pooling "max"`) {
		t.Errorf("classifier_pooling max: stderr %q; want config.json and the setting named", r.stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("the refused reranker wrote %s", out)
	}
}
