package onnx

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func randFloats(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64())
	}
	return out
}

// quantGraph is a graph with every case the quantizer meets: a named and
// an unnamed MatMul, two MatMuls sharing an activation, two sharing a
// weight, a weight another node also reads, a MatMul whose B is computed, a
// 3-D weight, a Gemm with transB, alpha, beta and C, and unrelated nodes.
func quantGraph() Model {
	r := rand.New(rand.NewPCG(7, 7))
	f := func(name string, dims ...int64) Tensor {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		return Tensor{Name: name, Dims: dims, Floats: randFloats(r, int(n))}
	}
	row := []Dim{{Param: "batch"}, {Value: 4}}
	one := float32(0.5)
	two := float32(2)
	return Model{Producer: "quant-test", Opset: 13, Graph: Graph{
		Name: "q",
		Nodes: []Node{
			{Name: "mm1", Op: "MatMul", Inputs: []string{"x", "W1"}, Outputs: []string{"a"}},
			{Op: "Relu", Inputs: []string{"a"}, Outputs: []string{"r"}},
			{Op: "MatMul", Inputs: []string{"r", "W2"}, Outputs: []string{"b"}},
			{Name: "mm3", Op: "MatMul", Inputs: []string{"x", "W2"}, Outputs: []string{"c"}},
			{Name: "mm4", Op: "MatMul", Inputs: []string{"r", "W3"}, Outputs: []string{"d"}},
			{Name: "keep", Op: "Identity", Inputs: []string{"W3"}, Outputs: []string{"w3copy"}},
			{Name: "computed", Op: "MatMul", Inputs: []string{"r", "a"}, Outputs: []string{"e"}},
			{Name: "gemm", Op: "Gemm", Inputs: []string{"b", "Wg", "Cg"}, Outputs: []string{"g"},
				Attrs: []Attr{IntAttr("transB", 1), {Name: "alpha", Float: &one}, {Name: "beta", Float: &two}}},
			{Name: "threeD", Op: "MatMul", Inputs: []string{"x", "W4"}, Outputs: []string{"h"}},
		},
		Initializers: []Tensor{f("W1", 4, 4), f("W2", 4, 4), f("W3", 4, 4), f("Wg", 3, 4), f("Cg", 3), f("W4", 1, 4, 4)},
		Inputs:       []Value{{Name: "x", Tensor: true, Elem: Float, Dims: row}},
		Outputs: []Value{{Name: "c", Tensor: true, Elem: Float, Dims: row}, {Name: "d", Tensor: true, Elem: Float, Dims: row},
			{Name: "e", Tensor: true, Elem: Float}, {Name: "g", Tensor: true, Elem: Float}, {Name: "h", Tensor: true, Elem: Float},
			{Name: "w3copy", Tensor: true, Elem: Float}},
	}}
}

// The rewritten graph replaces exactly the eligible nodes, each by the
// quantize_dynamic pattern, and keeps every other node, initializer, input,
// output and model field byte for byte.
func TestQuantizeStructure(t *testing.T) {
	src := quantGraph().Marshal()
	out, rep, err := QuantizeDynamic(src)
	if err != nil {
		t.Fatal(err)
	}
	want := QuantizeReport{MatMuls: 4, Gemms: 1, Weights: 4, Activations: 3, Skipped: 2, FloatBytes: 4 * (16 + 16 + 16 + 12), Int8Bytes: 16 + 16 + 16 + 12,
		InBytes: int64(len(src)), OutBytes: int64(len(out))}
	if rep != want {
		t.Errorf("report: got %+v; want %+v", rep, want)
	}
	in, err := parseModel(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseModel(out)
	if err != nil {
		t.Fatalf("the quantized model does not parse: %v", err)
	}
	checkModelFields(t, in, got)
	checkNodes(t, in, got)
	checkInitializers(t, in, got)
	if _, err := Parse(out); err != nil {
		t.Errorf("Parse: %v", err)
	}
}

// checkModelFields: every field but the graph, and every graph field but
// nodes and initializers, is unchanged and in order.
func checkModelFields(t *testing.T, in, got *qmodel) {
	t.Helper()
	other := func(fs []rawField, skip ...protowire.Number) [][]byte {
		var out [][]byte
		for _, f := range fs {
			if !slices.Contains(skip, f.num) {
				out = append(out, f.raw)
			}
		}
		return out
	}
	if !slices.EqualFunc(other(in.fields, 7), other(got.fields, 7), bytes.Equal) {
		t.Error("model fields other than the graph changed")
	}
	if !slices.EqualFunc(other(in.graph, 1, 5), other(got.graph, 1, 5), bytes.Equal) {
		t.Error("graph fields other than nodes and initializers changed")
	}
}

// checkNodes walks the original nodes: an eligible one must be replaced by
// its pattern (DynamicQuantizeLinear the first time its A is seen), any
// other must be there unchanged.
func checkNodes(t *testing.T, in, got *qmodel) {
	t.Helper()
	targets := map[string]bool{"a": true, "b": true, "c": true, "d": true, "g": true}
	rawNode := func(m *qmodel, n qnode) []byte { return m.graph[n.field].raw }
	j := 0
	seenA := map[string]bool{}
	for _, n := range in.nodes {
		if !targets[n.outputs[0]] {
			if j >= len(got.nodes) || !bytes.Equal(rawNode(in, n), rawNode(got, got.nodes[j])) {
				t.Fatalf("node %s (%s): not kept unchanged at position %d", n.name, n.op, j)
			}
			j++
			continue
		}
		ops := []string{"MatMulInteger", "Cast", "Mul", "Mul"}
		if !seenA[n.inputs[0]] {
			ops = append([]string{"DynamicQuantizeLinear"}, ops...)
			seenA[n.inputs[0]] = true
		}
		if n.op == "Gemm" {
			ops = append(ops, "Mul", "Add") // beta·C, then the bias
		}
		var gotOps []string
		for k := j; k < min(j+len(ops), len(got.nodes)); k++ {
			gotOps = append(gotOps, got.nodes[k].op)
		}
		if !slices.Equal(gotOps, ops) {
			t.Fatalf("node %s (%s): replaced by %v; want %v", n.name, n.op, gotOps, ops)
		}
		last := got.nodes[j+len(ops)-1]
		if last.outputs[0] != n.outputs[0] {
			t.Errorf("node %s: the replacement ends in %s; want the original output %s", n.name, last.outputs[0], n.outputs[0])
		}
		mm := got.nodes[j+slices.Index(ops, "MatMulInteger")]
		if len(mm.inputs) != 4 || !strings.HasPrefix(mm.inputs[0], n.inputs[0]+"_quantized") || !strings.HasSuffix(mm.inputs[1], "_quantized") {
			t.Errorf("node %s: MatMulInteger inputs %v", n.name, mm.inputs)
		}
		j += len(ops)
	}
	if j != len(got.nodes) {
		t.Errorf("got %d nodes; want %d", len(got.nodes), j)
	}
}

// checkInitializers: the float weights only quantized nodes read are gone,
// the others unchanged; each column of a quantized weight is
// QuantizeSymmetric of that column of its float weight (transposed for a
// transB Gemm, alpha in the scales).
func checkInitializers(t *testing.T, in, got *qmodel) {
	t.Helper()
	for name, w := range in.inits {
		g, ok := got.inits[name]
		switch {
		case name == "W1" || name == "W2" || name == "Wg":
			if ok {
				t.Errorf("initializer %s: kept; want it dropped (only quantized nodes read it)", name)
			}
		case !ok:
			t.Errorf("initializer %s: dropped; want it kept", name)
		case !bytes.Equal(g.raw, w.raw) || !slices.Equal(g.dims, w.dims):
			t.Errorf("initializer %s changed", name)
		}
	}
	for name, want := range map[string]struct {
		src    string
		transB bool
		alpha  float32
	}{"W1_quantized": {"W1", false, 1}, "W2_quantized": {"W2", false, 1}, "W3_quantized": {"W3", false, 1}, "Wg_gemm_quantized": {"Wg", true, 0.5}} {
		q, ok := got.inits[name]
		if !ok {
			t.Errorf("no initializer %s", name)
			continue
		}
		vals, _ := in.inits[want.src].weights()
		dims := slices.Clone(in.inits[want.src].dims)
		if want.transB {
			tr := make([]float32, len(vals))
			for r := range dims[0] {
				for c := range dims[1] {
					tr[c*dims[0]+r] = vals[r*dims[1]+c]
				}
			}
			vals, dims = tr, []int64{dims[1], dims[0]}
		}
		rows, cols := int(dims[0]), int(dims[1])
		base := strings.TrimSuffix(name, "_quantized")
		sc, _ := got.inits[base+"_scale"].weights()
		zp := got.inits[base+"_zero_point"]
		if q.elem != Int8 || !slices.Equal(q.dims, dims) || len(q.raw) != len(vals) {
			t.Errorf("%s: type %v dims %v; want int8 %v", name, q.elem, q.dims, dims)
			continue
		}
		if len(sc) != cols || zp == nil || zp.elem != Int8 || !bytes.Equal(zp.raw, make([]byte, cols)) || !slices.Equal(zp.dims, []int64{int64(cols)}) {
			t.Errorf("%s: %d scales, zero point %+v; want %d scales and %[4]d int8 zeros", name, len(sc), zp, cols)
			continue
		}
		col := make([]float32, rows)
		for c := range cols { // each column is QuantizeSymmetric of its own values
			for r := range rows {
				col[r] = vals[r*cols+c]
			}
			wq, scale := QuantizeSymmetric(col)
			for r, v := range wq {
				if int8(q.raw[r*cols+c]) != v {
					t.Fatalf("%s[%d][%d] = %d; want %d", name, r, c, int8(q.raw[r*cols+c]), v)
				}
			}
			if sc[c] != scale*want.alpha {
				t.Errorf("%s: scale of column %d %v; want %v", name, c, sc[c], scale*want.alpha)
			}
		}
	}
}

func TestQuantizeSymmetric(t *testing.T) {
	q, s := QuantizeSymmetric([]float32{-2.56, 1.30, 0.02, 0.06, 2.56, 0.1, 0.7})
	if want := float32(0.04); math.Abs(float64(s-want)) > 1e-7 {
		t.Errorf("scale %v; want %v (max|w| / %d)", s, want, WeightMax)
	}
	if want := []int8{-64, 32, 0, 2, 64, 2, 18}; !slices.Equal(q, want) { // 32.5, 0.5, 1.5, 2.5 by round-half-even in float32
		t.Errorf("values %v; want %v", q, want)
	}
	// No product pair of a uint8 activation and two weights leaves int16
	// (vpmaddubsw's saturation), whatever the weights.
	r := rand.New(rand.NewPCG(3, 5))
	for range 100 {
		w := randFloats(r, 1+r.IntN(64))
		for i := range w {
			w[i] *= float32(r.ExpFloat64() * 10)
		}
		q, _ := QuantizeSymmetric(w)
		for i := 1; i < len(q); i++ {
			if pair := 255 * (abs(int(q[i-1])) + abs(int(q[i]))); pair > math.MaxInt16 {
				t.Fatalf("weights %d, %d: 255·(|a|+|b|) = %d saturates int16", q[i-1], q[i], pair)
			}
		}
	}
	if q, s := QuantizeSymmetric(make([]float32, 3)); s != 1 || !slices.Equal(q, []int8{0, 0, 0}) {
		t.Errorf("all zeros: %v, %v; want zeros and scale 1", q, s)
	}
}

// Models the quantizer cannot handle are refused with ErrCannotQuantize and
// a reason.
func TestQuantizeRefuses(t *testing.T) {
	once, _, err := QuantizeDynamic(quantGraph().Marshal())
	if err != nil {
		t.Fatal(err)
	}
	old := quantGraph()
	old.Opset = 10
	noMatMul := testModel()
	ext := quantGraph()
	extGraph := ext.Graph.marshal()
	extTensor := Tensor{Name: "W5", Dims: []int64{4, 4}, Floats: make([]float32, 16)}.marshal()
	extGraph = appendBytes(extGraph, 5, appendVarint(extTensor, 14, 1))
	extModel := appendBytes(appendBytes(appendVarint(nil, 1, 8), 7, extGraph), 8, appendVarint(appendBytes(nil, 1, nil), 2, 13))
	nan := quantGraph()
	nan.Graph.Initializers[0].Floats[3] = float32(math.NaN())
	for name, tc := range map[string]struct {
		model []byte
		want  string
	}{
		"quantized already": {once, "quantized already (it has a DynamicQuantizeLinear node)"},
		"opset 10":          {old.Marshal(), "opset 10"},
		"no MatMul":         {noMatMul.Marshal(), "nothing to quantize"},
		"external data":     {extModel, "initializer W5 keeps its data in an external file"},
		"NaN weight":        {nan.Marshal(), "initializer W1: value 3 is NaN"},
	} {
		_, _, err := QuantizeDynamic(tc.model)
		if !errors.Is(err, ErrCannotQuantize) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v; want ErrCannotQuantize saying %q", name, err, tc.want)
		}
	}
	if _, _, err := QuantizeDynamic([]byte("not a model")); !errors.Is(err, ErrFormat) {
		t.Errorf("garbage: got %v; want ErrFormat", err)
	}
}

// QuantizeFile writes a new file only, and CheckQuantize reports what it
// would do without writing.
func TestQuantizeFile(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "m.onnx"), filepath.Join(dir, "q.onnx")
	if err := quantGraph().WriteFile(src); err != nil {
		t.Fatal(err)
	}
	plan, err := CheckQuantize(src)
	if err != nil || plan.MatMuls != 4 || plan.Gemms != 1 {
		t.Fatalf("CheckQuantize: %+v, %v", plan, err)
	}
	rep, err := QuantizeFile(src, dst)
	if err != nil || rep.MatMuls != plan.MatMuls || rep.OutBytes == 0 {
		t.Fatalf("QuantizeFile: %+v, %v", rep, err)
	}
	if st, err := os.Stat(dst); err != nil || st.Size() != rep.OutBytes {
		t.Errorf("the written file: %v, %v; want %d bytes", st, err, rep.OutBytes)
	}
	if _, err := QuantizeFile(src, dst); err == nil {
		t.Error("over an existing file: got no error")
	}
	if _, err := QuantizeFile(filepath.Join(dir, "m.onnx"), filepath.Join(dir, "none", "q.onnx")); err == nil {
		t.Error("into a missing directory: got no error")
	}
}

// FuzzQuantize: QuantizeDynamic never panics, and what it writes parses.
func FuzzQuantize(f *testing.F) {
	valid := quantGraph().Marshal()
	f.Add(valid)                // a valid model
	f.Add(valid[:len(valid)/2]) // truncated
	f.Add([]byte("not an onnx model"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := QuantizeDynamic(b)
		if err != nil {
			return
		}
		if _, err := parseModel(out); err != nil {
			t.Fatalf("the quantized model does not parse: %v", err)
		}
	})
}

func abs(x int) int { return max(x, -x) }
