package gguf

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// Q8_0 packs each block of 32 values as an f16 scale d followed by 32 int8
// q, the value being q·d (ggml's block_q8_0).
const (
	q8Block      = 32
	q8BlockBytes = 2 + q8Block
)

// F32ToF16 converts f to IEEE 754 half precision, rounding to nearest even;
// values beyond the f16 range become ±Inf and NaN stays NaN.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // f16 subnormal (or zero): m·2^-24
		if e < -10 {
			return sign
		}
		return sign | uint16(roundShift(mant|0x800000, uint32(14-e)))
	}
	return sign | uint16(uint32(e)<<10+roundShift(mant, 13))
}

// roundShift is m >> s rounded to nearest, ties to even.
func roundShift(m, s uint32) uint32 {
	r := m >> s
	rem := m & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || (rem == half && r&1 == 1) {
		r++
	}
	return r
}

// F16ToF32 converts an IEEE 754 half-precision value to float32 exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0:
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			return -v
		}
		return v
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// encodeQ8_0 quantizes src (a multiple of 32 values) into out as ggml's
// quantize_row_q8_0_ref does: d = max|x|/127, q = round(x/d).
func encodeQ8_0(out []byte, src []float32) {
	for b := 0; b*q8Block < len(src); b++ {
		blk := src[b*q8Block : (b+1)*q8Block]
		dst := out[b*q8BlockBytes : (b+1)*q8BlockBytes]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(dst, F32ToF16(d))
		for i, v := range blk {
			dst[2+i] = byte(int8(math.Round(float64(v * id))))
		}
	}
}

// DecodeTensor converts the raw data of a tensor of type t to float32 values.
// It reads F32, F16 and Q8_0.
func DecodeTensor(t GGMLType, data []byte) ([]float32, error) {
	switch t {
	case GGMLTypeF32:
		if len(data)%4 != 0 {
			break
		}
		out := make([]float32, len(data)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		return out, nil
	case GGMLTypeF16:
		if len(data)%2 != 0 {
			break
		}
		out := make([]float32, len(data)/2)
		for i := range out {
			out[i] = F16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
		}
		return out, nil
	case GGMLTypeQ8_0:
		if len(data)%q8BlockBytes != 0 {
			break
		}
		out := make([]float32, 0, len(data)/q8BlockBytes*q8Block)
		for b := 0; b < len(data); b += q8BlockBytes {
			d := F16ToF32(binary.LittleEndian.Uint16(data[b:]))
			for _, q := range data[b+2 : b+q8BlockBytes] {
				out = append(out, float32(int8(q))*d)
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("gguf: cannot decode tensor type %v", t)
	}
	return nil, fmt.Errorf("gguf: %d bytes is not a whole number of %v elements", len(data), t)
}

// ReadTensor reads the named tensor of f, opened from path, and decodes it
// with DecodeTensor.
func ReadTensor(path string, f *File, name string) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: %s: no tensor %q", path, name)
	}
	n := TensorBytes(t.Type, t.Dims)
	if n == 0 {
		return nil, fmt.Errorf("gguf: %s: tensor %q: cannot decode type %v", path, name, t.Type)
	}
	fh, err := readlimit.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	data := make([]byte, n)
	if _, err := fh.ReadAt(data, f.DataOffset+int64(t.Offset)); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", path, name, err)
	}
	return DecodeTensor(t.Type, data)
}
