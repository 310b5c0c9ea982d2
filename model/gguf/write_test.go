package gguf

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// allKinds holds one entry of every scalar and array type the writer accepts.
var allKinds = []struct {
	key  string
	v    any
	want any // what Read returns, when it differs from v
}{
	{"t.u8", uint8(200), nil},
	{"t.i8", int8(-100), nil},
	{"t.u16", uint16(60000), nil},
	{"t.i16", int16(-30000), nil},
	{"t.u32", uint32(4000000000), nil},
	{"t.i32", int32(-2000000000), nil},
	{"t.f32", float32(1.5e-12), nil},
	{"t.bool", true, nil},
	{"t.string", "héllo\x00world", nil},
	{"t.empty", "", nil},
	{"t.u64", uint64(1) << 63, nil},
	{"t.i64", int64(-1) << 62, nil},
	{"t.f64", math.Pi, nil},
	{"t.a.u8", []uint8{0, 1, 255}, nil},
	{"t.a.i8", []int8{-128, 0, 127}, nil},
	{"t.a.u16", []uint16{1, 65535}, []any{uint16(1), uint16(65535)}},
	{"t.a.i16", []int16{-1, 2}, []any{int16(-1), int16(2)}},
	{"t.a.u32", []uint32{7, 1 << 31}, nil},
	{"t.a.i32", []int32{-1, 100, 101}, nil},
	{"t.a.f32", []float32{0, -1.25, float32(math.Inf(1))}, nil},
	{"t.a.bool", []bool{true, false}, nil},
	{"t.a.string", []string{"[PAD]", "", "##ing"}, nil},
	{"t.a.u64", []uint64{1 << 40}, nil},
	{"t.a.i64", []int64{-1 << 40}, nil},
	{"t.a.f64", []float64{2.5}, []any{2.5}},
	{"t.a.emptystrings", []string{}, nil},
}

func sample(n int, seed float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.Sin(float64(seed)+float64(i)*0.37)) * float32(1+i%7)
	}
	return v
}

// writeRead writes w to a file and opens it again.
// kindsWriter is a Writer holding every entry of allKinds, with
// general.alignment set when align is not 0.
func kindsWriter(t *testing.T, align uint32) *Writer {
	t.Helper()
	w := NewWriter()
	if align != 0 {
		if err := w.Set("general.alignment", align); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range allKinds {
		if err := w.Set(k.key, k.v); err != nil {
			t.Fatalf("Set(%s): %v", k.key, err)
		}
	}
	return w
}

func writeRead(t *testing.T, w *Writer) (*File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return f, path
}

// tensorValues reads and decodes a tensor's data from the file at path.
func tensorValues(t *testing.T, path string, f *File, name string) []float32 {
	t.Helper()
	v, err := ReadTensor(path, f, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestWriteRoundTrip(t *testing.T) {
	for _, align := range []uint32{0, 64} {
		t.Run(map[uint32]string{0: "default-alignment", 64: "alignment-64"}[align], func(t *testing.T) {
			w := kindsWriter(t, align)
			f32 := sample(3*5, 1)
			f16 := sample(7*2, 2) // 7 elements a row: data not a multiple of the alignment
			q8 := sample(64*3, 3)
			tensors := []Tensor{
				{Name: "a.f32", Type: GGMLTypeF32, Dims: []uint64{3, 5}, Values: f32},
				{Name: "b.f16", Type: GGMLTypeF16, Dims: []uint64{7, 2}, Values: f16},
				{Name: "c.q8", Type: GGMLTypeQ8_0, Dims: []uint64{64, 3}, Fill: func(r int, dst []float32) { copy(dst, q8[r*64:]) }},
				{Name: "d.one", Type: GGMLTypeF32, Dims: []uint64{1}, Values: []float32{42}},
			}
			for _, tn := range tensors {
				if err := w.AddTensor(tn); err != nil {
					t.Fatal(err)
				}
			}
			f, path := writeRead(t, w)
			checkKVs(t, f)
			wantAlign := uint64(DefaultAlignment)
			if align != 0 {
				wantAlign = uint64(align)
			}
			if f.DataOffset%int64(wantAlign) != 0 {
				t.Errorf("data offset %d not aligned to %d", f.DataOffset, wantAlign)
			}
			for i, tn := range tensors {
				got := f.Tensors[i]
				if got.Name != tn.Name || got.Type != tn.Type || !reflect.DeepEqual(got.Dims, tn.Dims) || got.Offset%wantAlign != 0 {
					t.Errorf("tensor %d: got %+v; want %s %v %v at an offset aligned to %d", i, got, tn.Name, tn.Type, tn.Dims, wantAlign)
				}
			}
			checkValues(t, tensorValues(t, path, f, "a.f32"), f32, 0)
			checkValues(t, tensorValues(t, path, f, "b.f16"), f16, 1.0/1024)
			checkValues(t, tensorValues(t, path, f, "c.q8"), q8, 1.0/127)
			checkValues(t, tensorValues(t, path, f, "d.one"), []float32{42}, 0)
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			last := f.Tensors[len(f.Tensors)-1]
			if want := f.DataOffset + int64(pad(last.Offset+4, wantAlign)); st.Size() != want {
				t.Errorf("file size = %d; want %d", st.Size(), want)
			}
		})
	}
}

func checkKVs(t *testing.T, f *File) {
	t.Helper()
	for _, k := range allKinds {
		kv, ok := f.Get(k.key)
		want := k.want
		if want == nil {
			want = k.v
		}
		if !ok || !reflect.DeepEqual(kv.Value, want) {
			t.Errorf("%s: got %#v (found %v); want %#v", k.key, kv.Value, ok, want)
		}
	}
}

// checkValues compares with a tolerance relative to each row's magnitude.
func checkValues(t *testing.T, got, want []float32, rel float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d values; want %d", len(got), len(want))
	}
	for i := range got {
		tol := rel * 7 // sample's largest magnitude
		if d := math.Abs(float64(got[i] - want[i])); d > tol || (rel == 0 && got[i] != want[i]) {
			t.Fatalf("value %d: got %v; want %v (tolerance %v)", i, got[i], want[i], tol)
		}
	}
}

func TestWriteCopiesFile(t *testing.T) {
	w := NewWriter()
	for _, k := range allKinds {
		if err := w.Set(k.key, k.v); err != nil {
			t.Fatal(err)
		}
	}
	f, _ := writeRead(t, w)
	// Re-write what Read returned, []any arrays included, and compare bytes.
	w2 := NewWriter()
	for _, kv := range f.KV {
		if err := w2.SetKV(kv); err != nil {
			t.Fatalf("SetKV(%s): %v", kv.Key, err)
		}
	}
	var a, b bytes.Buffer
	if _, err := w.WriteTo(&a); err != nil {
		t.Fatal(err)
	}
	if _, err := w2.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("re-written file differs: %d bytes; want %d", b.Len(), a.Len())
	}
}

func TestWriterSetReplacesAndDeletes(t *testing.T) {
	w := NewWriter()
	for _, k := range []string{"a", "b", "c"} {
		if err := w.Set(k, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Set("b", uint32(2)); err != nil {
		t.Fatal(err)
	}
	w.Delete("a")
	w.Delete("missing")
	if err := w.Set("d", true); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range w.KV() {
		keys = append(keys, kv.Key)
	}
	if want := []string{"b", "c", "d"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("keys = %v; want %v", keys, want)
	}
	if v := w.KV()[0].Value; v != uint32(2) {
		t.Errorf("b = %#v; want uint32(2)", v)
	}
}

func TestWriterRejects(t *testing.T) {
	tests := []struct {
		name string
		do   func(w *Writer) error
	}{
		{"unsupported Go type", func(w *Writer) error { return w.Set("k", 3) }},
		{"nested array", func(w *Writer) error { return w.Set("k", [][]string{{"a"}}) }},
		{"type mismatch", func(w *Writer) error { return w.SetKV(KV{Key: "k", Type: TypeUint32, Value: int32(1)}) }},
		{"elem mismatch", func(w *Writer) error {
			return w.SetKV(KV{Key: "k", Type: TypeArray, Elem: TypeInt32, Value: []uint32{1}})
		}},
		{"any array element mismatch", func(w *Writer) error {
			return w.SetKV(KV{Key: "k", Type: TypeArray, Elem: TypeUint16, Value: []any{uint16(1), "x"}})
		}},
		{"empty key", func(w *Writer) error { return w.Set("", "x") }},
		{"alignment not power of two", func(w *Writer) error { return w.Set("general.alignment", uint32(48)) }},
		{"alignment wrong type", func(w *Writer) error { return w.Set("general.alignment", uint64(64)) }},
		{"no values", func(w *Writer) error {
			return w.AddTensor(Tensor{Name: "t", Type: GGMLTypeF32, Dims: []uint64{2}})
		}},
		{"values and fill", func(w *Writer) error {
			return w.AddTensor(Tensor{Name: "t", Type: GGMLTypeF32, Dims: []uint64{1}, Values: []float32{1}, Fill: func(int, []float32) {}})
		}},
		{"wrong value count", func(w *Writer) error {
			return w.AddTensor(Tensor{Name: "t", Type: GGMLTypeF32, Dims: []uint64{2, 2}, Values: []float32{1, 2, 3}})
		}},
		{"zero dim", func(w *Writer) error {
			return w.AddTensor(Tensor{Name: "t", Type: GGMLTypeF32, Dims: []uint64{2, 0}, Values: []float32{}})
		}},
		{"q8 row length", func(w *Writer) error {
			return w.AddTensor(Tensor{Name: "t", Type: GGMLTypeQ8_0, Dims: []uint64{16}, Values: make([]float32, 16)})
		}},
		{"unwritable type", func(w *Writer) error {
			return w.AddTensor(Tensor{Name: "t", Type: GGMLType(2), Dims: []uint64{32}, Values: make([]float32, 32)})
		}},
		{"duplicate tensor", func(w *Writer) error {
			t := Tensor{Name: "t", Type: GGMLTypeF32, Dims: []uint64{1}, Values: []float32{1}}
			if err := w.AddTensor(t); err != nil {
				return nil
			}
			return w.AddTensor(t)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do(NewWriter())
			if !errors.Is(err, ErrInvalidModel) {
				t.Errorf("got %v; want an error wrapping ErrInvalidModel", err)
			}
		})
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after < len(p) {
		n := f.after
		f.after = 0
		return n, io.ErrShortWrite
	}
	f.after -= len(p)
	return len(p), nil
}

func TestWriteToReportsWriteError(t *testing.T) {
	w := NewWriter()
	if err := w.Set("general.architecture", "bert"); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor(Tensor{Name: "t", Type: GGMLTypeF32, Dims: []uint64{64}, Values: make([]float32, 64)}); err != nil {
		t.Fatal(err)
	}
	for _, after := range []int{0, 10, 100} {
		if _, err := w.WriteTo(&failWriter{after: after}); !errors.Is(err, io.ErrShortWrite) {
			t.Errorf("failing after %d bytes: got %v; want io.ErrShortWrite", after, err)
		}
	}
}

func TestF16(t *testing.T) {
	tests := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{65504, 0x7bff}, // largest finite
		{65520, 0x7c00}, // rounds up to +Inf
		{1e10, 0x7c00},  // overflow
		{float32(math.Inf(-1)), 0xfc00},
		{6.1035156e-05, 0x0400}, // smallest normal
		{5.9604645e-08, 0x0001}, // smallest subnormal
		{2.9802322e-08, 0x0000}, // half of it: ties to even (0)
		{4.4703484e-08, 0x0001}, // 0.75 of it: rounds up
		{1e-10, 0x0000},         // underflow
		{1.0009765625, 0x3c01},  // 1 + 2^-10
		{1.00048828125, 0x3c00}, // 1 + 2^-11: tie, to even
		{1.00146484375, 0x3c02}, // 1 + 3·2^-11: tie, to even (up)
		{0.333333333, 0x3555},
		{6.097555e-05, 0x03ff}, // largest subnormal
	}
	for _, tt := range tests {
		if got := F32ToF16(tt.in); got != tt.want {
			t.Errorf("F32ToF16(%v) = %#04x; want %#04x", tt.in, got, tt.want)
		}
	}
	if got := F32ToF16(float32(math.NaN())); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
		t.Errorf("F32ToF16(NaN) = %#04x; want a NaN", got)
	}
	// Every finite half converts to float32 and back unchanged.
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			continue // NaN payloads
		}
		if got := F32ToF16(F16ToF32(uint16(h))); got != uint16(h) {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, got)
		}
	}
}

func TestDecodeTensorRejectsPartialElements(t *testing.T) {
	for _, tt := range []struct {
		typ GGMLType
		n   int
	}{{GGMLTypeF32, 6}, {GGMLTypeF16, 3}, {GGMLTypeQ8_0, 33}, {GGMLType(2), 18}} {
		if _, err := DecodeTensor(tt.typ, make([]byte, tt.n)); err == nil {
			t.Errorf("DecodeTensor(%v, %d bytes): got nil error; want one", tt.typ, tt.n)
		}
	}
}

func BenchmarkWriteF16(b *testing.B) {
	w := NewWriter()
	row := sample(384, 1)
	if err := w.AddTensor(Tensor{Name: "t", Type: GGMLTypeF16, Dims: []uint64{384, 1536},
		Fill: func(_ int, dst []float32) { copy(dst, row) }}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(TensorBytes(GGMLTypeF16, []uint64{384, 1536})))
	for b.Loop() {
		if _, err := w.WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
