// Package onnx reads what synapse needs to know of an ONNX model file
// without running it (the graph's inputs and outputs, opsets, producer,
// parameter count) and writes small ONNX graphs for tests.
//
// An ONNX file is one protobuf message, onnx.ModelProto. Only the fields
// below are read or written (field numbers from onnx/onnx.proto3); every
// other field is skipped, so the weights (initializer raw_data) are never
// copied:
//
//	ModelProto         ir_version=1 producer_name=2 producer_version=3 graph=7 opset_import=8
//	OperatorSetIdProto domain=1 version=2
//	GraphProto         node=1 name=2 initializer=5 input=11 output=12
//	NodeProto          input=1 output=2 name=3 op_type=4 attribute=5 domain=7
//	AttributeProto     name=1 f=2 i=3 s=4 t=5 floats=7 ints=8 type=20
//	TensorProto        dims=1 data_type=2 name=8 raw_data=9 data_location=14
//	ValueInfoProto     name=1 type=2
//	TypeProto          tensor_type=1;  TypeProto.Tensor elem_type=1 shape=2
//	TensorShapeProto   dim=1;  Dimension dim_value=1 dim_param=2
package onnx

import (
	"fmt"
	"strconv"
	"strings"
)

// ElemType is a tensor element type (onnx.TensorProto.DataType).
type ElemType int32

// Element types synapse meets.
const (
	Undefined ElemType = 0
	Float     ElemType = 1
	Uint8     ElemType = 2
	Int8      ElemType = 3
	Int32     ElemType = 6
	Int64     ElemType = 7
	String    ElemType = 8
	Bool      ElemType = 9
	Float16   ElemType = 10
	Double    ElemType = 11
	BFloat16  ElemType = 16
)

var elemNames = map[ElemType]string{
	Undefined: "undefined", Float: "float32", Uint8: "uint8", Int8: "int8", 4: "uint16", 5: "int16",
	Int32: "int32", Int64: "int64", String: "string", Bool: "bool", Float16: "float16", Double: "float64",
	12: "uint32", 13: "uint64", BFloat16: "bfloat16",
}

func (t ElemType) String() string {
	if s, ok := elemNames[t]; ok {
		return s
	}
	return "type" + strconv.Itoa(int(t))
}

// Dim is one dimension of a tensor shape: a fixed size, or a symbolic name
// (Param) for a dimension fixed at run time; both zero when unknown.
type Dim struct {
	Value int64
	Param string
}

func (d Dim) String() string {
	switch {
	case d.Param != "":
		return d.Param
	case d.Value > 0:
		return strconv.FormatInt(d.Value, 10)
	}
	return "?"
}

// Value is a graph input or output: a tensor's name, element type and shape.
// Tensor is false for other kinds of values (sequences, maps).
type Value struct {
	Name   string
	Tensor bool
	Elem   ElemType
	Dims   []Dim
}

func (v Value) String() string {
	if !v.Tensor {
		return v.Name + " (not a tensor)"
	}
	parts := make([]string, len(v.Dims))
	for i, d := range v.Dims {
		parts[i] = d.String()
	}
	return fmt.Sprintf("%s %s[%s]", v.Name, v.Elem, strings.Join(parts, ", "))
}

// Last returns the size of the value's last dimension, 0 when it is not fixed.
func (v Value) Last() int64 {
	if len(v.Dims) == 0 {
		return 0
	}
	return v.Dims[len(v.Dims)-1].Value
}
