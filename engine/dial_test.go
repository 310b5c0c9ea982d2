package engine

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
)

// listenEnv selects TestHelperListener's behaviour: listen at this path.
const listenEnv = "SYNAPSE_TEST_LISTEN"

// TestHelperListener is not a test: run as a child with SYNAPSE_TEST_LISTEN
// set, it plays a socket planted where a worker dials. It listens, prints
// "ready", accepts one connection, reads what arrives until the end of the
// stream or two seconds of silence, and prints "got N bytes".
func TestHelperListener(t *testing.T) {
	path := os.Getenv(listenEnv)
	if path == "" {
		return
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	c, err := ln.Accept()
	if err != nil {
		fmt.Println("accept:", err)
		os.Exit(1)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _ := io.Copy(io.Discard, c)
	fmt.Printf("got %d bytes\n", n)
	os.Exit(0)
}

// TestWorkerRefusesPlantedListener: a worker that dials a socket another
// process listens on — another user's, or one of ours that is not the
// worker's parent — closes the connection without sending HELLO (its
// nonce) and exits non-zero, naming why.
func TestWorkerRefusesPlantedListener(t *testing.T) {
	bin := testenv.Binary(t)
	for _, tc := range []struct {
		name     string
		stranger bool
		want     string
	}{
		{"same user, not the parent", false, "not to the parent process"},
		{"another user", true, fmt.Sprintf("belongs to uid %d", testenv.StrangerUID)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exe, attr := os.Args[0], &syscall.SysProcAttr{}
			if tc.stranger {
				attr.Credential = testenv.Stranger(t)
				exe = testenv.StrangerExecutable(t)
			}
			dir, err := os.MkdirTemp("", "peer")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			os.Chmod(dir, 0o777) // the stranger listens here
			sock := filepath.Join(dir, "w.sock")
			got := startListener(t, exe, sock, attr)
			worker := exec.Command(bin, "worker", "--socket", sock, "--nonce", "nonce-42")
			var stderr strings.Builder
			worker.Stderr = &stderr
			werr := worker.Run()
			line, _ := got.ReadString('\n')
			if werr == nil || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("worker: got %v, stderr %q; want a failure naming %q", werr, stderr.String(), tc.want)
			}
			if strings.TrimSpace(line) != "got 0 bytes" {
				t.Errorf("planted listener: %q; want \"got 0 bytes\" (the worker must send nothing, its nonce least of all)", line)
			}
		})
	}
}

// startListener starts TestHelperListener at sock and waits until it
// listens; the returned reader has the rest of its output.
func startListener(t *testing.T, exe, sock string, attr *syscall.SysProcAttr) *bufio.Reader {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^TestHelperListener$")
	cmd.Env = append(os.Environ(), listenEnv+"="+sock)
	cmd.SysProcAttr = attr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	br := bufio.NewReader(out)
	if line, err := br.ReadString('\n'); strings.TrimSpace(line) != "ready" {
		t.Fatalf("listener: %q, %v; want ready", line, err)
	}
	return br
}
