package onnx

import (
	"encoding/binary"
	"math"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
)

// Model is a small ONNX model to write: one graph in the default domain.
// It is meant for tests, which build the graphs they run instead of
// depending on converted models.
type Model struct {
	IRVersion int64  // 0: 8
	Opset     int64  // ai.onnx opset; 0: 17
	Producer  string // producer_name
	Graph     Graph
}

// Graph is a graph's nodes, initializers, inputs and outputs.
type Graph struct {
	Name            string
	Nodes           []Node
	Initializers    []Tensor
	Inputs, Outputs []Value
}

// Node is one operator application.
type Node struct {
	Name            string
	Op              string
	Domain          string
	Inputs, Outputs []string
	Attrs           []Attr
}

// Attr is a node attribute: an int, a float, a list of ints or a tensor
// (the first that is set, in that order).
type Attr struct {
	Name   string
	Int    *int64
	Float  *float32
	Ints   []int64
	Tensor *Tensor
}

// IntAttr returns an int attribute.
func IntAttr(name string, v int64) Attr { return Attr{Name: name, Int: &v} }

// FloatAttr returns a float attribute.
func FloatAttr(name string, v float32) Attr { return Attr{Name: name, Float: &v} }

// Tensor is a constant tensor, stored as raw_data: float32 (Floats), int64
// (Ints), or any element type given as Elem and its little-endian Raw bytes
// (the first that is set of Raw, Ints, Floats).
type Tensor struct {
	Name   string
	Dims   []int64
	Floats []float32 // Elem Float
	Ints   []int64   // Elem Int64
	Elem   ElemType  // with Raw
	Raw    []byte
}

// Marshal serializes the model as a ModelProto.
func (m Model) Marshal() []byte {
	ir, opset := m.IRVersion, m.Opset
	if ir == 0 {
		ir = 8
	}
	if opset == 0 {
		opset = 17
	}
	var b []byte
	b = appendVarint(b, 1, uint64(ir))
	if m.Producer != "" {
		b = appendBytes(b, 2, []byte(m.Producer))
	}
	b = appendBytes(b, 7, m.Graph.marshal())
	opsetID := appendBytes(nil, 1, nil) // the default domain
	opsetID = appendVarint(opsetID, 2, uint64(opset))
	b = appendBytes(b, 8, opsetID)
	return b
}

// WriteFile writes the model to path.
func (m Model) WriteFile(path string) error {
	return os.WriteFile(path, m.Marshal(), 0o644)
}

func (g Graph) marshal() []byte {
	var b []byte
	for _, n := range g.Nodes {
		b = appendBytes(b, 1, n.marshal())
	}
	b = appendBytes(b, 2, []byte(g.Name))
	for _, t := range g.Initializers {
		b = appendBytes(b, 5, t.marshal())
	}
	for _, v := range g.Inputs {
		b = appendBytes(b, 11, v.marshal())
	}
	for _, v := range g.Outputs {
		b = appendBytes(b, 12, v.marshal())
	}
	return b
}

func (n Node) marshal() []byte {
	var b []byte
	for _, in := range n.Inputs {
		b = appendBytes(b, 1, []byte(in))
	}
	for _, out := range n.Outputs {
		b = appendBytes(b, 2, []byte(out))
	}
	if n.Name != "" {
		b = appendBytes(b, 3, []byte(n.Name))
	}
	b = appendBytes(b, 4, []byte(n.Op))
	for _, a := range n.Attrs {
		b = appendBytes(b, 5, a.marshal())
	}
	if n.Domain != "" {
		b = appendBytes(b, 7, []byte(n.Domain))
	}
	return b
}

// Attribute types (onnx.AttributeProto.AttributeType).
const (
	attrFloat  = 1
	attrInt    = 2
	attrTensor = 4
	attrInts   = 7
)

func (a Attr) marshal() []byte {
	b := appendBytes(nil, 1, []byte(a.Name))
	switch {
	case a.Int != nil:
		b = appendVarint(b, 3, uint64(*a.Int))
		b = appendVarint(b, 20, attrInt)
	case a.Float != nil:
		b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(*a.Float))
		b = appendVarint(b, 20, attrFloat)
	case a.Ints != nil:
		for _, v := range a.Ints {
			b = appendVarint(b, 8, uint64(v))
		}
		b = appendVarint(b, 20, attrInts)
	case a.Tensor != nil:
		b = appendBytes(b, 5, a.Tensor.marshal())
		b = appendVarint(b, 20, attrTensor)
	}
	return b
}

func (t Tensor) marshal() []byte {
	var b []byte
	for _, d := range t.Dims {
		b = appendVarint(b, 1, uint64(d))
	}
	var raw []byte
	if t.Raw != nil {
		b = appendVarint(b, 2, uint64(t.Elem))
		raw = t.Raw
	} else if t.Ints != nil {
		b = appendVarint(b, 2, uint64(Int64))
		for _, v := range t.Ints {
			raw = binary.LittleEndian.AppendUint64(raw, uint64(v))
		}
	} else {
		b = appendVarint(b, 2, uint64(Float))
		for _, v := range t.Floats {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
		}
	}
	b = appendBytes(b, 8, []byte(t.Name))
	return appendBytes(b, 9, raw)
}

func (v Value) marshal() []byte {
	var shape []byte
	for _, d := range v.Dims {
		var db []byte
		if d.Param != "" {
			db = appendBytes(db, 2, []byte(d.Param))
		} else {
			db = appendVarint(db, 1, uint64(d.Value))
		}
		shape = appendBytes(shape, 1, db)
	}
	var tt []byte
	tt = appendVarint(tt, 1, uint64(v.Elem))
	tt = appendBytes(tt, 2, shape)
	b := appendBytes(nil, 1, []byte(v.Name))
	return appendBytes(b, 2, appendBytes(nil, 1, tt))
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}
