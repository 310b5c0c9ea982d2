package files

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/synapse-embed/synapse/io/objstore"
)

// InputGuard describes each input file by its size and modification time,
// or by why it cannot be read, for [WriterOptions.ResumeGuard]: a resume
// over an input that was rewritten, grew, shrank, or was unreadable in the
// interrupted run and readable now (or the other way round) would number
// its documents differently and is refused. Standard input ("-") cannot be
// checked and is recorded as such.
func InputGuard(files []string) map[string]string {
	g := make(map[string]string, len(files))
	for i, name := range files {
		key := fmt.Sprintf("input %d %s", i+1, name)
		if name == "-" {
			g[key] = "standard input"
			continue
		}
		g[key] = describeInput(name)
	}
	return g
}

func describeInput(name string) string {
	if objstore.IsURL(name) {
		info, err := objstore.Stat(context.Background(), name)
		if err != nil {
			return "unreadable: " + err.Error()
		}
		return fmt.Sprintf("%d bytes, etag %s, modified %s", info.Size, info.ETag, info.ModTime.UTC().Format(time.RFC3339Nano))
	}
	st, err := os.Stat(name)
	if err != nil {
		return "unreadable: " + unwrapPath(err).Error()
	}
	if !st.Mode().IsRegular() { // never opened here: a pipe is read once
		return "not a regular file (" + fileKind(st.Mode()) + "): not checked"
	}
	if err := syscall.Access(name, 4 /* R_OK */); err != nil {
		return "unreadable: " + err.Error()
	}
	return fmt.Sprintf("%d bytes, modified %s", st.Size(), st.ModTime().UTC().Format(time.RFC3339Nano))
}

// unwrapPath drops the *PathError's path, which the guard's key already has.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a pipe"
	case m&os.ModeDir != 0:
		return "a directory"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}
