//go:build !unix

package onnx

import "os"

// mapFile reads the file at path (no mmap on this platform).
func mapFile(path string) (b []byte, release func(), err error) {
	b, err = os.ReadFile(path)
	return b, func() {}, err
}
