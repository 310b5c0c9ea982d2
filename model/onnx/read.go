package onnx

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrFormat marks a file that is not a readable ONNX model.
var ErrFormat = errors.New("not an ONNX model")

// Info is what Read learns of a model file.
type Info struct {
	IRVersion       int64
	Producer        string // producer_name, producer_version
	ProducerVersion string
	Opsets          map[string]int64 // domain ("" for the default ai.onnx) → opset version
	Graph           string           // the graph's name
	Inputs, Outputs []Value          // graph inputs (initializers excluded) and outputs
	Nodes           int
	Ops             map[string]int // op_type (domain-qualified outside ai.onnx) → nodes
	Initializers    int
	Parameters      int64 // elements of all initializers
	ExternalData    bool  // some initializer's data lives in another file
	// Weights counts the initializers' elements by element type.
	Weights map[ElemType]int64
	// Positions is the first dimension of a BERT-style position embedding
	// table (an initializer named …position_embeddings.weight, or its
	// quantized …weight_quantized): the most
	// tokens a sequence may hold; 0 when the graph has none.
	Positions int64
}

// quantizedOps are the operators that mark a quantized graph.
var quantizedOps = []string{"MatMulInteger", "DynamicQuantizeLinear", "QLinearMatMul", "com.microsoft.DynamicQuantizeMatMul",
	"com.microsoft.MatMulIntegerToFloat", "QuantizeLinear", "ConvInteger", "QLinearConv", "com.microsoft.MatMulNBits"}

// Precision names the graph's weights as the model cache records them:
// "INT8" for a graph with quantized operators (MatMulInteger,
// DynamicQuantizeLinear, QLinearMatMul, …), else the float type most of its
// weights have: "F32", "F16" or "BF16".
func (in *Info) Precision() string {
	for _, op := range quantizedOps {
		if in.Ops[op] > 0 {
			return "INT8"
		}
	}
	best, n := "F32", int64(-1)
	for _, c := range []struct {
		t    ElemType
		name string
	}{{Float, "F32"}, {Float16, "F16"}, {BFloat16, "BF16"}} {
		if in.Weights[c.t] > n {
			best, n = c.name, in.Weights[c.t]
		}
	}
	return best
}

// Input returns the graph input called name.
func (in *Info) Input(name string) (Value, bool) { return find(in.Inputs, name) }

// Output returns the graph output called name.
func (in *Info) Output(name string) (Value, bool) { return find(in.Outputs, name) }

func find(vs []Value, name string) (Value, bool) {
	for _, v := range vs {
		if v.Name == name {
			return v, true
		}
	}
	return Value{}, false
}

// OpNames returns the op types of the graph, sorted.
func (in *Info) OpNames() []string {
	out := make([]string, 0, len(in.Ops))
	for op := range in.Ops {
		out = append(out, op)
	}
	sort.Strings(out)
	return out
}

// batchOps are the ops whose result for one row of a batch depends on the
// other rows: they compute a statistic over the whole input tensor (the
// scale and zero point of dynamic quantization).
var batchOps = []string{"DynamicQuantizeLinear", "com.microsoft.DynamicQuantizeMatMul", "com.microsoft.DynamicQuantizeLSTM"}

// BatchDependent returns the ops of the graph whose results mix the rows of
// a batch (sorted; none for a graph whose rows are computed apart). It is
// conservative: such an op on a constant, which mixes nothing, counts too.
func (in *Info) BatchDependent() []string {
	var out []string
	for _, op := range batchOps {
		if in.Ops[op] > 0 {
			out = append(out, op)
		}
	}
	sort.Strings(out)
	return out
}

// ReadFile reads the model file at path (memory-mapped: the weights are not copied).
func ReadFile(path string) (*Info, error) {
	b, release, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	defer release()
	info, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", path, err)
	}
	return info, nil
}

// Parse reads a serialized ModelProto.
func Parse(b []byte) (*Info, error) {
	info := &Info{Opsets: map[string]int64{}, Ops: map[string]int{}, Weights: map[ElemType]int64{}}
	var graph []byte
	haveGraph := false
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			info.IRVersion = int64(x)
		case num == 2 && typ == protowire.BytesType:
			info.Producer = string(v)
		case num == 3 && typ == protowire.BytesType:
			info.ProducerVersion = string(v)
		case num == 7 && typ == protowire.BytesType:
			graph, haveGraph = v, true
		case num == 8 && typ == protowire.BytesType:
			return parseOpset(v, info.Opsets)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if !haveGraph || info.IRVersion <= 0 {
		return nil, fmt.Errorf("%w: no graph or no ir_version (not a ModelProto)", ErrFormat)
	}
	if err := parseGraph(graph, info); err != nil {
		return nil, fmt.Errorf("%w: graph: %w", ErrFormat, err)
	}
	return info, nil
}

func parseOpset(b []byte, into map[string]int64) error {
	var domain string
	var version int64
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			domain = string(v)
		case num == 2 && typ == protowire.VarintType:
			version = int64(x)
		}
		return nil
	})
	if domain == "ai.onnx" {
		domain = ""
	}
	into[domain] = version
	return err
}

func parseGraph(b []byte, info *Info) error {
	inits := map[string]bool{}
	var inputs []Value
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1:
			info.Nodes++
			op, err := parseNodeOp(v)
			info.Ops[op]++
			return err
		case 2:
			info.Graph = string(v)
		case 5:
			info.Initializers++
			return parseInitializer(v, info, inits)
		case 11, 12:
			val, err := parseValueInfo(v)
			if err != nil {
				return err
			}
			if num == 11 {
				inputs = append(inputs, val)
			} else {
				info.Outputs = append(info.Outputs, val)
			}
		}
		return nil
	})
	for _, in := range inputs { // before IR 4, initializers were listed as inputs too
		if !inits[in.Name] {
			info.Inputs = append(info.Inputs, in)
		}
	}
	return err
}

// parseNodeOp returns a node's op type, qualified by its domain outside ai.onnx.
func parseNodeOp(b []byte) (string, error) {
	var op, domain string
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == 4 && typ == protowire.BytesType:
			op = string(v)
		case num == 7 && typ == protowire.BytesType:
			domain = string(v)
		}
		return nil
	})
	if domain != "" && domain != "ai.onnx" {
		op = domain + "." + op
	}
	return op, err
}

func parseInitializer(b []byte, info *Info, names map[string]bool) error {
	elem := Undefined
	var dims []int64
	var name string
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 2 && typ == protowire.VarintType:
			elem = ElemType(x)
		case num == 1 && typ == protowire.VarintType: // dims, unpacked
			dims = append(dims, int64(x))
		case num == 1 && typ == protowire.BytesType: // dims, packed
			for len(v) > 0 {
				d, n := protowire.ConsumeVarint(v)
				if n < 0 {
					return protowire.ParseError(n)
				}
				dims = append(dims, int64(d))
				v = v[n:]
			}
		case num == 8 && typ == protowire.BytesType:
			name = string(v)
			names[name] = true
		case num == 14 && typ == protowire.VarintType && x == 1:
			info.ExternalData = true
		}
		return nil
	})
	elems := int64(1)
	for _, d := range dims {
		elems *= d
	}
	info.Parameters += elems
	info.Weights[elem] += elems
	if strings.Contains(name, "position_embeddings.weight") && len(dims) == 2 { // …weight_quantized too
		info.Positions = dims[0]
	}
	return err
}

func parseValueInfo(b []byte) (Value, error) {
	var val Value
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			val.Name = string(v)
		case num == 2 && typ == protowire.BytesType:
			return parseType(v, &val)
		}
		return nil
	})
	return val, err
}

func parseType(b []byte, val *Value) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		val.Tensor = true
		return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
			switch {
			case num == 1 && typ == protowire.VarintType:
				val.Elem = ElemType(x)
			case num == 2 && typ == protowire.BytesType:
				return parseShape(v, val)
			}
			return nil
		})
	})
}

func parseShape(b []byte, val *Value) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		var d Dim
		err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
			switch {
			case num == 1 && typ == protowire.VarintType:
				d.Value = int64(x)
			case num == 2 && typ == protowire.BytesType:
				d.Param = string(v)
			}
			return nil
		})
		val.Dims = append(val.Dims, d)
		return err
	})
}

// fields calls fn for each field of a message: v holds a length-delimited
// field's bytes, x a varint or fixed field's value.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var (
			v []byte
			x uint64
		)
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var u uint32
			u, n = protowire.ConsumeFixed32(b)
			x = uint64(u)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
