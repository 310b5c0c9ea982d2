//go:build linux && (amd64 || arm64)

package gguf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/hybridgroup/yzma/pkg/loader"
	"github.com/jupiterrider/ffi"
	"github.com/synapse-embed/synapse/engine/testenv"
)

// ggufC is ggml's own GGUF reader (gguf.h in libggml-base), called through libffi.
type ggufC struct {
	initFromFile, free, ggmlFree                 ffi.Fun
	nKV, nTensors, findKey, kvType, arrN, valStr ffi.Fun
	valU32, tensorOffset, dataOffset, tensorType ffi.Fun
	alignment, tensorName                        ffi.Fun
}

// ffiInitParams is struct gguf_init_params { bool no_alloc; struct ggml_context ** ctx; }.
var ffiInitParams = ffi.NewType(&ffi.TypeUint8, &ffi.TypePointer)

type initParams struct {
	noAlloc uint8
	_       [7]byte
	ctx     unsafe.Pointer
}

func loadGGUFC(t *testing.T) *ggufC {
	t.Helper()
	dir := testenv.LlamaLib(t)
	lib, err := loader.LoadLibrary(dir, "ggml-base")
	if err != nil {
		t.Fatalf("loading libggml-base from %s: %v", dir, err)
	}
	var c ggufC
	P, I64, U64 := &ffi.TypePointer, &ffi.TypeSint64, &ffi.TypeUint64
	for _, fn := range []struct {
		f    *ffi.Fun
		name string
		ret  *ffi.Type
		args []*ffi.Type
	}{
		{&c.initFromFile, "gguf_init_from_file", P, []*ffi.Type{P, &ffiInitParams}},
		{&c.free, "gguf_free", &ffi.TypeVoid, []*ffi.Type{P}},
		{&c.ggmlFree, "ggml_free", &ffi.TypeVoid, []*ffi.Type{P}},
		{&c.nKV, "gguf_get_n_kv", I64, []*ffi.Type{P}},
		{&c.nTensors, "gguf_get_n_tensors", I64, []*ffi.Type{P}},
		{&c.findKey, "gguf_find_key", I64, []*ffi.Type{P, P}},
		{&c.kvType, "gguf_get_kv_type", &ffi.TypeSint32, []*ffi.Type{P, I64}},
		{&c.arrN, "gguf_get_arr_n", U64, []*ffi.Type{P, I64}},
		{&c.valStr, "gguf_get_val_str", P, []*ffi.Type{P, I64}},
		{&c.valU32, "gguf_get_val_u32", &ffi.TypeUint32, []*ffi.Type{P, I64}},
		{&c.tensorOffset, "gguf_get_tensor_offset", U64, []*ffi.Type{P, I64}},
		{&c.tensorType, "gguf_get_tensor_type", &ffi.TypeSint32, []*ffi.Type{P, I64}},
		{&c.tensorName, "gguf_get_tensor_name", P, []*ffi.Type{P, I64}},
		{&c.dataOffset, "gguf_get_data_offset", U64, []*ffi.Type{P}},
		{&c.alignment, "gguf_get_alignment", U64, []*ffi.Type{P}},
	} {
		if *fn.f, err = lib.Prep(fn.name, fn.ret, fn.args...); err != nil {
			t.Fatalf("%s: %v", fn.name, err)
		}
	}
	return &c
}

func cstr(p unsafe.Pointer) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}

// callI64 calls a function returning an integer and widens its result.
func callI64(f ffi.Fun, args ...any) int64 {
	var r ffi.Arg
	f.Call(&r, args...)
	return int64(r)
}

// TestWriteAcceptedByGGML opens written files with ggml's gguf_init_from_file,
// which checks the header, every entry, tensor offsets and alignment and (with
// no_alloc false) reads all tensor data, and compares what it found.
func TestWriteAcceptedByGGML(t *testing.T) {
	c := loadGGUFC(t)
	for _, align := range []uint32{0, 64} {
		w := kindsWriter(t, align)
		for _, tn := range []Tensor{
			{Name: "a.f32", Type: GGMLTypeF32, Dims: []uint64{3, 5}, Values: sample(15, 1)},
			{Name: "b.f16", Type: GGMLTypeF16, Dims: []uint64{7, 2}, Values: sample(14, 2)},
			{Name: "c.q8", Type: GGMLTypeQ8_0, Dims: []uint64{64, 3}, Values: sample(192, 3)},
		} {
			if err := w.AddTensor(tn); err != nil {
				t.Fatal(err)
			}
		}
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		checkWithGGML(t, c, path, f)
		// The same file one byte short: ggml must refuse it, or this test proves nothing.
		if err := os.Truncate(path, int64(TensorBytes(GGMLTypeQ8_0, []uint64{64, 3}))+f.DataOffset+int64(f.Tensors[2].Offset)-1); err != nil {
			t.Fatal(err)
		}
		if g, gctx := c.open(path); g != nil {
			c.close(g, gctx)
			t.Errorf("ggml accepted a truncated file")
		}
	}
}

// open calls gguf_init_from_file with no_alloc false, so that ggml also reads
// every tensor's data into a ggml context, and returns both contexts (nil on failure).
func (c *ggufC) open(path string) (g, gctx unsafe.Pointer) {
	cpath := &[]byte(path + "\x00")[0]
	params := initParams{noAlloc: 0, ctx: unsafe.Pointer(&gctx)}
	c.initFromFile.Call(&g, &cpath, &params)
	return g, gctx
}

func (c *ggufC) close(g, gctx unsafe.Pointer) {
	c.free.Call(nil, &g)
	if gctx != nil {
		c.ggmlFree.Call(nil, &gctx)
	}
}

func checkWithGGML(t *testing.T, c *ggufC, path string, f *File) {
	t.Helper()
	g, gctx := c.open(path)
	if g == nil {
		t.Fatalf("gguf_init_from_file(%s) failed", path)
	}
	defer c.close(g, gctx)
	if got := callI64(c.nKV, &g); got != int64(len(f.KV)) {
		t.Errorf("ggml n_kv = %d; want %d", got, len(f.KV))
	}
	if got := callI64(c.nTensors, &g); got != int64(len(f.Tensors)) {
		t.Errorf("ggml n_tensors = %d; want %d", got, len(f.Tensors))
	}
	if got := callI64(c.dataOffset, &g); got != f.DataOffset {
		t.Errorf("ggml data offset = %d; want %d", got, f.DataOffset)
	}
	for _, kv := range f.KV {
		key := &[]byte(kv.Key + "\x00")[0]
		id := callI64(c.findKey, &g, &key)
		if id < 0 {
			t.Errorf("ggml does not find key %s", kv.Key)
			continue
		}
		if got := ValueType(callI64(c.kvType, &g, &id)); got != kv.Type {
			t.Errorf("%s: ggml type %v; want %v", kv.Key, got, kv.Type)
		}
		switch v := kv.Value.(type) {
		case string:
			var p unsafe.Pointer
			c.valStr.Call(&p, &g, &id)
			if want, _, _ := strings.Cut(v, "\x00"); cstr(p) != want {
				got := cstr(p)
				t.Errorf("%s: ggml string %q; want %q", kv.Key, got, want)
			}
		case uint32:
			if got := uint32(callI64(c.valU32, &g, &id)); got != v {
				t.Errorf("%s: ggml u32 %d; want %d", kv.Key, got, v)
			}
		case []string:
			if got := callI64(c.arrN, &g, &id); got != int64(len(v)) {
				t.Errorf("%s: ggml array length %d; want %d", kv.Key, got, len(v))
			}
		}
	}
	for i, tn := range f.Tensors {
		id := int64(i)
		var p unsafe.Pointer
		c.tensorName.Call(&p, &g, &id)
		off := uint64(callI64(c.tensorOffset, &g, &id))
		typ := GGMLType(callI64(c.tensorType, &g, &id))
		if name := cstr(p); name != tn.Name || off != tn.Offset || typ != tn.Type {
			t.Errorf("ggml tensor %d: %s %v at %d; want %s %v at %d", i, name, typ, off, tn.Name, tn.Type, tn.Offset)
		}
	}
}
