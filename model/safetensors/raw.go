package safetensors

import (
	"fmt"
)

// Raw reads tensor name's bytes as stored (little-endian, row-major), of
// any dtype, with its header entry; callers convert them (a static
// model's I8 embeddings, its I64 token mapping).
func (f *File) Raw(name string) ([]byte, Tensor, error) {
	t, ok := f.Tensors[name]
	if !ok {
		return nil, t, fmt.Errorf("safetensors: %s: no tensor %s (tensors: %v)", f.path, name, f.Names())
	}
	b := make([]byte, t.Offsets[1]-t.Offsets[0])
	if _, err := f.fh.ReadAt(b, f.data+t.Offsets[0]); err != nil {
		return nil, t, fmt.Errorf("safetensors: %s: tensor %s: %w", f.path, name, err)
	}
	return b, t, nil
}
