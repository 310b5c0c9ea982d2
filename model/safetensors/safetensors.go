// Package safetensors reads tensors from a .safetensors file, the format
// Hugging Face libraries save weights in (sentence-transformers' Dense
// modules among them).
//
// The format:
//
//	bytes 0–7    N: u64, little-endian, the header's length
//	bytes 8–8+N  the header: a JSON object, one member per tensor,
//	             {"dtype":"F32","shape":[256,384],"data_offsets":[begin,end]},
//	             and an optional "__metadata__" member of strings
//	then         the tensors' bytes, offsets relative to byte 8+N,
//	             row-major, little-endian
//
// Read checks every tensor's offsets against the file and its shape against
// its byte length, and that the tensors tile the data section (no overlap,
// no bytes between or after them), before it converts anything; F32, F16 and BF16 tensors
// convert to float32, other dtypes are refused by name.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// MaxHeader is the longest header Read accepts (the format's own limit).
const MaxHeader = 100 << 20

// ErrFormat marks a file that is not a well-formed safetensors file.
var ErrFormat = errors.New("not a valid safetensors file")

// Tensor is one tensor's header entry.
type Tensor struct {
	DType   string   `json:"dtype"`
	Shape   []int64  `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// File is an open safetensors file.
type File struct {
	path    string
	fh      *os.File
	data    int64 // offset of the data section
	size    int64 // file size
	Tensors map[string]Tensor
}

// Open reads path's header and checks every entry against the file.
func Open(path string) (*File, error) {
	fh, err := readlimit.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := readHeader(path, fh)
	if err != nil {
		fh.Close()
		return nil, err
	}
	return f, nil
}

func readHeader(path string, fh *os.File) (*File, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("safetensors: %s: %w: %s", path, ErrFormat, fmt.Sprintf(format, args...))
	}
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var lenb [8]byte
	if _, err := io.ReadFull(fh, lenb[:]); err != nil {
		return nil, bad("%d bytes: no header length", st.Size())
	}
	n := binary.LittleEndian.Uint64(lenb[:])
	if n > MaxHeader || int64(n) > st.Size()-8 {
		return nil, bad("header length %d in a file of %d bytes", n, st.Size())
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(fh, hdr); err != nil {
		return nil, bad("header: %v", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, bad("header: %v", err)
	}
	f := &File{path: path, fh: fh, data: 8 + int64(n), size: st.Size(), Tensors: map[string]Tensor{}}
	for name, v := range raw {
		if name == "__metadata__" {
			continue
		}
		var t Tensor
		if err := json.Unmarshal(v, &t); err != nil {
			return nil, bad("tensor %s: %v", name, err)
		}
		if err := f.check(name, t); err != nil {
			return nil, bad("%v", err)
		}
		f.Tensors[name] = t
	}
	if err := f.checkLayout(); err != nil {
		return nil, bad("%v", err)
	}
	return f, nil
}

// checkLayout checks that the tensors tile the data section as the format
// requires (and its reference reader checks): sorted by offset, each
// begins where the one before ends, and the last ends at the end of the
// file. Two tensors sharing bytes would make an edit of one change the
// other; bytes no tensor owns are something else hidden in the weights.
func (f *File) checkLayout() error {
	names := f.Names()
	sort.SliceStable(names, func(i, j int) bool {
		a, b := f.Tensors[names[i]].Offsets, f.Tensors[names[j]].Offsets
		return a[0] < b[0] || a[0] == b[0] && a[1] < b[1]
	})
	var end int64
	prev := ""
	for _, n := range names {
		o := f.Tensors[n].Offsets
		switch {
		case o[0] < end:
			return fmt.Errorf("tensors %s [%d,%d] and %s [%d,%d] overlap", prev, f.Tensors[prev].Offsets[0], end, n, o[0], o[1])
		case o[0] > end:
			return fmt.Errorf("data bytes [%d,%d) belong to no tensor (before %s)", end, o[0], n)
		}
		end, prev = o[1], n
	}
	if data := f.size - f.data; end != data {
		return fmt.Errorf("data bytes [%d,%d) at the end of the file belong to no tensor", end, data)
	}
	return nil
}

// elemSize is the bytes per element of the dtypes Read converts (0: others).
var elemSize = map[string]int64{"F32": 4, "F16": 2, "BF16": 2}

// byteSize is the bytes per element of every dtype the format names.
var byteSize = map[string]int64{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
	"U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1,
}

func (f *File) check(name string, t Tensor) error {
	size, ok := byteSize[t.DType]
	if !ok {
		return fmt.Errorf("tensor %s: dtype %q", name, t.DType)
	}
	count := int64(1)
	for _, d := range t.Shape {
		if d < 0 || d > math.MaxInt32 || count > math.MaxInt64/max(d, 1)/8 {
			return fmt.Errorf("tensor %s: shape %v", name, t.Shape)
		}
		count *= d
	}
	b, e := t.Offsets[0], t.Offsets[1]
	if b < 0 || e < b || e > f.size-f.data {
		return fmt.Errorf("tensor %s: data offsets [%d,%d] outside the %d data bytes", name, b, e, f.size-f.data)
	}
	if e-b != count*size {
		return fmt.Errorf("tensor %s: %d bytes for shape %v of %s (want %d)", name, e-b, t.Shape, t.DType, count*size)
	}
	return nil
}

// Names are the file's tensor names, sorted.
func (f *File) Names() []string {
	out := make([]string, 0, len(f.Tensors))
	for n := range f.Tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Float32 reads tensor name as float32 values (F32, F16 or BF16), row-major.
func (f *File) Float32(name string) ([]float32, []int64, error) {
	t, ok := f.Tensors[name]
	if !ok {
		return nil, nil, fmt.Errorf("safetensors: %s: no tensor %s (tensors: %v)", f.path, name, f.Names())
	}
	size := elemSize[t.DType]
	if size == 0 {
		return nil, nil, fmt.Errorf("safetensors: %s: tensor %s is %s; synapse reads F32, F16 and BF16", f.path, name, t.DType)
	}
	b := make([]byte, t.Offsets[1]-t.Offsets[0])
	if _, err := f.fh.ReadAt(b, f.data+t.Offsets[0]); err != nil {
		return nil, nil, fmt.Errorf("safetensors: %s: tensor %s: %w", f.path, name, err)
	}
	out := make([]float32, int64(len(b))/size)
	for i := range out {
		switch t.DType {
		case "F32":
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case "F16":
			out[i] = halfToFloat(binary.LittleEndian.Uint16(b[2*i:]))
		case "BF16":
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
	}
	return out, t.Shape, nil
}

// Close closes the file.
func (f *File) Close() error { return f.fh.Close() }

// halfToFloat converts an IEEE 754 binary16 value to float32.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: value frac × 2^-24
		v := float32(frac) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}

// Write writes float32 tensors as an F32 safetensors file (for tests and
// tools): names map to values with their shapes.
func Write(path string, tensors map[string][]float32, shapes map[string][]int64) error {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr := map[string]Tensor{}
	var off int64
	for _, n := range names {
		sz := int64(4 * len(tensors[n]))
		hdr[n] = Tensor{DType: "F32", Shape: shapes[n], Offsets: [2]int64{off, off + sz}}
		off += sz
	}
	hb, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
	out = append(out, hb...)
	for _, n := range names {
		for _, v := range tensors[n] {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	return os.WriteFile(path, out, 0o644)
}
