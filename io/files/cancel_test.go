package files

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCancelableReader(t *testing.T) {
	got, err := io.ReadAll(CancelableReader(context.Background(), strings.NewReader("all of it")))
	if err != nil || string(got) != "all of it" {
		t.Errorf("ReadAll = %q, %v; want the input and no error", got, err)
	}

	pr, pw := io.Pipe() // a producer that never writes
	defer pw.Close()
	silent := &enteredReader{r: pr, entered: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r := CancelableReader(ctx, silent)
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 8))
		done <- err
	}()
	select {
	case <-silent.entered: // the reader is now blocked on the silent producer
	case <-time.After(10 * time.Second):
		t.Fatal("CancelableReader did not read its input within 10 s")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Read after cancel = %v; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read still blocked 10 s after cancel")
	}
}

// enteredReader closes entered when its first Read begins.
type enteredReader struct {
	r       io.Reader
	entered chan struct{}
	once    sync.Once
}

func (e *enteredReader) Read(p []byte) (int, error) {
	e.once.Do(func() { close(e.entered) })
	return e.r.Read(p)
}
