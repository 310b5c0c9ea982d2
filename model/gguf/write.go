package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// ErrInvalidModel reports a Writer given metadata or tensors it cannot write.
var ErrInvalidModel = errors.New("gguf: invalid model")

// Tensor is a tensor to write. Dims are in ggml order: Dims[0] is the length
// of a row (the fastest-varying index). Its values come either from Values
// (all elements, rows one after another) or, row by row, from Fill, which is
// called once per row in order with dst of length Dims[0] to fill.
type Tensor struct {
	Name   string
	Type   GGMLType
	Dims   []uint64
	Values []float32
	Fill   func(row int, dst []float32)
}

// rows is the number of rows of Dims[0] elements.
func (t *Tensor) rows() uint64 {
	n := uint64(1)
	for _, d := range t.Dims[1:] {
		n *= d
	}
	return n
}

// Writer assembles a GGUF version 3 file: metadata entries in the order they
// are set and tensors in the order they are added. The zero value is not
// usable; call NewWriter.
type Writer struct {
	kv      []KV
	index   map[string]int
	tensors []Tensor
	names   map[string]bool
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer {
	return &Writer{index: map[string]int{}, names: map[string]bool{}}
}

// Set sets key to v, inferring the GGUF type from v's Go type: uint8 … float64,
// bool and string for scalars; slices of those for arrays. Setting a key again
// replaces its value in place. Use SetKV for an array of unusual element type.
func (w *Writer) Set(key string, v any) error {
	t, elem, err := typeOf(v)
	if err != nil {
		return fmt.Errorf("gguf: set %q: %w", key, err)
	}
	return w.SetKV(KV{Key: key, Type: t, Elem: elem, Value: v})
}

// SetKV sets an entry with explicit types, such as one read from another file
// with Open. Arrays of u16, i16 and f64 may be given as []any, as Read returns them.
func (w *Writer) SetKV(kv KV) error {
	if kv.Key == "" {
		return fmt.Errorf("%w: empty metadata key", ErrInvalidModel)
	}
	if err := checkValue(kv); err != nil {
		return fmt.Errorf("gguf: set %q: %w", kv.Key, err)
	}
	if kv.Key == "general.alignment" {
		if a, ok := kv.Value.(uint32); !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("%w: general.alignment must be a u32 power of two, got %v (%v)", ErrInvalidModel, kv.Value, kv.Type)
		}
	}
	if i, ok := w.index[kv.Key]; ok {
		w.kv[i] = kv
		return nil
	}
	w.index[kv.Key] = len(w.kv)
	w.kv = append(w.kv, kv)
	return nil
}

// Delete removes key if it is set.
func (w *Writer) Delete(key string) {
	i, ok := w.index[key]
	if !ok {
		return
	}
	w.kv = append(w.kv[:i], w.kv[i+1:]...)
	delete(w.index, key)
	for j := i; j < len(w.kv); j++ {
		w.index[w.kv[j].Key] = j
	}
}

// KV returns the entries set so far, in order.
func (w *Writer) KV() []KV { return w.kv }

// AddTensor appends a tensor. Its values are read when the file is written.
func (w *Writer) AddTensor(t Tensor) error {
	if err := checkTensor(&t); err != nil {
		return err
	}
	if w.names[t.Name] {
		return fmt.Errorf("%w: duplicate tensor %q", ErrInvalidModel, t.Name)
	}
	w.names[t.Name] = true
	w.tensors = append(w.tensors, t)
	return nil
}

func checkTensor(t *Tensor) error {
	if t.Name == "" || len(t.Dims) == 0 || len(t.Dims) > 4 {
		return fmt.Errorf("%w: tensor %q: need a name and 1 to 4 dimensions, got %v", ErrInvalidModel, t.Name, t.Dims)
	}
	n := uint64(1)
	for _, d := range t.Dims {
		if d == 0 {
			return fmt.Errorf("%w: tensor %q has a zero dimension %v", ErrInvalidModel, t.Name, t.Dims)
		}
		n *= d
	}
	switch t.Type {
	case GGMLTypeF32, GGMLTypeF16:
	case GGMLTypeQ8_0:
		if t.Dims[0]%q8Block != 0 {
			return fmt.Errorf("%w: tensor %q: Q8_0 row length %d is not a multiple of %d", ErrInvalidModel, t.Name, t.Dims[0], q8Block)
		}
	default:
		return fmt.Errorf("%w: tensor %q: cannot write type %v", ErrInvalidModel, t.Name, t.Type)
	}
	switch {
	case (t.Values == nil) == (t.Fill == nil):
		return fmt.Errorf("%w: tensor %q: set exactly one of Values and Fill", ErrInvalidModel, t.Name)
	case t.Values != nil && uint64(len(t.Values)) != n:
		return fmt.Errorf("%w: tensor %q: %d values for dims %v (%d elements)", ErrInvalidModel, t.Name, len(t.Values), t.Dims, n)
	}
	return nil
}

// alignment is general.alignment or DefaultAlignment.
func (w *Writer) alignment() uint64 {
	if i, ok := w.index["general.alignment"]; ok {
		return uint64(w.kv[i].Value.(uint32))
	}
	return DefaultAlignment
}

// WriteTo writes the whole file to out and returns the bytes written.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	e := &encoder{w: out}
	e.raw([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kv)))
	for _, kv := range w.kv {
		e.str(kv.Key)
		e.u32(uint32(kv.Type))
		e.value(kv)
	}
	align := w.alignment()
	var off uint64
	for _, t := range w.tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(off)
		off = pad(off+TensorBytes(t.Type, t.Dims), align)
	}
	e.zeros(pad(e.n, align) - e.n)
	for i := range w.tensors {
		t := &w.tensors[i]
		start := e.n
		e.tensorData(t)
		if e.err == nil && e.n-start != TensorBytes(t.Type, t.Dims) {
			return int64(e.n), fmt.Errorf("gguf: tensor %q: wrote %d bytes, want %d", t.Name, e.n-start, TensorBytes(t.Type, t.Dims))
		}
		e.zeros(pad(e.n, align) - e.n)
	}
	if e.err != nil {
		return int64(e.n), fmt.Errorf("gguf: write: %w", e.err)
	}
	return int64(e.n), nil
}

// WriteFile writes the file to path (mode 0644) through a buffer, via a
// temporary file in the same directory that is renamed into place once complete.
func (w *Writer) WriteFile(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if _, err = w.WriteTo(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

// TensorBytes is the size in bytes of a tensor of type t and dims, or 0 for a
// type this package cannot size.
func TensorBytes(t GGMLType, dims []uint64) uint64 {
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	switch t {
	case GGMLTypeF32:
		return 4 * n
	case GGMLTypeF16:
		return 2 * n
	case GGMLTypeQ8_0:
		return n / q8Block * q8BlockBytes
	}
	return 0
}

func pad(n, align uint64) uint64 { return (n + align - 1) / align * align }

// encoder writes little-endian values and remembers the first error.
type encoder struct {
	w   io.Writer
	n   uint64
	err error
	buf [8]byte
}

func (e *encoder) raw(b []byte) {
	if e.err != nil {
		return
	}
	k, err := e.w.Write(b)
	e.n += uint64(k)
	e.err = err
}

func (e *encoder) zeros(n uint64) {
	var z [64]byte
	for n > 0 && e.err == nil {
		k := min(n, uint64(len(z)))
		e.raw(z[:k])
		n -= k
	}
}

func (e *encoder) u8(v uint8) { e.buf[0] = v; e.raw(e.buf[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.raw(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.raw(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.raw(e.buf[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		k, err := io.WriteString(e.w, s)
		e.n += uint64(k)
		e.err = err
	}
}

func (e *encoder) bool(b bool) {
	if b {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// tensorData encodes t's values as its type.
func (e *encoder) tensorData(t *Tensor) {
	rowLen := int(t.Dims[0])
	row := make([]float32, rowLen)
	out := make([]byte, TensorBytes(t.Type, t.Dims[:1]))
	for r := 0; r < int(t.rows()) && e.err == nil; r++ {
		src := row
		if t.Values != nil {
			src = t.Values[r*rowLen : (r+1)*rowLen]
		} else {
			t.Fill(r, row)
		}
		switch t.Type {
		case GGMLTypeF32:
			for i, v := range src {
				binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
			}
		case GGMLTypeF16:
			for i, v := range src {
				binary.LittleEndian.PutUint16(out[2*i:], F32ToF16(v))
			}
		case GGMLTypeQ8_0:
			encodeQ8_0(out, src)
		}
		e.raw(out)
	}
}
