//go:build !unix

package readlimit

import (
	"fmt"
	"os"
)

// Open opens path for reading if it is a regular file, and otherwise fails
// with ErrNotRegular. Without O_NONBLOCK on this platform, the file is
// checked after it is opened; opening a FIFO may block.
func Open(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%v): synapse reads only regular files here", path, ErrNotRegular, st.Mode().Type())
	}
	return f, nil
}
