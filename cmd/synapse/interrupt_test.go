package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
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
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{})
			exited := make(chan error, 1)
			var log strings.Builder
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					log.WriteString(sc.Text() + "\n")
					if strings.HasPrefix(sc.Text(), "embedding with") {
						close(started)
					}
				}
				exited <- cmd.Wait()
			}()
			select {
			case <-started:
			case err := <-exited:
				t.Fatalf("synapse exited before it started: %v\n%s", err, log.String())
			case <-time.After(time.Minute):
				cmd.Process.Kill()
				t.Fatal("no start within a minute")
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Fatalf("still running 10 s after SIGINT with a %s producer on a FIFO\n%s", producer, log.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
				t.Errorf("exit code %d; want %d\n%s", code, exitInterrupted, log.String())
			}
		})
	}
}
