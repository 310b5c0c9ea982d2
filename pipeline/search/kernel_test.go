package search

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// kernelDims are the dimensions every kernel is checked at: below, at and
// above each step width (8 and 16 floats, 16 and 64 codes, 64-bit words).
var kernelDims = []int{1, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 383, 384, 385, 1024}

// fill is what a test vector holds.
type fill int

const (
	fillRandom fill = iota
	fillMax         // the largest magnitudes: ±127/−128 (int8), 255 (uint8), ±1e17 floats
	fillMin         // −128 everywhere (int8), 0 (uint8), −1e17
	fillSigns       // random extremes of both signs
)

func randF32(rng *rand.Rand, n int, f fill) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch f {
		case fillRandom:
			v[i] = float32(rng.NormFloat64())
		case fillMax:
			v[i] = 1e17 // products 1e34, sums of 1024 of them (1e37) below MaxFloat32 (3.4e38)
		case fillMin:
			v[i] = -1e17
		default:
			v[i] = float32(1e17 * (2*float64(rng.IntN(2)) - 1) * (0.5 + rng.Float64()/2))
		}
	}
	return v
}

func randInt8(rng *rand.Rand, n int, f fill) []int8 {
	v := make([]int8, n)
	for i := range v {
		v[i] = int8(pick(rng, f, -128, 127))
	}
	return v
}

func randUint8(rng *rand.Rand, n int, f fill) []uint8 {
	v := make([]uint8, n)
	for i := range v {
		v[i] = uint8(pick(rng, f, 0, 255))
	}
	return v
}

// pick is a code in [lo, hi] as f says.
func pick(rng *rand.Rand, f fill, lo, hi int) int {
	switch f {
	case fillRandom:
		return lo + rng.IntN(hi-lo+1)
	case fillMax:
		return hi
	case fillMin:
		return lo
	}
	return []int{lo, hi}[rng.IntN(2)]
}

// blockCase is one block of 4 queries against rows corpus rows.
type blockCase struct {
	dims, rows int
	qf, cf     fill
}

func blockCases() []blockCase {
	var cs []blockCase
	for _, d := range kernelDims {
		cs = append(cs, blockCase{d, 12, fillRandom, fillRandom})
	}
	for _, d := range []int{17, 384, 1024} {
		for _, f := range []struct{ q, c fill }{{fillMax, fillMax}, {fillMin, fillMin}, {fillMax, fillMin}, {fillSigns, fillSigns}, {fillRandom, fillMin}} {
			cs = append(cs, blockCase{d, 8, f.q, f.c})
		}
	}
	return append(cs, blockCase{384, 0, fillRandom, fillRandom}, blockCase{65, 4, fillRandom, fillRandom})
}

const ostride = 37 // an output row longer than the block, as TileRows is

// TestKernelsEqualGo: every kernel set this CPU runs gives the Go
// kernels' scores: exactly for int8, uint8 and binary, within 1e-5 of the
// sum of the products' magnitudes for float32 (another summation order).
func TestKernelsEqualGo(t *testing.T) {
	if len(sets) == 1 {
		t.Skip("this CPU runs only the Go kernels (no AVX2 or not amd64): nothing to compare")
	}
	ref := sets[0]
	rng := rand.New(rand.NewPCG(21, 22))
	for _, k := range sets[1:] {
		for _, c := range blockCases() {
			name := fmt.Sprintf("%s/dims %d rows %d fill %d×%d", k.name, c.dims, c.rows, c.qf, c.cf)
			t.Run(name, func(t *testing.T) {
				checkF32(t, k, ref, randF32(rng, 4*c.dims, c.qf), randF32(rng, c.rows*c.dims, c.cf), c)
				i8q, i8c := randInt8(rng, 4*c.dims, c.qf), randInt8(rng, c.rows*c.dims, c.cf)
				checkExact(t, "int8", func(ks kernelSet, out []float32) { ks.i8(i8q, i8c, c.rows, c.dims, out, ostride) }, k, ref)
				u8q, u8c := randUint8(rng, 4*c.dims, c.qf), randUint8(rng, c.rows*c.dims, c.cf)
				checkExact(t, "uint8", func(ks kernelSet, out []float32) { ks.u8(u8q, u8c, c.rows, c.dims, out, ostride) }, k, ref)
				words := (c.dims + 63) / 64
				qb, cb := randWords(rng, 4*words, c.qf), randWords(rng, c.rows*words, c.cf)
				checkExact(t, "binary", func(ks kernelSet, out []float32) { ks.bin(qb, cb, c.rows, words, c.dims, out, ostride) }, k, ref)
			})
		}
	}
}

func randWords(rng *rand.Rand, n int, f fill) []uint64 {
	v := make([]uint64, n)
	for i := range v {
		switch f {
		case fillMax:
			v[i] = math.MaxUint64
		case fillMin:
			v[i] = 0
		default:
			v[i] = rng.Uint64()
		}
	}
	return v
}

// checkExact runs the kernel of set k and of ref through run and wants the
// same scores, bit for bit.
func checkExact(t *testing.T, what string, run func(kernelSet, []float32), k, ref kernelSet) {
	t.Helper()
	got, want := make([]float32, 4*ostride), make([]float32, 4*ostride)
	run(k, got)
	run(ref, want)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: out[%d] (query %d, row %d): got %v; want %v", what, i, i/ostride, i%ostride, got[i], want[i])
		}
	}
}

func checkF32(t *testing.T, k, ref kernelSet, q, c []float32, bc blockCase) {
	t.Helper()
	got, want := make([]float32, 4*ostride), make([]float32, 4*ostride)
	k.f32(q, c, bc.rows, bc.dims, got, ostride)
	ref.f32(q, c, bc.rows, bc.dims, want, ostride)
	for i := range 4 {
		for j := range ostride {
			g, w := got[i*ostride+j], want[i*ostride+j]
			if j >= bc.rows {
				if g != 0 {
					t.Fatalf("float32: out[%d][%d] beyond the %d rows: got %v; want it untouched (0)", i, j, bc.rows, g)
				}
				continue
			}
			var mag float64 // Σ|q·c|: the scale of a summation order's error
			for d := range bc.dims {
				mag += math.Abs(float64(q[i*bc.dims+d]) * float64(c[j*bc.dims+d]))
			}
			if diff := math.Abs(float64(g) - float64(w)); diff > 1e-5*mag || math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
				t.Fatalf("float32: query %d row %d: got %v; want %v (within %.3g)", i, j, g, w, 1e-5*mag)
			}
		}
	}
}

// TestMaxOf: the CPU's maxOf is maxGo's at every length around its step.
func TestMaxOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, n := range []int{1, 2, 31, 32, 33, 63, 64, 65, 255, 256, 257} {
		for _, f := range []fill{fillRandom, fillMin, fillSigns} {
			s := randF32(rng, n, f)
			if f == fillRandom {
				s[rng.IntN(n)] = 9 // the largest somewhere
			}
			if got, want := maxOf(s), maxGo(s); got != want {
				t.Errorf("n %d fill %d: got %v; want %v", n, f, got, want)
			}
			want := s[0]
			for _, x := range s {
				want = max(want, x)
			}
			if got := maxGo(s); got != want {
				t.Errorf("maxGo: n %d fill %d: got %v; want %v", n, f, got, want)
			}
		}
	}
}

// FuzzKernels: the CPU's kernels against the Go ones on vectors the fuzzer
// draws: dims from the first byte, then 4 queries and 4 or 8 rows of
// codes (int8, uint8, the bits of binary) and of floats made from them.
func FuzzKernels(f *testing.F) {
	f.Add([]byte{0})                                  // one dimension, zero vectors
	f.Add([]byte{16, 0x80, 0x7f, 0xff, 1, 2, 3})      // 17 dims, extremes first
	f.Add(bytes.Repeat([]byte{0x80}, 2000))           // 129 dims of -128
	f.Add(append([]byte{63}, make([]byte, 64*12)...)) // 64 dims, a step exactly
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		dims := 1 + int(data[0])
		rows := 4 + 4*int(data[0]%2)
		data = data[1:]
		code := func(i int) byte {
			if len(data) == 0 {
				return 0
			}
			return data[i%len(data)]
		}
		i8q, i8c := make([]int8, 4*dims), make([]int8, rows*dims)
		u8q, u8c := make([]uint8, 4*dims), make([]uint8, rows*dims)
		fq, fc := make([]float32, 4*dims), make([]float32, rows*dims)
		for i := range i8q {
			i8q[i], u8q[i], fq[i] = int8(code(i)), code(i), float32(int8(code(i)))/16
		}
		for i := range i8c {
			j := 4*dims + i
			i8c[i], u8c[i], fc[i] = int8(code(j)), code(j), float32(int8(code(j)))/16
		}
		words := (dims + 63) / 64
		bq, bc := make([]uint64, 4*words), make([]uint64, rows*words)
		for i := range bq {
			bq[i] = uint64(code(8*i))<<56 | uint64(code(8*i+1))
		}
		for i := range bc {
			bc[i] = uint64(code(8*i+3))<<48 | uint64(code(8*i+5))<<8
		}
		ref := sets[0]
		checkExact(t, "int8", func(ks kernelSet, out []float32) { ks.i8(i8q, i8c, rows, dims, out, ostride) }, kern, ref)
		checkExact(t, "uint8", func(ks kernelSet, out []float32) { ks.u8(u8q, u8c, rows, dims, out, ostride) }, kern, ref)
		checkExact(t, "binary", func(ks kernelSet, out []float32) { ks.bin(bq, bc, rows, words, dims, out, ostride) }, kern, ref)
		// Floats of 1/16 steps: every product and sum exact in float32, so the orders agree exactly.
		checkExact(t, "float32", func(ks kernelSet, out []float32) { ks.f32(fq, fc, rows, dims, out, ostride) }, kern, ref)
	})
}
