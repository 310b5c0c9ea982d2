package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// TestInspectONNXKind: inspect says which kind an ONNX directory is (a
// ColBERT model's width is its projection's); for a
// cross-encoder its labels, score rule and pair layout, or why it cannot
// rerank.
func TestInspectONNXKind(t *testing.T) {
	dir := t.TempDir()
	embedder := filepath.Join(dir, "embedder")
	if _, err := onnxtest.WriteDir(embedder, onnxtest.Dir{Encoder: onnxtest.Tiny()}); err != nil {
		t.Fatal(err)
	}
	mlm := filepath.Join(dir, "mlm")
	enc := onnxtest.Tiny()
	enc.MLM, enc.NoHidden, enc.Pooled = true, true, false
	enc, err := onnxtest.WriteDir(mlm, onnxtest.Dir{Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	colbert := filepath.Join(dir, "colbert")
	if _, err := onnxtest.WriteDir(colbert, onnxtest.Dir{Encoder: onnxtest.Encoder{Vocab: 64, Hidden: 8, Positions: 32, Seed: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := onnxtest.WriteST(colbert, onnxtest.ST{Dense: []onnxtest.Dense{{In: 8, Out: 4, NoBias: true, Activation: "torch.nn.modules.linear.Identity"}}}); err != nil {
		t.Fatal(err)
	}
	cross := func(name string, labels int, names ...string) string {
		p := filepath.Join(dir, name)
		if _, err := onnxtest.WriteCrossDir(p, onnxtest.CrossDir{Labels: names,
			CrossEncoder: onnxtest.CrossEncoder{Hidden: 8, Positions: 32, Labels: labels, Seed: 1}}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, path string
		want       onnxModelInfo
		text       []string
	}{
		{"embedder", embedder, onnxModelInfo{Kind: "embedder", Dims: 8}, []string{"embedder (synapse embed)", "embedding width"}},
		{"ColBERT", colbert, onnxModelInfo{Kind: "multi-vector", Dims: 4}, []string{"multi-vector, ColBERT (synapse embed --vectors tokens)", "token vector width", `markers "[D] "/"[Q] "`}},
		{"masked-LM", mlm, onnxModelInfo{Kind: "masked-lm", Dims: int64(enc.Vocab)}, []string{"masked-lm (synapse embed --vectors sparse)", "vocabulary width"}},
		{"1 label", cross("one", 1), onnxModelInfo{Kind: "cross-encoder", Labels: 1, Scoring: "logits[0] (1 label)",
			PairLayout: "[CLS] A:0 [SEP] B:1 [SEP]:1"}, []string{"cross-encoder (synapse rerank)", "logits[0]", "[CLS] A:0 [SEP] B:1 [SEP]:1"}},
		{"2 labels", cross("two", 2), onnxModelInfo{Kind: "cross-encoder", Labels: 2, Scoring: "logits[1] - logits[0] (2 labels, label 1 positive)",
			PairLayout: "[CLS] A:0 [SEP] B:1 [SEP]:1"}, []string{"logits[1] - logits[0]"}},
		{"3 labels", cross("three", 3, "contradiction", "entailment", "neutral"), onnxModelInfo{Kind: "cross-encoder", Labels: 3,
			PairLayout: "[CLS] A:0 [SEP] B:1 [SEP]:1"}, []string{"cannot rerank", "3 labels"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "inspect", "--json", tc.path)
			if code != 0 {
				t.Fatalf("exit %d; want 0; stderr: %s", code, errOut)
			}
			var got onnxModelInfo
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			if got.Kind != tc.want.Kind || got.Labels != tc.want.Labels || got.Scoring != tc.want.Scoring ||
				got.PairLayout != tc.want.PairLayout || tc.want.Dims != 0 && got.Dims != tc.want.Dims {
				t.Errorf("got kind %q labels %d scoring %q pair %q dims %d; want %q %d %q %q %d", got.Kind, got.Labels, got.Scoring,
					got.PairLayout, got.Dims, tc.want.Kind, tc.want.Labels, tc.want.Scoring, tc.want.PairLayout, tc.want.Dims)
			}
			if (got.ScoringError != "") != (tc.name == "3 labels") {
				t.Errorf("scoring_error %q", got.ScoringError)
			}
			_, text, _ := runCLI(t, "inspect", tc.path)
			for _, w := range tc.text {
				if !strings.Contains(text, w) {
					t.Errorf("text output lacks %q:\n%s", w, text)
				}
			}
		})
	}
}
