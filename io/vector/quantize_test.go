package vector

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"
)

// ruleInt8 is the documented int8/uint8 rule written out independently:
// (x − min)/((max − min)/255), in float32 as numpy, minus 128 for int8,
// truncated toward zero and clamped to the code range.
func ruleCode(x, lo, hi float32, signed bool) int {
	step := (hi - lo) / 255
	v := float64(float32(float32(x-lo) / step))
	if signed {
		v = float64(float32(v) - 128)
	}
	c := int(math.Trunc(v))
	if signed {
		return max(-128, min(127, c))
	}
	return max(0, min(255, c))
}

func TestQuantizeRules(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const dims, n = 37, 200 // not a multiple of 8: binary pads with zero bits
	vecs := make([][]float32, n)
	r := NewRanges(dims)
	for i := range vecs {
		vecs[i] = make([]float32, dims)
		for j := range vecs[i] {
			vecs[i][j] = float32(rng.NormFloat64()) * float32(1+j%3)
		}
		if i < n/2 { // the second half may fall outside the ranges: clamped
			r.Observe(vecs[i])
		}
	}
	r.Min[5] = r.Max[5] // a single-point range codes the lowest code
	for _, d := range Dtypes {
		q, err := NewQuantizer(d, dims, r)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vecs {
			b := q.Append(nil, v)
			if len(b) != d.Width(dims) {
				t.Fatalf("%s: %d bytes; want %d", d, len(b), d.Width(dims))
			}
			for j, x := range v {
				var got, want int
				switch d {
				case Float32:
					got, want = int(math.Float32bits(Decode(nil, d, dims, b, nil)[j])), int(math.Float32bits(x))
				case Float16:
					got, want = int(uint16(b[2*j])|uint16(b[2*j+1])<<8), int(float16.Fromfloat32(x).Bits())
				case Int8, Uint8:
					got, want = int(b[j]), ruleCode(x, r.Min[j], r.Max[j], d == Int8)
					if d == Int8 {
						got = int(int8(b[j]))
					}
					if j == 5 {
						want = map[Dtype]int{Int8: -128, Uint8: 0}[d]
					}
				case Binary, UBinary:
					bit := int(b[j/8]>>(7-j%8)) & 1
					if d == Binary && j%8 == 0 { // the top bit of each byte is flipped (packed − 128)
						bit ^= 1
					}
					got, want = bit, 0
					if x > 0 {
						want = 1
					}
				}
				if got != want {
					t.Fatalf("%s: vector %d dim %d (x=%v): got %d; want %d", d, i, j, x, got, want)
				}
			}
			if d.Bits() && b[len(b)-1]&(1<<(8-dims%8)-1) != byte(0) && d == UBinary {
				t.Fatalf("ubinary: padding bits not zero: %08b", b[len(b)-1])
			}
		}
	}
}

func TestRangesRoundTrip(t *testing.T) {
	r := &Ranges{Min: []float32{-0.1234567, -1e-8, 0}, Max: []float32{0.7654321, 3e-7, 0}}
	got, err := ParseRanges(r.JSON(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest() != r.Digest() {
		t.Errorf("ranges %s read back as %s", r.JSON(), got.JSON())
	}
	for _, bad := range []string{`{"min":[1],"max":[0]}`, `{"min":[0,0],"max":[1,1]}`, `nope`} {
		if _, err := ParseRanges(bad, 1); err == nil {
			t.Errorf("ParseRanges(%s): no error", bad)
		}
	}
}

func TestParseDtype(t *testing.T) {
	for _, d := range Dtypes {
		if got, err := ParseDtype(string(d)); err != nil || got != d {
			t.Errorf("ParseDtype(%s) = %s, %v", d, got, err)
		}
	}
	if _, err := ParseDtype("int4"); err == nil {
		t.Error("ParseDtype(int4): no error")
	}
}

func TestNonFinite(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, c := range []struct {
		v    []float32
		want int
	}{
		{nil, -1},
		{[]float32{0, -1, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32}, -1},
		{[]float32{1, nan}, 1},
		{[]float32{inf, 1}, 0},
		{[]float32{1, 2, -inf}, 2},
		{[]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, nan, 11}, 9}, // past the first eight
		{[]float32{1, 2, 3, 4, 5, 6, 7, inf, 9, 10, 11, 12, 13, 14, 15, nan}, 7}, // the first of two
		{[]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, -inf}, 15},
		{[]float32{-0, 1e38, -1e38, 3.4e38, 1, 1, 1, 1, 1}, -1},
	} {
		if got := NonFinite(c.v); got != c.want {
			t.Errorf("NonFinite(%v): got %d; want %d", c.v, got, c.want)
		}
	}
}
