//go:build cgo

package convert_test

import (
	"math"
	"path/filepath"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/synapse-embed/synapse/engine"
	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/convert"
	"github.com/synapse-embed/synapse/model/convert/converttest"
)

// initORT initializes ONNX Runtime's environment (once per process).
func initORT(t testing.TB) {
	t.Helper()
	if _, err := engine.OpenONNX(engine.ONNXOptions{Lib: testenv.ORTLib(t)}); err != nil {
		t.Fatal(err)
	}
}

// runGraph runs the graph at path through ONNX Runtime on the sequences,
// padded to the longest (attention mask 0, id 0) in one batch, and returns
// each sequence's unpadded rows of output (last_hidden_state or logits).
func runGraph(t testing.TB, path, output string, seqs [][]int32) [][][]float64 {
	t.Helper()
	sess, err := ort.NewDynamicAdvancedSession(path, []string{"input_ids", "attention_mask", "token_type_ids"}, []string{output}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Destroy()
	n := 0
	for _, s := range seqs {
		n = max(n, len(s))
	}
	b := len(seqs)
	in := [3][]int64{make([]int64, b*n), make([]int64, b*n), make([]int64, b*n)}
	for i, s := range seqs {
		for j, id := range s {
			in[0][i*n+j], in[1][i*n+j] = int64(id), 1
		}
	}
	vals := make([]ort.Value, 3)
	for k := range in {
		v, err := ort.NewTensor(ort.NewShape(int64(b), int64(n)), in[k])
		if err != nil {
			t.Fatal(err)
		}
		defer v.Destroy()
		vals[k] = v
	}
	outs := []ort.Value{nil}
	if err := sess.Run(vals, outs); err != nil {
		t.Fatal(err)
	}
	defer outs[0].Destroy()
	out := outs[0].(*ort.Tensor[float32])
	shape, data := out.GetShape(), out.GetData()
	res := make([][][]float64, b)
	if len(shape) == 2 { // logits [batch, labels]
		w := int(shape[1])
		for i := range res {
			res[i] = [][]float64{toF64(data[i*w : (i+1)*w])}
		}
		return res
	}
	w := int(shape[2])
	for i, s := range seqs {
		for j := range s {
			res[i] = append(res[i], toF64(data[(i*n+j)*w:(i*n+j+1)*w]))
		}
	}
	return res
}

func toF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func maxDiff(a, b [][]float64) float64 {
	var m float64
	for i := range a {
		for d := range a[i] {
			m = math.Max(m, math.Abs(a[i][d]-b[i][d]))
		}
	}
	return m
}

var testSeqs = [][]int32{{2, 13, 14, 3}, {2, 5, 6, 7, 8, 9, 10, 11, 12, 3}, {2, 3}}

// TestGraphMatchesReference: a converted random checkpoint's
// last_hidden_state (a classifier's logits), run through ONNX Runtime in
// one padded batch, is the float64 computation of transformers' encoder
// (converttest) to 1e-4: for each weight prefix, RoBERTa's position
// offset, F16 and BF16 weights, sharded weights, a classifier head, and a
// masked LM's head (logits [batch, seq, vocab]), tied and untied.
func TestGraphMatchesReference(t *testing.T) {
	initORT(t)
	with := func(edit func(*converttest.BERT)) converttest.BERT {
		b := converttest.Tiny()
		edit(&b)
		return b
	}
	tests := []struct {
		name string
		b    converttest.BERT
	}{
		{"BertModel", converttest.Tiny()},
		{"BertForMaskedLM eps 1e-5", with(func(b *converttest.BERT) { b.Arch, b.Prefix, b.Eps = "BertForMaskedLM", "bert.", 1e-5 })},
		{"XLMRobertaModel", with(func(b *converttest.BERT) {
			b.Arch, b.Offset, b.PadID, b.Prefix = "XLMRobertaModel", true, 1, "roberta."
		})},
		{"F16 weights", with(func(b *converttest.BERT) { b.DType = "F16" })},
		{"BF16 weights", with(func(b *converttest.BERT) { b.DType = "BF16" })},
		{"three shards", with(func(b *converttest.BERT) { b.Shards = 3 })},
		{"BertForSequenceClassification", with(func(b *converttest.BERT) { b.Prefix, b.Labels = "bert.", 1 })},
		{"BertForMaskedLM MLM head tied", with(func(b *converttest.BERT) { b.Arch, b.Prefix, b.MLM = "BertForMaskedLM", "bert.", true })},
		{"BertForMaskedLM MLM head untied", with(func(b *converttest.BERT) {
			b.Arch, b.Prefix, b.MLM, b.Untied = "BertForMaskedLM", "bert.", true, true
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.b
			dir := t.TempDir()
			if err := b.WriteDir(dir); err != nil {
				t.Fatal(err)
			}
			src, err := convert.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			graph := filepath.Join(t.TempDir(), "model.onnx")
			if err := src.WriteONNX(graph); err != nil {
				t.Fatal(err)
			}
			got := runGraph(t, graph, "last_hidden_state", testSeqs)
			var logits [][][]float64
			if b.Labels > 0 || b.MLM {
				logits = runGraph(t, graph, "logits", testSeqs)
			}
			for i, s := range testSeqs {
				d := maxDiff(got[i], b.HiddenStates(s))
				if b.Labels > 0 {
					d = math.Max(d, maxDiff(logits[i], [][]float64{b.Logits(s)}))
				}
				if b.MLM {
					want := b.MLMLogits(s)
					if len(logits[i]) != len(want) || len(logits[i][0]) != len(want[0]) {
						t.Fatalf("sequence %d: logits %d × %d; want %d × %d", i, len(logits[i]), len(logits[i][0]), len(want), len(want[0]))
					}
					d = math.Max(d, maxDiff(logits[i], want))
				}
				t.Logf("sequence %d: max abs diff %.3g", i, d)
				if d > 1e-4 {
					t.Errorf("sequence %d: max abs diff %g; want ≤ 1e-4", i, d)
				}
			}
		})
	}
}
