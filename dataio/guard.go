package dataio

import (
	"fmt"
	"os"
	"time"
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
	f, err := os.Open(name)
	if err != nil {
		return "unreadable: " + unwrapPath(err).Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "unreadable: " + unwrapPath(err).Error()
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
