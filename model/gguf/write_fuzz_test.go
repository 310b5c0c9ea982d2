package gguf

import (
	"bytes"
	"math"
	"reflect"
	"testing"
)

// FuzzWriteRoundTrip writes metadata built from the inputs and one F32 tensor,
// reads the file back and compares.
func FuzzWriteRoundTrip(f *testing.F) {
	f.Add("general.name", "model", uint64(7), float32(1.5), []byte{1, 2, 3})              // plain
	f.Add("", "", uint64(0), float32(0), []byte{})                                        // empty key and value
	f.Add("k\x00ey", "é\xff", uint64(math.MaxUint64), float32(math.Inf(-1)), []byte(nil)) // odd bytes, extremes
	f.Fuzz(func(t *testing.T, key, s string, n uint64, x float32, arr []byte) {
		if arr == nil {
			arr = []byte{} // Read returns empty arrays as empty slices
		}
		w := NewWriter()
		if err := w.Set("k."+key, s); err != nil {
			t.Fatal(err)
		}
		for _, kv := range []struct {
			k string
			v any
		}{{"n", n}, {"x", x}, {"arr", arr}, {"strs", []string{s, key}}} {
			if err := w.Set(kv.k, kv.v); err != nil {
				t.Fatal(err)
			}
		}
		vals := []float32{x, -x, float32(n)}
		if err := w.AddTensor(Tensor{Name: "t" + key, Type: GGMLTypeF32, Dims: []uint64{3}, Values: vals}); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := w.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		r, err := Read(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.KV) != 5 || !reflect.DeepEqual(r.KV, w.KV()) && !sameWithNaN(r.KV, w.KV()) {
			t.Fatalf("metadata: got %#v; want %#v", r.KV, w.KV())
		}
		if r.DataOffset%DefaultAlignment != 0 || int(r.DataOffset)+32 != b.Len() {
			t.Fatalf("data offset %d, file %d bytes; want aligned, and one 32-byte padded tensor after it", r.DataOffset, b.Len())
		}
		got, err := DecodeTensor(GGMLTypeF32, b.Bytes()[r.DataOffset:r.DataOffset+12])
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(vals[i]) {
				t.Fatalf("value %d: got %v; want %v", i, got[i], vals[i])
			}
		}
	})
}

// sameWithNaN compares entries where the float32 value may be NaN.
func sameWithNaN(a, b []KV) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, ok1 := a[i].Value.(float32)
		y, ok2 := b[i].Value.(float32)
		if ok1 && ok2 && math.Float32bits(x) == math.Float32bits(y) {
			continue
		}
		if !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// FuzzF32ToF16 checks that the conversion picks the nearest half, ties to even.
func FuzzF32ToF16(f *testing.F) {
	f.Add(float32(1))             // exact
	f.Add(float32(1.00048828125)) // tie between 1 and its successor: to even
	f.Add(float32(65519.99))      // just below the overflow threshold
	f.Add(float32(3e-8))          // just above half the smallest subnormal
	f.Add(float32(-0.1))          // inexact, negative
	f.Fuzz(func(t *testing.T, x float32) {
		if math.IsNaN(float64(x)) {
			return
		}
		h := F32ToF16(x)
		if math.Abs(float64(x)) >= 65520 { // rounds past the largest finite half
			if h&0x7fff != 0x7c00 {
				t.Fatalf("F32ToF16(%v) = %#04x; want ±Inf", x, h)
			}
			return
		}
		got := float64(F16ToF32(h))
		d := math.Abs(got - float64(x))
		for _, nb := range []uint16{h + 1, h - 1} {
			if nb&0x7c00 == 0x7c00 || (h&0x7fff == 0 && nb == h-1) {
				continue // Inf/NaN, or below zero's encoding
			}
			nd := math.Abs(float64(F16ToF32(nb)) - float64(x))
			if nd < d || (nd == d && h&1 == 1) {
				t.Fatalf("F32ToF16(%v) = %#04x (%v); %#04x (%v) is nearer or the even tie", x, h, got, nb, F16ToF32(nb))
			}
		}
	})
}
