//go:build cgo

package cli

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/testmodels"
)

// End-to-end tests of cross-encoders in the model cache: an ONNX
// cross-encoder added (and quantized to int8) and reranking by its cached
// name; cross-encoders whose labels synapse cannot read as one score
// refused by `models add` before the cache is touched.

// writeRerankQueries writes a grouped rerank input of 4 queries with 5
// candidates each from the generated corpus.
func writeRerankQueries(t *testing.T, path string) {
	t.Helper()
	docs := testmodels.Corpus(24)
	var rows []map[string]any
	for q := range 4 {
		var cands []map[string]any
		for c := range 5 {
			d := docs[4+q*5+c]
			cands = append(cands, map[string]any{"id": d.ID, "text": d.Text})
		}
		rows = append(rows, map[string]any{"query_id": fmt.Sprintf("q%d", q), "query": docs[q].Title, "candidates": cands})
	}
	writeJSONL(t, path, rows)
}

// TestModelsCrossEncoder: `models add DIR --quantize int8` takes a
// generated ONNX cross-encoder and makes its int8 variant, measured on
// scores; `rerank -m NAME` by the cached name gives the bytes `rerank -m
// DIR` gives, and the variant reranks by its name too, its scores near the
// source's.
func TestModelsCrossEncoder(t *testing.T) {
	m := newONNXModelsEnv(t)
	dir, _ := writeCrossModel(t, 96, 2)
	out, errOut := m.must(0, "models", "add", dir, "--quantize", "int8", "--threads", "1", "--rounds", "1")
	var minCorr, meanCorr float64
	if _, err := fmt.Sscanf(out[strings.Index(out, "per query: ")+len("per query: "):], "min %f, mean %f", &minCorr, &meanCorr); err != nil || minCorr < 0.99 || meanCorr < minCorr || strings.Contains(errOut, "degraded") {
		t.Errorf("int8 cross-encoder: score correlation min %.6f (%v), stderr %q; want ≥ 0.99 and not degraded", minCorr, err, errOut)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "quality") || strings.HasPrefix(line, "quantized") {
			t.Logf("%s", line)
		}
	}
	for _, want := range []string{"added     cross-2 ", " rerank, ", "quantized cross-2:int8 ", "INT8", "quality   score correlation to F32 per query: min ", "over 96 pairs", "speed     "} {
		if !strings.Contains(out, want) {
			t.Errorf("models add --quantize int8: stdout lacks %q:\n%s", want, out)
		}
	}
	entries := m.ls()
	if len(entries) != 2 || entries[0].Name != "cross-2" || entries[1].Name != "cross-2:int8" || entries[1].Of != entries[0].Digest {
		t.Fatalf("entries: %+v; want cross-2 and its INT8 variant", entries)
	}
	work := t.TempDir()
	in := filepath.Join(work, "q.jsonl")
	writeRerankQueries(t, in)
	rerank := func(model, name string) []byte {
		t.Helper()
		path := filepath.Join(work, name+".jsonl")
		m.must(0, "rerank", in, "-m", model, "-o", path, "--workers", "1", "--threads", "1")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	byDir, byName := rerank(dir, "dir"), rerank("cross-2", "name")
	if string(byDir) != string(byName) {
		t.Errorf("rerank -m cross-2 differs from -m %s:\n%s\nvs\n%s", dir, byName, byDir)
	}
	rerank("cross-2:int8", "int8")
	src, q8 := readRerankJSONL(t, filepath.Join(work, "dir.jsonl")), readRerankJSONL(t, filepath.Join(work, "int8.jsonl"))
	if len(src) != 20 || len(q8) != len(src) {
		t.Fatalf("rows: %d from the source, %d from the variant; want 20 each", len(src), len(q8))
	}
	same := 0
	for i := range src {
		if src[i].DocID != q8[i].DocID || math.Abs(float64(src[i].Score-q8[i].Score)) > 0.05 {
			t.Errorf("row %d: source %s %.5f, int8 %s %.5f; want the same document within 0.05", i, src[i].DocID, src[i].Score, q8[i].DocID, q8[i].Score)
		}
		if src[i].Score == q8[i].Score {
			same++
		}
	}
	if same == len(src) {
		t.Errorf("the int8 variant scored every pair exactly as the source: not the variant?")
	}
}

// TestModelsCrossEncoderRefused: cross-encoders synapse cannot read as one
// score (ONNX: three labels, or two whose label 1 is not the positive class;
// GGUF: the same in classifier.output_labels) are refused by `models add`
// with exit 2 and the reason, before any entry or staging exists.
func TestModelsCrossEncoderRefused(t *testing.T) {
	m := newONNXModelsEnv(t)
	three, _ := writeCrossModel(t, 96, 3, "contradiction", "entailment", "neutral")
	swapped, _ := writeCrossModel(t, 96, 2, "relevant", "irrelevant")
	for _, tt := range []struct{ model, why string }{
		{three, "a classifier with 3 labels (0=\"contradiction\""},
		{swapped, "2 labels (0=\"relevant\", 1=\"irrelevant\")"},
		{testmodels.LabelledReranker(t, "relevant", "irrelevant"), "2 labels (0=\"relevant\", 1=\"irrelevant\")"},
		{testmodels.LabelledReranker(t, "contradiction", "entailment", "neutral"), "a classifier with 3 labels"},
	} {
		_, errOut, code := m.run(nil, "models", "add", tt.model)
		if code != exitUsage || !strings.Contains(errOut, "add "+tt.model) || !strings.Contains(errOut, "cannot rerank with") || !strings.Contains(errOut, tt.why) {
			t.Errorf("models add %s: exit %d, %q; want %d naming the model and saying %q", tt.model, code, errOut, exitUsage, tt.why)
		}
		if strings.Contains(errOut, "validating") || strings.Contains(errOut, "worker") {
			t.Errorf("models add %s: %q; want the refusal before a worker starts", tt.model, errOut)
		}
	}
	if entries := m.ls(); len(entries) != 0 {
		t.Errorf("entries after the refusals: %+v; want none", entries)
	}
	// rerank -m FILE refuses them too, before any work.
	work := t.TempDir()
	in, out := filepath.Join(work, "q.jsonl"), filepath.Join(work, "out.jsonl")
	writeRerankQueries(t, in)
	for _, model := range []string{swapped, testmodels.LabelledReranker(t, "relevant", "irrelevant")} {
		_, errOut, code := m.run(nil, "rerank", in, "-m", model, "-o", out)
		if code != exitUsage || !strings.Contains(errOut, "cannot rerank") || !strings.Contains(errOut, `0="relevant"`) {
			t.Errorf("rerank -m %s: exit %d, %q; want %d saying why", model, code, errOut, exitUsage)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("rerank -m %s wrote %s", model, out)
		}
	}
	if s := m.staged(); len(s) != 0 {
		t.Errorf("staging after the refusals: %v; want nothing", s)
	}
}
