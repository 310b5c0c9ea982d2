package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// TestModelDirFIFO: an ONNX model directory whose tokenizer.json is a FIFO
// with no writer makes embed -m, models add and inspect exit 2 naming the
// file, without waiting for a writer (before the fix each hung in open(2),
// deaf to SIGTERM). The time limit only catches a hang.
func TestModelDirFIFO(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if _, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: onnxtest.Tiny()}); err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(dir, "tokenizer.json")
	if err := os.Remove(tok); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(tok, 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(in, []byte(`{"id":"a","text":"hello"}`+"\n"), 0o644)
	env := []string{"SYNAPSE_MODELS=" + filepath.Join(t.TempDir(), "models"), "SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	tests := []struct {
		name string
		args []string
	}{
		{"embed -m", []string{"embed", in, "-m", dir, "-o", filepath.Join(t.TempDir(), "v.arrow"), "-q"}},
		{"models add", []string{"models", "add", dir, "--name", "fifo"}},
		{"inspect", []string{"inspect", dir}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runSynapseWithin(t, time.Minute, env, tt.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tok) || !strings.Contains(r.stderr, "not a regular file") {
				t.Errorf("exit %d, stderr %q; want exit %d naming %s as not a regular file", r.code, r.stderr, exitUsage, tok)
			}
		})
	}
}
