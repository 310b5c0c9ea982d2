package safetensors

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// file builds a safetensors file from a header and data bytes.
func file(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

func writeTemp(t testing.TB, b []byte) string {
	p := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWriteRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "w.safetensors")
	w := []float32{1, -2.5, 3e-8, 4}
	if err := Write(p, map[string][]float32{"linear.weight": w, "linear.bias": {0.5}}, map[string][]int64{"linear.weight": {2, 2}, "linear.bias": {1}}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, shape, err := f.Float32("linear.weight")
	if err != nil || !slices.Equal(got, w) || !slices.Equal(shape, []int64{2, 2}) {
		t.Errorf("got %v %v %v; want %v [2 2]", got, shape, err, w)
	}
	if _, _, err := f.Float32("missing"); err == nil || !strings.Contains(err.Error(), "linear.bias linear.weight") {
		t.Errorf("missing tensor: %v; want the names listed", err)
	}
}

// TestHalfPrecision: F16 (normal, subnormal, negative zero, infinity) and
// BF16 values convert exactly.
func TestHalfPrecision(t *testing.T) {
	f16 := []uint16{0x3c00, 0xc000, 0x3555, 0x0001, 0x8000, 0x7c00, 0x7bff}
	want16 := []float32{1, -2, 0.33325195, 5.9604645e-08, 0, float32(posInf()), 65504}
	bf16 := []uint16{0x3f80, 0xc049, 0x0000}
	wantBF := []float32{1, -3.140625, 0}
	var data []byte
	for _, h := range f16 {
		data = binary.LittleEndian.AppendUint16(data, h)
	}
	for _, h := range bf16 {
		data = binary.LittleEndian.AppendUint16(data, h)
	}
	hdr := `{"a":{"dtype":"F16","shape":[7],"data_offsets":[0,14]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[14,20]},"__metadata__":{"format":"pt"}}`
	f, err := Open(writeTemp(t, file(hdr, data)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, _, _ := f.Float32("a")
	b, _, _ := f.Float32("b")
	if !slices.Equal(a, want16) || !slices.Equal(b, wantBF) {
		t.Errorf("F16 %v; want %v\nBF16 %v; want %v", a, want16, b, wantBF)
	}
}

func posInf() float64 { var z float64; return 1 / z }

func TestMalformed(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "no header length"},
		{"header past the end", binary.LittleEndian.AppendUint64(nil, 1000), "header length 1000"},
		{"not JSON", file("{nope", nil), "header"},
		{"offsets past the end", file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 4)), "outside the 4 data bytes"},
		{"shape and bytes disagree", file(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8)), "8 bytes for shape [3]"},
		{"unknown dtype", file(`{"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}`, make([]byte, 1)), `dtype "Q4"`},
		{"negative shape", file(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, nil), "shape [-1]"},
		{"overlapping tensors", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, make([]byte, 12)), "tensors a [0,8] and b [4,12] overlap"},
		{"one tensor twice", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)), "tensors a [0,8] and b [0,8] overlap"},
		{"inside another", file(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 16)), "overlap"},
		{"a hole between", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12)), "data bytes [4,8) belong to no tensor"},
		{"bytes after the last", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 8)), "data bytes [4,8) at the end"},
	}
	for _, tt := range tests {
		_, err := Open(writeTemp(t, tt.b))
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v; want ErrFormat mentioning %q", tt.name, err, tt.want)
		}
	}
	f, err := Open(writeTemp(t, file(`{"i":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, make([]byte, 8))))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, err := f.Float32("i"); err == nil || !strings.Contains(err.Error(), "tensor i is I64") {
		t.Errorf("I64 tensor: %v; want refused by dtype", err)
	}
}

// FuzzOpen: any bytes open without panicking, and every tensor of a file
// that opens reads.
func FuzzOpen(f *testing.F) {
	f.Add(file(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4))) // valid
	f.Add(file(`{"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 3))) // truncated data
	f.Add(file(`{"w":{"dtype":"BF16","shape":[1,1],"data_offsets":[2,4]}}`, make([]byte, 4)))
	f.Add(binary.LittleEndian.AppendUint64(nil, 1<<62)) // header over the limit
	f.Add([]byte("abc"))                                // shorter than the length
	f.Fuzz(func(t *testing.T, b []byte) {
		sf, err := Open(writeTemp(t, b))
		if err != nil {
			return
		}
		defer sf.Close()
		for _, n := range sf.Names() {
			if _, _, err := sf.Float32(n); err != nil && elemSize[sf.Tensors[n].DType] != 0 {
				t.Errorf("tensor %s passed the checks but does not read: %v", n, err)
			}
		}
	})
}
