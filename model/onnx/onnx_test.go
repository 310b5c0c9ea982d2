package onnx

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/synapse-embed/synapse/engine/testenv"
)

func testModel() Model {
	bs := []Dim{{Param: "batch"}, {Param: "sequence"}}
	return Model{Producer: "test", Opset: 14, Graph: Graph{
		Name: "g",
		Nodes: []Node{
			{Op: "Gather", Inputs: []string{"E", "input_ids"}, Outputs: []string{"x"}, Attrs: []Attr{IntAttr("axis", 0)}},
			{Op: "Identity", Inputs: []string{"x"}, Outputs: []string{"last_hidden_state"}},
			{Op: "FusedThing", Domain: "com.microsoft", Inputs: []string{"x"}, Outputs: []string{"y"}},
		},
		Initializers: []Tensor{{Name: "E", Dims: []int64{4, 3}, Floats: make([]float32, 12)}, {Name: "k", Dims: []int64{2}, Ints: []int64{1, 2}}},
		Inputs: []Value{{Name: "input_ids", Tensor: true, Elem: Int64, Dims: bs},
			{Name: "E", Tensor: true, Elem: Float, Dims: []Dim{{Value: 4}, {Value: 3}}}}, // an initializer listed as input (IR < 4)
		Outputs: []Value{{Name: "last_hidden_state", Tensor: true, Elem: Float, Dims: []Dim{{Param: "batch"}, {Param: "sequence"}, {Value: 3}}}},
	}}
}

func TestRoundTrip(t *testing.T) {
	info, err := Parse(testModel().Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if info.IRVersion != 8 || info.Producer != "test" || info.Opsets[""] != 14 || info.Graph != "g" {
		t.Errorf("header: got ir %d producer %q opsets %v graph %q; want 8 test map[:14] g", info.IRVersion, info.Producer, info.Opsets, info.Graph)
	}
	if got := len(info.Inputs); got != 1 || info.Inputs[0].String() != "input_ids int64[batch, sequence]" {
		t.Errorf("inputs: got %v; want [input_ids int64[batch, sequence]] (initializers are not inputs)", info.Inputs)
	}
	out, ok := info.Output("last_hidden_state")
	if !ok || out.Last() != 3 || out.String() != "last_hidden_state float32[batch, sequence, 3]" {
		t.Errorf("output: got %v; want last_hidden_state float32[batch, sequence, 3]", out)
	}
	if info.Nodes != 3 || !slices.Equal(info.OpNames(), []string{"Gather", "Identity", "com.microsoft.FusedThing"}) {
		t.Errorf("nodes: got %d %v", info.Nodes, info.OpNames())
	}
	if info.Initializers != 2 || info.Parameters != 14 || info.ExternalData {
		t.Errorf("initializers: got %d, %d parameters, external %v; want 2, 14, false", info.Initializers, info.Parameters, info.ExternalData)
	}
}

func TestParseErrors(t *testing.T) {
	valid := testModel().Marshal()
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": valid[:len(valid)-5],
		"not proto": []byte("hello, this is text"),
		"no graph":  protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 8),
	} {
		if _, err := Parse(b); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: got %v; want ErrFormat", name, err)
		}
	}
}

func TestReadFixture(t *testing.T) {
	info, err := ReadFile(testenv.Fixture(t, "models", "ref-bert-embed-onnx", "model.onnx"))
	if err != nil {
		t.Skipf("fixture: %v", err)
	}
	var names []string
	for _, v := range info.Inputs {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"input_ids", "attention_mask", "token_type_ids"}) {
		t.Errorf("inputs: got %v", info.Inputs)
	}
	if o, ok := info.Output("sentence_embedding"); !ok || o.Last() != 128 {
		t.Errorf("sentence_embedding: got %v", o)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "none.onnx")); err == nil {
		t.Error("a missing file: got no error")
	}
}

// TestBatchDependent: the ops that mix a batch's rows are named (domain
// included), others are not; the fixture's dynamically quantized graph has
// them and its float graph not.
func TestBatchDependent(t *testing.T) {
	m := testModel()
	if info, _ := Parse(m.Marshal()); len(info.BatchDependent()) != 0 {
		t.Errorf("float graph: got %v; want none", info.BatchDependent())
	}
	m.Graph.Nodes = append(m.Graph.Nodes,
		Node{Op: "DynamicQuantizeLinear", Inputs: []string{"x"}, Outputs: []string{"q", "s", "z"}},
		Node{Op: "DynamicQuantizeMatMul", Domain: "com.microsoft", Inputs: []string{"x", "E"}, Outputs: []string{"m"}})
	info, err := Parse(m.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := info.BatchDependent(), []string{"DynamicQuantizeLinear", "com.microsoft.DynamicQuantizeMatMul"}; !slices.Equal(got, want) {
		t.Errorf("quantized graph: got %v; want %v", got, want)
	}
	for file, want := range map[string]bool{"model.onnx": false, "model_quantized.onnx": true} {
		info, err := ReadFile(testenv.Fixture(t, "models", "ref-bert-embed-onnx", file))
		if err != nil {
			t.Skipf("fixture: %v", err)
		}
		if got := len(info.BatchDependent()) > 0; got != want {
			t.Errorf("%s: batch-dependent ops %v; want some: %v", file, info.BatchDependent(), want)
		}
	}
}

// FuzzParse: Parse never panics, and what it accepts it describes
// consistently (a model written from its inputs and outputs parses to the
// same inputs and outputs).
func FuzzParse(f *testing.F) {
	valid := testModel().Marshal()
	f.Add(valid)                                      // a valid model
	f.Add(valid[:len(valid)/2])                       // truncated inside the graph
	f.Add([]byte{0x0a, 0x05, 'h', 'i'})               // field 1 with the wrong wire type
	f.Add([]byte{0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f}) // a graph longer than the input
	f.Add([]byte("not an onnx model"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := Parse(b)
		if err != nil {
			return
		}
		m := Model{IRVersion: info.IRVersion, Graph: Graph{Name: info.Graph, Inputs: tensors(info.Inputs), Outputs: tensors(info.Outputs)}}
		again, err := Parse(m.Marshal())
		if err != nil {
			t.Fatalf("re-encoded model: %v", err)
		}
		if !sameValues(again.Inputs, tensors(info.Inputs)) || !sameValues(again.Outputs, tensors(info.Outputs)) {
			t.Fatalf("round trip: got %v %v; want %v %v", again.Inputs, again.Outputs, info.Inputs, info.Outputs)
		}
	})
}

// tensors keeps the tensor values with the dims the writer can write.
func tensors(vs []Value) []Value {
	var out []Value
	for _, v := range vs {
		if !v.Tensor {
			continue
		}
		c := Value{Name: v.Name, Tensor: true, Elem: v.Elem}
		for _, d := range v.Dims {
			if d.Param != "" || d.Value < 0 { // the writer writes one of the two
				d.Value = 0
			}
			c.Dims = append(c.Dims, d)
		}
		out = append(out, c)
	}
	return out
}

func sameValues(a, b []Value) bool {
	return slices.EqualFunc(a, b, func(x, y Value) bool {
		return x.Name == y.Name && x.Elem == y.Elem && slices.Equal(x.Dims, y.Dims)
	})
}

// TestReadPositions: the rows of a graph's position embedding table are
// Info.Positions, and a graph without one has none.
func TestReadPositions(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int64
	}{{"embeddings.position_embeddings.weight", 40}, {"embeddings.word_embeddings.weight", 0}} {
		m := Model{Graph: Graph{Name: "g",
			Initializers: []Tensor{{Name: tc.name, Dims: []int64{40, 3}, Floats: make([]float32, 120)}},
			Outputs:      []Value{{Name: "out", Elem: Float, Tensor: true}},
			Nodes:        []Node{{Op: "Identity", Inputs: []string{tc.name}, Outputs: []string{"out"}}}}}
		info, err := Parse(m.Marshal())
		if err != nil {
			t.Fatal(err)
		}
		if info.Positions != tc.want {
			t.Errorf("%s: Positions %d; want %d", tc.name, info.Positions, tc.want)
		}
	}
}
