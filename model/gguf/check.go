package gguf

import (
	"fmt"
	"strconv"
	"strings"
)

// blockSizes gives, for the ggml types whose storage this package knows, the
// values per block and the bytes per block (ggml's type traits).
var blockSizes = map[GGMLType][2]uint64{
	0: {1, 4}, 1: {1, 2}, 30: {1, 2}, // F32, F16, BF16
	2: {32, 18}, 3: {32, 20}, 6: {32, 22}, 7: {32, 24}, 8: {32, 34}, 9: {32, 36}, // Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1
	10: {256, 84}, 11: {256, 110}, 12: {256, 144}, 13: {256, 176}, 14: {256, 210}, 15: {256, 292}, // Q2_K … Q8_K
	20: {32, 18}, 23: {256, 136}, // IQ4_NL, IQ4_XS
	24: {1, 1}, 25: {1, 2}, 26: {1, 4}, 27: {1, 8}, 28: {1, 8}, // I8 I16 I32 I64 F64
}

// CheckTensors checks the tensor directory against the file's size: every
// tensor's offset is aligned and, for the types this package can size, its
// rows are whole blocks and its data lies inside the file. Tensors of other
// types must at least start inside the file.
func (f *File) CheckTensors(fileSize int64) error {
	align := uint64(DefaultAlignment)
	if a, ok := f.Uint("general.alignment"); ok && a > 0 {
		align = a
	}
	if f.DataOffset > fileSize {
		return fmt.Errorf("gguf: tensor data would start at byte %d of a %d-byte file", f.DataOffset, fileSize)
	}
	room := uint64(fileSize - f.DataOffset)
	for _, t := range f.Tensors {
		if t.Offset%align != 0 {
			return fmt.Errorf("gguf: tensor %q: offset %d is not a multiple of the alignment %d", t.Name, t.Offset, align)
		}
		if t.Offset > room {
			return fmt.Errorf("gguf: tensor %q starts %d bytes past the end of the file", t.Name, t.Offset-room)
		}
		bs, ok := blockSizes[t.Type]
		if !ok {
			continue
		}
		if len(t.Dims) == 0 || t.Dims[0]%bs[0] != 0 {
			return fmt.Errorf("gguf: tensor %q: dims %v are not whole %s blocks of %d values", t.Name, t.Dims, t.Type, bs[0])
		}
		n, ok := elements(t.Dims, room/bs[1]*bs[0])
		if !ok {
			return fmt.Errorf("gguf: tensor %q (%v, %s) does not fit in the file", t.Name, t.Dims, t.Type)
		}
		if end := t.Offset + n/bs[0]*bs[1]; end > room {
			return fmt.Errorf("gguf: tensor %q (%v, %s) ends %d bytes past the end of the file", t.Name, t.Dims, t.Type, end-room)
		}
	}
	return nil
}

// elements multiplies dims, reporting false as soon as the product exceeds
// limit (so a corrupt directory cannot overflow it).
func elements(dims []uint64, limit uint64) (uint64, bool) {
	n := uint64(1)
	for _, d := range dims {
		if d != 0 && n > limit/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// CheckBlocks checks ARCH.block_count against the tensors: llama.cpp sizes
// its per-layer arrays by it and aborts (not an error it can report) on a
// count beyond the blocks whose tensors the file holds, every time it
// loads the model. A count of 0, or more than the blocks blk.0 … blk.N-1
// present, is refused; a file without blk.* tensors (another layout) is
// left to llama.cpp.
func (f *File) CheckBlocks() error {
	arch := f.Architecture()
	n, ok := f.Uint(arch + ".block_count")
	if !ok {
		return nil
	}
	blocks := 0
	for _, t := range f.Tensors {
		rest, ok := strings.CutPrefix(t.Name, "blk.")
		if !ok {
			continue
		}
		i, _, _ := strings.Cut(rest, ".")
		if k, err := strconv.Atoi(i); err == nil && k >= blocks {
			blocks = k + 1
		}
	}
	switch {
	case blocks == 0:
		return nil
	case n == 0 || n > uint64(blocks):
		return fmt.Errorf("gguf: %s.block_count is %d, but the file holds the tensors of %d blocks (blk.0 … blk.%d)", arch, n, blocks, blocks-1)
	}
	return nil
}
