package search

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/synapse-embed/synapse/io/vector"
)

// The similarity kernels: one query against a tile of corpus rows, each
// in the search's representation of the corpus dtype (float32 values,
// int8 or uint8 codes, uint64 words of sign bits).

// dotF32 is the float32 dot product of a and b (len(b) ≥ len(a)), in
// eight float32 partial sums.
func dotF32(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		s4 += x[4] * y[4]
		s5 += x[5] * y[5]
		s6 += x[6] * y[6]
		s7 += x[7] * y[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// dotCodes is the dot product of two int8 or uint8 code vectors,
// accumulated in int32 (exact below 33,000 dims).
func dotCodes[T int8 | uint8](a, b []T) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		x, y := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += int32(x[0]) * int32(y[0])
		s1 += int32(x[1]) * int32(y[1])
		s2 += int32(x[2]) * int32(y[2])
		s3 += int32(x[3]) * int32(y[3])
	}
	for ; i < len(a); i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// hamming is the number of differing bits of a and b.
func hamming(a, b []uint64) int {
	b = b[:len(a)]
	n := 0
	for i := range a {
		n += bits.OnesCount64(a[i] ^ b[i])
	}
	return n
}

// space is the search's representation of vectors of one corpus dtype.
type space struct {
	dtype vector.Dtype
	dims  int
	width int // elements of one vector: floats, codes or uint64 words
}

func newSpace(d vector.Dtype, dims int) space {
	s := space{dtype: d, dims: dims, width: dims}
	if d.Bits() {
		s.width = (dims + 63) / 64
	}
	return s
}

// tile is vectors of a space, row after row: one of the three slices.
type tile struct {
	f   []float32
	i8  []int8
	u8  []uint8
	u64 []uint64
}

// load puts col's rows into t (reusing its memory), converting float16 to
// float32, and the sign bits of both binary dtypes to uint64 words of the
// packed bits (ubinary's layout; bytes in big-endian order so that the
// first dimension is the top bit: the Hamming distance does not depend on
// it, but the words are then the bits np.packbits gives).
func (s space) load(t *tile, col vector.Column) {
	n := col.Rows
	switch s.dtype {
	case vector.Float32:
		if len(col.Data) > 0 {
			t.f = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(col.Data))), n*s.dims)
		} else {
			t.f = nil
		}
	case vector.Float16:
		t.f = t.f[:0]
		for i := range n {
			t.f = vector.Decode(t.f, vector.Float16, s.dims, col.Row(i), nil)
		}
	case vector.Int8:
		t.i8 = unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(col.Data))), len(col.Data))
	case vector.Uint8:
		t.u8 = col.Data
	default:
		t.u64 = t.u64[:0]
		for i := range n {
			t.u64 = appendWords(t.u64, col.Row(i), s.dtype == vector.Binary, s.width)
		}
	}
}

// appendWords appends the packed bits b (of a binary or ubinary vector) as
// width uint64 words.
func appendWords(dst []uint64, b []byte, flip bool, width int) []uint64 {
	for w := range width {
		var buf [8]byte
		n := copy(buf[:], b[min(8*w, len(b)):])
		if flip {
			for k := range n {
				buf[k] ^= 0x80
			}
		}
		dst = append(dst, binary.BigEndian.Uint64(buf[:]))
	}
	return dst
}

// score4 writes the similarities of queries [qi, qi+4) of qs (a tile
// padded to a multiple of 4 queries) to rows [r0, r1) of cs into
// out[i*TileRows + r-r0]: the CPU's block kernel on the rows in fours, the
// Go one on the last few.
func (s space) score4(qs *tile, qi int, cs *tile, r0, r1 int, out []float32) {
	w, n := s.width, (r1-r0)&^3
	ref := sets[0]
	switch {
	case s.dtype.Float():
		q := qs.f[qi*w : (qi+4)*w]
		kern.f32(q, cs.f[r0*w:(r0+n)*w], n, w, out, TileRows)
		ref.f32(q, cs.f[(r0+n)*w:r1*w], r1-r0-n, w, out[n:], TileRows)
	case s.dtype == vector.Int8:
		q := qs.i8[qi*w : (qi+4)*w]
		kern.i8(q, cs.i8[r0*w:(r0+n)*w], n, w, out, TileRows)
		ref.i8(q, cs.i8[(r0+n)*w:r1*w], r1-r0-n, w, out[n:], TileRows)
	case s.dtype == vector.Uint8:
		q := qs.u8[qi*w : (qi+4)*w]
		kern.u8(q, cs.u8[r0*w:(r0+n)*w], n, w, out, TileRows)
		ref.u8(q, cs.u8[(r0+n)*w:r1*w], r1-r0-n, w, out[n:], TileRows)
	default:
		q := qs.u64[qi*w : (qi+4)*w]
		kern.bin(q, cs.u64[r0*w:(r0+n)*w], n, w, s.dims, out, TileRows)
		ref.bin(q, cs.u64[(r0+n)*w:r1*w], r1-r0-n, w, s.dims, out[n:], TileRows)
	}
}

// pad appends zero queries to t until it holds a multiple of 4 of them
// (n: the queries it holds), for score4.
func (s space) pad(t *tile, n int) {
	z := (-n & 3) * s.width
	switch {
	case s.dtype.Float():
		t.f = append(t.f, make([]float32, z)...)
	case s.dtype == vector.Int8:
		t.i8 = append(t.i8, make([]int8, z)...)
	case s.dtype == vector.Uint8:
		t.u8 = append(t.u8, make([]uint8, z)...)
	default:
		t.u64 = append(t.u64, make([]uint64, z)...)
	}
}

// kernelSet is one CPU's block kernels. Each scores 4 queries (rows of q,
// width elements apart: floats, codes or uint64 words) against rows corpus
// rows (of c) into out[i*ostride+j], i < 4, j < rows; the assembly ones
// take rows in multiples of 4.
type kernelSet struct {
	name string
	f32  func(q, c []float32, rows, dims int, out []float32, ostride int)
	i8   func(q, c []int8, rows, dims int, out []float32, ostride int)
	u8   func(q, c []uint8, rows, dims int, out []float32, ostride int)
	bin  func(q, c []uint64, rows, words, dims int, out []float32, ostride int)
}

// sets are the kernel sets this CPU runs, the Go one (the reference, and
// the only one off amd64) first; kern is the last, the fastest.
var (
	sets = []kernelSet{{name: "go", f32: f32Go, i8: codesGo[int8], u8: codesGo[uint8], bin: binGo}}
	kern = sets[0]
)

func f32Go(q, c []float32, rows, dims int, out []float32, ostride int) {
	for i := range 4 {
		qi := q[i*dims : (i+1)*dims]
		for j := range rows {
			out[i*ostride+j] = dotF32(qi, c[j*dims:])
		}
	}
}

func codesGo[T int8 | uint8](q, c []T, rows, dims int, out []float32, ostride int) {
	for i := range 4 {
		qi := q[i*dims : (i+1)*dims]
		for j := range rows {
			out[i*ostride+j] = float32(dotCodes(qi, c[j*dims:]))
		}
	}
}

func binGo(q, c []uint64, rows, words, dims int, out []float32, ostride int) {
	for i := range 4 {
		qi := q[i*words : (i+1)*words]
		for j := range rows {
			out[i*ostride+j] = float32(dims - hamming(qi, c[j*words:]))
		}
	}
}

// checkBlock panics unless a block kernel's slices hold what it reads and
// writes (the assembly does not check): 4 queries, rows (a multiple of 4)
// corpus rows, 4 output rows.
func checkBlock(nq, nc, rows, width, nout, ostride int) {
	if rows%4 != 0 || nq < 4*width || nc < rows*width || (rows > 0 && nout < 3*ostride+rows) || width <= 0 {
		panic("search: block kernel: slices too short for the block")
	}
}
