package ingest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// TestReadSampleBounded: a --sample file is read line by line with a bound
// per line: its texts are read, and an endless line (/dev/zero) is refused
// with ErrTooLarge naming the file and line instead of filling memory.
func TestReadSampleBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sample.jsonl")
	if err := os.WriteFile(p, []byte("{\"text\": \"one\"}\n\n{\"text\": \"two\"}"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ReadSample(p, 0)
	if err != nil || strings.Join(s.Texts, ",") != "one,two" {
		t.Errorf("ReadSample: got %q, %v; want [one two]", s.Texts, err)
	}
	_, err = ReadSample("/dev/zero", 0)
	if !errors.Is(err, readlimit.ErrTooLarge) || !strings.Contains(err.Error(), "/dev/zero:1") {
		t.Errorf("ReadSample(/dev/zero): got %v; want ErrTooLarge naming /dev/zero:1", err)
	}
}
