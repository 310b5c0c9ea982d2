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
// last_hidden_state, run through ONNX Runtime in one padded batch, is the
// float64 computation of transformers' encoder (converttest) to 1e-4,
// for each weight prefix and RoBERTa's position offset.
func TestGraphMatchesReference(t *testing.T) {
	initORT(t)
	roberta := converttest.Tiny()
	roberta.Arch, roberta.Offset, roberta.PadID, roberta.Prefix = "XLMRobertaModel", true, 1, "roberta."
	masked := converttest.Tiny()
	masked.Arch, masked.Prefix, masked.Eps = "BertForMaskedLM", "bert.", 1e-5
	for name, b := range map[string]converttest.BERT{"BertModel": converttest.Tiny(), "BertForMaskedLM": masked, "XLMRobertaModel": roberta} {
		t.Run(name, func(t *testing.T) {
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
			for i, s := range testSeqs {
				want := b.HiddenStates(s)
				d := maxDiff(got[i], want)
				t.Logf("sequence %d: max abs diff %.3g", i, d)
				if d > 1e-4 {
					t.Errorf("sequence %d: max abs diff %g; want ≤ 1e-4", i, d)
				}
			}
		})
	}
}
