//go:build !unix

package onnx

import (
	"io"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// mapFile reads the file at path (no mmap on this platform).
func mapFile(path string) (b []byte, release func(), err error) {
	f, err := readlimit.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err = io.ReadAll(f)
	return b, func() {}, err
}
