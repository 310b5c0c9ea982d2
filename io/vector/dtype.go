// Package vector holds the element types (dtypes) of an embedding output
// and the rules that turn a float32 vector into each of them, with
// sentence-transformers' names and semantics (quantize_embeddings):
//
//	float32   the engine's vector, 4 bytes a dimension
//	float16   IEEE half precision, rounded to nearest even, 2 bytes a dimension
//	int8      per-dimension ranges [min, max] cut into 255 steps:
//	          trunc((x − min)/step − 128), step = (max − min)/255, 1 byte a dimension
//	uint8     the same without the offset: trunc((x − min)/step)
//	binary    sign bits (x > 0) packed 8 a byte, first dimension in the most
//	          significant bit (np.packbits), each byte − 128 as an int8
//	ubinary   the same bits as plain bytes
//
// A value outside the calibration range is clamped to the range's ends
// (numpy's cast wraps it around). A dimension whose range is a single point
// (min = max) codes every value as the lowest code (numpy divides by zero).
// Binary vectors of dims that are not a multiple of 8 end in zero bits, as
// np.packbits(axis=-1) pads them.
package vector

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Dtype is the element type of an embedding column.
type Dtype string

// The dtypes, as sentence-transformers names them.
const (
	Float32 Dtype = "float32"
	Float16 Dtype = "float16"
	Int8    Dtype = "int8"
	Uint8   Dtype = "uint8"
	Binary  Dtype = "binary"
	UBinary Dtype = "ubinary"
)

// Dtypes are all dtypes, in the order the help text lists them.
var Dtypes = []Dtype{Float32, Float16, Int8, Uint8, Binary, UBinary}

// ParseDtype reads a dtype name; "" is float32.
func ParseDtype(s string) (Dtype, error) {
	if s == "" {
		return Float32, nil
	}
	for _, d := range Dtypes {
		if string(d) == s {
			return d, nil
		}
	}
	names := make([]string, len(Dtypes))
	for i, d := range Dtypes {
		names[i] = string(d)
	}
	return "", fmt.Errorf("dtype %q: want %s", s, strings.Join(names, ", "))
}

// Ranged says whether the dtype codes values by per-dimension ranges.
func (d Dtype) Ranged() bool { return d == Int8 || d == Uint8 }

// Bits says whether the dtype is a packed sign bit per dimension.
func (d Dtype) Bits() bool { return d == Binary || d == UBinary }

// Float says whether the dtype holds floating-point values.
func (d Dtype) Float() bool { return d == Float32 || d == Float16 }

// Width is the bytes of one vector of dims dimensions.
func (d Dtype) Width(dims int) int {
	switch d {
	case Float32:
		return 4 * dims
	case Float16:
		return 2 * dims
	case Binary, UBinary:
		return (dims + 7) / 8
	}
	return dims
}

// ArrowType is the embedding column's type: fixed_size_list<float32,
// float16, int8 or uint8>[dims], or fixed_size_binary[ceil(dims/8)] for the
// binary dtypes (the bytes of binary are those of sentence-transformers'
// int8 array: the packed bits with the top bit flipped).
func (d Dtype) ArrowType(dims int) arrow.DataType {
	switch d {
	case Float16:
		return arrow.FixedSizeListOfNonNullable(int32(dims), arrow.FixedWidthTypes.Float16)
	case Int8:
		return arrow.FixedSizeListOfNonNullable(int32(dims), arrow.PrimitiveTypes.Int8)
	case Uint8:
		return arrow.FixedSizeListOfNonNullable(int32(dims), arrow.PrimitiveTypes.Uint8)
	case Binary, UBinary:
		return &arrow.FixedSizeBinaryType{ByteWidth: d.Width(dims)}
	}
	return arrow.FixedSizeListOfNonNullable(int32(dims), arrow.PrimitiveTypes.Float32)
}

// Compatible says whether an embedding column of type t can hold vectors of
// this dtype and dims.
func (d Dtype) Compatible(t arrow.DataType, dims int) bool {
	return arrow.TypeEqual(d.ArrowType(dims), t)
}

// Schema metadata keys of an embedding output's dtype.
const (
	MetaDtype       = "synapse.dtype"       // the dtype; absent in outputs before dtypes: float32
	MetaRanges      = "synapse.ranges"      // int8/uint8: Ranges.JSON
	MetaCalibration = "synapse.calibration" // int8/uint8: where the ranges came from
)

// FromMetadata reads an output's dtype and, for int8 and uint8, its ranges.
func FromMetadata(get func(key string) (string, bool), dims int) (Dtype, *Ranges, error) {
	s, _ := get(MetaDtype)
	d, err := ParseDtype(s)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", MetaDtype, err)
	}
	if !d.Ranged() {
		return d, nil, nil
	}
	raw, ok := get(MetaRanges)
	if !ok {
		return "", nil, fmt.Errorf("a %s output without %s", d, MetaRanges)
	}
	r, err := ParseRanges(raw, dims)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", MetaRanges, err)
	}
	return d, r, nil
}

// String is the dtype's name.
func (d Dtype) String() string { return string(d) }
