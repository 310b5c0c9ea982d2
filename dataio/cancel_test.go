package dataio

import (
	"context"
	"errors"
	"io"
	"strings"
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
	ctx, cancel := context.WithCancel(context.Background())
	r := CancelableReader(ctx, pr)
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
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
