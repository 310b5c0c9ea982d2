package cli

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestEmbedFIFOInterrupt: Ctrl-C stops a run whose input is a named pipe
// at once, whether the producer opened it and went silent or never opened
// it at all (the open itself blocks).
func TestEmbedFIFOInterrupt(t *testing.T) {
	for _, producer := range []string{"silent", "absent"} {
		t.Run(producer, func(t *testing.T) {
			dir := t.TempDir()
			fifo := filepath.Join(dir, "in.jsonl")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			if producer == "silent" {
				// A writer that sends one line and keeps the pipe open.
				go func() {
					w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
					if err != nil {
						return
					}
					w.WriteString(`{"id":"a","text":"hello world"}` + "\n")
					t.Cleanup(func() { w.Close() })
				}()
			}
			cmd := synapseCmd(context.Background(), t, nil, "embed", fifo, "-m", tinyModel(t), "-o", filepath.Join(dir, "out.arrow"),
				"--workers", "1", "--threads", "1")
			startEmbedding(t, cmd).interrupt(t, syscall.SIGINT, 10*time.Second, "with a "+producer+" producer on a FIFO")
		})
	}
}
