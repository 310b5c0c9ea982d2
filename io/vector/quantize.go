package vector

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/x448/float16"
)

// Ranges are the per-dimension [Min, Max] that int8 and uint8 code by, as
// sentence-transformers' `ranges` (np.vstack of the calibration
// embeddings' minimum and maximum).
type Ranges struct {
	Min []float32 `json:"min"`
	Max []float32 `json:"max"`
}

// NewRanges is an empty range set of dims dimensions: Observe widens it.
func NewRanges(dims int) *Ranges {
	r := &Ranges{Min: make([]float32, dims), Max: make([]float32, dims)}
	for i := range dims {
		r.Min[i], r.Max[i] = float32(math.Inf(1)), float32(math.Inf(-1))
	}
	return r
}

// Observe widens the ranges to hold v.
func (r *Ranges) Observe(v []float32) {
	for i, x := range v[:len(r.Min)] {
		r.Min[i] = min(r.Min[i], x)
		r.Max[i] = max(r.Max[i], x)
	}
}

// Widen widens the ranges to hold o's.
func (r *Ranges) Widen(o *Ranges) {
	r.Observe(o.Min)
	r.Observe(o.Max)
}

// Empty says whether no vector was observed.
func (r *Ranges) Empty() bool { return len(r.Min) == 0 || r.Min[0] > r.Max[0] }

// JSON is the ranges as stored in the schema metadata: {"min":[…],"max":[…]},
// each value the shortest decimal that reads back as the same float32.
func (r *Ranges) JSON() string {
	b, _ := json.Marshal(r) // finite float32s: cannot fail
	return string(b)
}

// Digest is "sha256:" and the hex SHA-256 of the ranges' float32 bits.
func (r *Ranges) Digest() string {
	h := sha256.New()
	var b [4]byte
	for _, v := range [][]float32{r.Min, r.Max} {
		for _, x := range v {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
			h.Write(b[:])
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// ParseRanges reads ranges stored by JSON and checks them against dims.
func ParseRanges(s string, dims int) (*Ranges, error) {
	var r Ranges
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("ranges: %w", err)
	}
	if len(r.Min) != dims || len(r.Max) != dims {
		return nil, fmt.Errorf("ranges: %d minima and %d maxima for %d dims", len(r.Min), len(r.Max), dims)
	}
	for i := range dims {
		if !(r.Min[i] <= r.Max[i]) || math.IsInf(float64(r.Min[i]), 0) || math.IsInf(float64(r.Max[i]), 0) {
			return nil, fmt.Errorf("ranges: dimension %d: [%v, %v] is not a finite range", i, r.Min[i], r.Max[i])
		}
	}
	return &r, nil
}

// Quantizer turns float32 vectors into one dtype's bytes.
type Quantizer struct {
	Dtype Dtype
	Dims  int
	start []float32 // int8/uint8: the ranges' minima
	step  []float32 // (max − min)/255, in float32 as numpy computes it
}

// NewQuantizer is a quantizer to d for vectors of dims dimensions; int8
// and uint8 need ranges, the others ignore them.
func NewQuantizer(d Dtype, dims int, r *Ranges) (*Quantizer, error) {
	q := &Quantizer{Dtype: d, Dims: dims}
	if !d.Ranged() {
		return q, nil
	}
	if r == nil || len(r.Min) != dims || len(r.Max) != dims || r.Empty() {
		return nil, fmt.Errorf("vector: %s needs the ranges of %d dims", d, dims)
	}
	q.start, q.step = r.Min, make([]float32, dims)
	for i := range dims {
		q.step[i] = (r.Max[i] - r.Min[i]) / 255
	}
	return q, nil
}

// Append appends v's bytes in the quantizer's dtype to dst: the layout of
// the Arrow column's values (little-endian for float32 and float16).
func (q *Quantizer) Append(dst []byte, v []float32) []byte {
	v = v[:q.Dims]
	switch q.Dtype {
	case Float32:
		for _, x := range v {
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(x))
		}
	case Float16:
		for _, x := range v {
			dst = binary.LittleEndian.AppendUint16(dst, float16.Fromfloat32(x).Bits())
		}
	case Int8, Uint8:
		off := float32(0)
		if q.Dtype == Int8 {
			off = 128
		}
		for i, x := range v {
			dst = append(dst, q.code(i, x, off))
		}
	case Binary, UBinary:
		flip := byte(0)
		if q.Dtype == Binary {
			flip = 0x80 // packed − 128 as an int8 is the byte with its top bit flipped
		}
		for i := 0; i < len(v); i += 8 {
			var b byte
			for j := i; j < i+8; j++ {
				b <<= 1
				if j < len(v) && v[j] > 0 {
					b |= 1
				}
			}
			dst = append(dst, b^flip)
		}
	}
	return dst
}

// code is the int8 (off 128) or uint8 (off 0) code of x in dimension i:
// trunc((x − min)/step − off), computed in float32 as numpy does, clamped.
func (q *Quantizer) code(i int, x, off float32) byte {
	if q.step[i] == 0 {
		return byte(int8(-off))
	}
	t := float32(float32(x-q.start[i])/q.step[i]) - off
	t = float32(math.Trunc(float64(t)))
	lo, hi := -off, 255-off
	t = min(max(t, lo), hi)
	if q.Dtype == Int8 {
		return byte(int8(t))
	}
	return byte(t)
}

// Decode appends the float32 value of each dimension of the vector b (in
// dtype d, dims dimensions) to dst: float16 widened, int8/uint8 the centre
// of the code's step in r, binary bits as 0 or 1 (as sentence-transformers
// rescores with unpacked bits).
func Decode(dst []float32, d Dtype, dims int, b []byte, r *Ranges) []float32 {
	switch d {
	case Float32:
		for i := range dims {
			dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
	case Float16:
		for i := range dims {
			dst = append(dst, float16.Frombits(binary.LittleEndian.Uint16(b[2*i:])).Float32())
		}
	case Int8, Uint8:
		for i := range dims {
			u := float32(b[i])
			if d == Int8 {
				u = float32(int8(b[i])) + 128
			}
			step := (r.Max[i] - r.Min[i]) / 255
			dst = append(dst, r.Min[i]+(u+0.5)*step)
		}
	case Binary, UBinary:
		flip := byte(0)
		if d == Binary {
			flip = 0x80
		}
		for i := range dims {
			dst = append(dst, float32((b[i/8]^flip)>>(7-i%8)&1))
		}
	}
	return dst
}

// ElemType is the Arrow element type of a fixed_size_list embedding column
// of dtype d (nil for the binary dtypes).
func ElemType(d Dtype) arrow.DataType {
	if l, ok := d.ArrowType(8).(*arrow.FixedSizeListType); ok {
		return l.Elem()
	}
	return nil
}
