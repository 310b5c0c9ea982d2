package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// ErrNotGGUF reports a file that does not start with the GGUF magic.
var ErrNotGGUF = errors.New("gguf: not a GGUF file (bad magic)")

// Limits that keep a corrupt header from allocating without bound.
const (
	maxStringLen = 1 << 28
	maxArrayLen  = 1 << 28
	maxDims      = 8
)

// Open reads the header, metadata and tensor directory of the GGUF file at path.
// Tensor data is not read.
func Open(path string) (*File, error) {
	fh, err := readlimit.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	f, err := Read(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Read parses a GGUF header, metadata and tensor directory from r.
func Read(r io.Reader) (*File, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 1<<16)}
	magic := d.bytes(4)
	if d.err != nil {
		return nil, d.fail("header")
	}
	if string(magic) != Magic {
		return nil, ErrNotGGUF
	}
	f := &File{Version: d.u32(), index: map[string]int{}}
	if d.err == nil && (f.Version < 2 || f.Version > 3) {
		return nil, fmt.Errorf("gguf: unsupported version %d", f.Version)
	}
	nTensors, nKV := d.u64(), d.u64()
	if d.err != nil {
		return nil, d.fail("header")
	}
	if nKV > maxArrayLen || nTensors > maxArrayLen {
		return nil, fmt.Errorf("gguf: implausible counts (%d tensors, %d metadata entries)", nTensors, nKV)
	}
	for i := uint64(0); i < nKV; i++ {
		kv := d.kv()
		if d.err != nil {
			return nil, d.fail(fmt.Sprintf("metadata entry %d", i))
		}
		f.index[kv.Key] = len(f.KV)
		f.KV = append(f.KV, kv)
	}
	for i := uint64(0); i < nTensors; i++ {
		t := d.tensorInfo()
		if d.err != nil {
			return nil, d.fail(fmt.Sprintf("tensor %d", i))
		}
		f.Tensors = append(f.Tensors, t)
	}
	align := uint64(DefaultAlignment)
	if a, ok := f.Uint("general.alignment"); ok && a > 0 {
		align = a
	}
	f.DataOffset = int64((d.n + align - 1) / align * align)
	return f, nil
}

type decoder struct {
	r   *bufio.Reader
	n   uint64 // bytes consumed
	err error
}

func (d *decoder) fail(what string) error {
	if errors.Is(d.err, io.EOF) {
		d.err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("gguf: reading %s at byte %d: %w", what, d.n, d.err)
}

func (d *decoder) bytes(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	b := make([]byte, n)
	k, err := io.ReadFull(d.r, b)
	d.n += uint64(k)
	d.err = err
	return b
}

func (d *decoder) u8() uint8 {
	if b := d.bytes(1); d.err == nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if b := d.bytes(2); d.err == nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if b := d.bytes(4); d.err == nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if b := d.bytes(8); d.err == nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (d *decoder) str() string {
	n := d.u64()
	if d.err == nil && n > maxStringLen {
		d.err = fmt.Errorf("string length %d exceeds limit", n)
	}
	return string(d.bytes(n))
}

func (d *decoder) kv() KV {
	kv := KV{Key: d.str(), Type: ValueType(d.u32())}
	if d.err != nil {
		return kv
	}
	if kv.Type == TypeArray {
		kv.Elem = ValueType(d.u32())
		kv.Value = d.array(kv.Elem)
		return kv
	}
	kv.Value = d.scalar(kv.Type)
	return kv
}

func (d *decoder) scalar(t ValueType) any {
	switch t {
	case TypeUint8:
		return d.u8()
	case TypeInt8:
		return int8(d.u8())
	case TypeUint16:
		return d.u16()
	case TypeInt16:
		return int16(d.u16())
	case TypeUint32:
		return d.u32()
	case TypeInt32:
		return int32(d.u32())
	case TypeFloat32:
		return math.Float32frombits(d.u32())
	case TypeBool:
		return d.u8() != 0
	case TypeString:
		return d.str()
	case TypeUint64:
		return d.u64()
	case TypeInt64:
		return int64(d.u64())
	case TypeFloat64:
		return math.Float64frombits(d.u64())
	}
	if d.err == nil {
		d.err = fmt.Errorf("unknown value type %d", uint32(t))
	}
	return nil
}

func (d *decoder) array(elem ValueType) any {
	n := d.u64()
	if d.err == nil && n > maxArrayLen {
		d.err = fmt.Errorf("array length %d exceeds limit", n)
	}
	if d.err != nil {
		return nil
	}
	switch elem {
	case TypeString:
		return readArray(d, n, (*decoder).str)
	case TypeFloat32:
		return readArray(d, n, func(d *decoder) float32 { return math.Float32frombits(d.u32()) })
	case TypeInt32:
		return readArray(d, n, func(d *decoder) int32 { return int32(d.u32()) })
	case TypeUint32:
		return readArray(d, n, (*decoder).u32)
	case TypeUint8:
		return readArray(d, n, (*decoder).u8)
	case TypeInt8:
		return readArray(d, n, func(d *decoder) int8 { return int8(d.u8()) })
	case TypeBool:
		return readArray(d, n, func(d *decoder) bool { return d.u8() != 0 })
	case TypeUint64:
		return readArray(d, n, (*decoder).u64)
	case TypeInt64:
		return readArray(d, n, func(d *decoder) int64 { return int64(d.u64()) })
	}
	out := make([]any, 0, min(n, 1024))
	for i := uint64(0); i < n && d.err == nil; i++ {
		if elem == TypeArray {
			out = append(out, d.array(ValueType(d.u32())))
			continue
		}
		out = append(out, d.scalar(elem))
	}
	return out
}

// readArray reads n elements, growing the slice as data arrives so that a
// corrupt count cannot allocate more than the file holds.
func readArray[T any](d *decoder, n uint64, next func(*decoder) T) []T {
	out := make([]T, 0, min(n, 1<<16))
	for i := uint64(0); i < n && d.err == nil; i++ {
		out = append(out, next(d))
	}
	return out
}

func (d *decoder) tensorInfo() TensorInfo {
	t := TensorInfo{Name: d.str()}
	nd := d.u32()
	if d.err == nil && nd > maxDims {
		d.err = fmt.Errorf("tensor %q has %d dimensions", t.Name, nd)
	}
	for i := uint32(0); i < nd && d.err == nil; i++ {
		t.Dims = append(t.Dims, d.u64())
	}
	t.Type = GGMLType(d.u32())
	t.Offset = d.u64()
	return t
}
