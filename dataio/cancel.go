package dataio

import (
	"context"
	"io"
)

// CancelableReader reads r through a pipe that fails with ctx's error once
// ctx is done, so that a reader blocked on a producer that never writes (a
// pipe on standard input) does not hold up a cancelled run. A goroutine
// copies r into the pipe; if r itself blocks it stays blocked until r
// returns (for standard input: until the process exits).
func CancelableReader(ctx context.Context, r io.Reader) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, r)
		pw.CloseWithError(err) // nil: io.EOF for the reader
	}()
	go func() {
		<-ctx.Done()
		pw.CloseWithError(ctx.Err()) // reads fail with it; the copier's later close is ignored
	}()
	return pr
}
