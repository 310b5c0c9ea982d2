//go:build unix

package onnx

import (
	"os"
	"syscall"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// mapFile maps the file at path read-only; release unmaps it.
func mapFile(path string) (b []byte, release func(), err error) {
	f, err := readlimit.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() == 0 {
		return nil, func() {}, nil
	}
	b, err = syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	return b, func() { syscall.Munmap(b) }, nil
}
