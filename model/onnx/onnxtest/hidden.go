//go:build cgo

package onnxtest

import (
	"testing"

	ort "github.com/yalue/onnxruntime_go"
)

// LastHiddenState runs the graph at path through ONNX Runtime directly (not
// through synapse's engine) on one sequence of ids, attention mask 1 and
// token types 0, and returns its last_hidden_state (tokens × width) in
// float64: what tests compute sentence-transformers' modules over
// (STReference). ONNX Runtime's environment must be initialized
// (engine.OpenONNX does it).
func LastHiddenState(t testing.TB, path string, ids []int32) [][]float64 {
	t.Helper()
	sess, err := ort.NewDynamicAdvancedSession(path, []string{"input_ids", "attention_mask", "token_type_ids"}, []string{"last_hidden_state"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Destroy()
	n := len(ids)
	in := [3][]int64{make([]int64, n), make([]int64, n), make([]int64, n)}
	for j, id := range ids {
		in[0][j], in[1][j] = int64(id), 1
	}
	vals := make([]ort.Value, 3)
	for k := range in {
		v, err := ort.NewTensor(ort.NewShape(1, int64(n)), in[k])
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
	w := int(out.GetShape()[2])
	data := out.GetData()
	h := make([][]float64, n)
	for j := range h {
		h[j] = make([]float64, w)
		for d := range w {
			h[j][d] = float64(data[j*w+d])
		}
	}
	return h
}
