// Package gguf reads and writes GGUF files: the metadata and tensor directory
// of a model, without loading tensor data, and small models for tests and demos.
//
// Layout (little-endian, version 3):
//
//	magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//	n_kv × (string key | u32 type | value)
//	n_tensors × (string name | u32 n_dims | n_dims × u64 dim | u32 ggml_type | u64 offset)
//	padding to general.alignment (default 32) | tensor data
//
// A string is u64 length + bytes; an array is u32 element type + u64 count + elements.
package gguf

import (
	"fmt"
)

// Magic opens every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the tensor data alignment when general.alignment is absent.
const DefaultAlignment = 32

// ValueType is a metadata value's type tag.
type ValueType uint32

// Metadata value types, as numbered by the GGUF specification.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

var typeNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"}

func (t ValueType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// KV is one metadata entry. Value holds uint8…float64, bool or string for
// scalars, and for arrays a typed slice ([]string, []float32, []int32, []uint32, …).
type KV struct {
	Key   string
	Type  ValueType // TypeArray for arrays
	Elem  ValueType // element type of an array
	Value any
}

// TensorInfo describes one tensor; Offset is relative to the data section.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   GGMLType
	Offset uint64
}

// Elements is the number of elements in the tensor.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// GGMLType is a tensor's storage type.
type GGMLType uint32

// Tensor storage types this package writes; others are read and named by number.
const (
	GGMLTypeF32  GGMLType = 0
	GGMLTypeF16  GGMLType = 1
	GGMLTypeQ8_0 GGMLType = 8
)

func (t GGMLType) String() string {
	switch t {
	case GGMLTypeF32:
		return "F32"
	case GGMLTypeF16:
		return "F16"
	case GGMLTypeQ8_0:
		return "Q8_0"
	}
	return fmt.Sprintf("ggml_type(%d)", uint32(t))
}

// File is a GGUF file's header, metadata and tensor directory.
type File struct {
	Version    uint32
	KV         []KV // in file order
	Tensors    []TensorInfo
	DataOffset int64 // absolute offset of the tensor data section
	index      map[string]int
}

// Get returns the metadata entry for key.
func (f *File) Get(key string) (KV, bool) {
	i, ok := f.index[key]
	if !ok {
		return KV{}, false
	}
	return f.KV[i], true
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return "", false
	}
	s, ok := kv.Value.(string)
	return s, ok
}

// Uint returns an unsigned or non-negative signed integer value of any width.
func (f *File) Uint(key string) (uint64, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	switch v := kv.Value.(type) {
	case uint8:
		return uint64(v), true
	case uint16:
		return uint64(v), true
	case uint32:
		return uint64(v), true
	case uint64:
		return v, true
	case int8:
		return uint64(v), v >= 0
	case int16:
		return uint64(v), v >= 0
	case int32:
		return uint64(v), v >= 0
	case int64:
		return uint64(v), v >= 0
	}
	return 0, false
}

// Int returns an integer value of any width as int64 (-1 style ids included).
func (f *File) Int(key string) (int64, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	switch v := kv.Value.(type) {
	case uint8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint64:
		return int64(v), true
	case int8:
		return int64(v), true
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	}
	return 0, false
}

// Bool returns a boolean value.
func (f *File) Bool(key string) (bool, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return false, false
	}
	b, ok := kv.Value.(bool)
	return b, ok
}

// Float returns a float32 or float64 value.
func (f *File) Float(key string) (float64, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	switch v := kv.Value.(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

// Strings returns a string array.
func (f *File) Strings(key string) ([]string, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return nil, false
	}
	s, ok := kv.Value.([]string)
	return s, ok
}

// Float32s returns a float32 array.
func (f *File) Float32s(key string) ([]float32, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return nil, false
	}
	s, ok := kv.Value.([]float32)
	return s, ok
}

// Int32s returns an int32 array (token types are stored this way).
func (f *File) Int32s(key string) ([]int32, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return nil, false
	}
	switch v := kv.Value.(type) {
	case []int32:
		return v, true
	case []uint32:
		out := make([]int32, len(v))
		for i, x := range v {
			out[i] = int32(x)
		}
		return out, true
	}
	return nil, false
}

// Bytes returns a u8 or i8 array (UGM's precompiled charsmap is stored this way).
func (f *File) Bytes(key string) ([]byte, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return nil, false
	}
	switch v := kv.Value.(type) {
	case []uint8:
		return v, true
	case []int8:
		out := make([]byte, len(v))
		for i, x := range v {
			out[i] = byte(x)
		}
		return out, true
	}
	return nil, false
}

// Architecture is general.architecture, the prefix of model hyperparameter keys.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// Tensor returns the directory entry of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}
