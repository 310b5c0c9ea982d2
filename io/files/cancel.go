package files

import (
	"context"
	"io"
	"os"
	"syscall"
	"time"
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

// openInput opens an input file so that ctx can stop both the open and
// the reads: opening a FIFO blocks until a writer comes, and reading one
// blocks while the writer is silent. A FIFO is opened in a goroutine that a
// cancellation releases (by opening the FIFO's other end, which completes
// the open); its reads fail with os.ErrDeadlineExceeded once ctx is done
// (a FIFO is a pollable file, so a read deadline interrupts a blocked read).
// stop releases what watches ctx; call it when done with the file.
func OpenInput(ctx context.Context, name string) (f *os.File, stop func(), err error) {
	st, err := os.Stat(name)
	if err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		f, err := os.Open(name)
		return f, func() {}, err
	}
	done := make(chan opened, 1)
	go func() {
		f, err := os.Open(name)
		done <- opened{f, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			return nil, nil, o.err
		}
		f = o.f
	case <-ctx.Done():
		releaseOpen(name, done)
		return nil, nil, ctx.Err()
	}
	unwatch := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Now()) })
	return f, func() { unwatch() }, nil
}

// releaseOpen completes a FIFO open blocked in another goroutine by opening
// the FIFO's writing end, and closes both once the open has returned. The
// writer open fails (ENXIO) until the reader's open is under way, so it is
// tried again until the open returns.
func releaseOpen(name string, done <-chan opened) {
	for {
		w, _ := os.OpenFile(name, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		select {
		case o := <-done:
			if o.f != nil {
				o.f.Close()
			}
			if w != nil {
				w.Close()
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
		if w != nil {
			w.Close()
		}
	}
}

// opened is the outcome of a FIFO open.
type opened struct {
	f   *os.File
	err error
}
