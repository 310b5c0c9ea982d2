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
// per line: its texts are read, and an endless line is refused with
// ErrTooLarge naming the file and line instead of filling memory, and a
// device (/dev/zero) as not a regular file.
func TestReadSampleBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sample.jsonl")
	if err := os.WriteFile(p, []byte("{\"text\": \"one\"}\n\n{\"text\": \"two\"}"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ReadSample(p, 0)
	if err != nil || strings.Join(s.Texts, ",") != "one,two" {
		t.Errorf("ReadSample: got %q, %v; want [one two]", s.Texts, err)
	}
	endless := filepath.Join(t.TempDir(), "endless.jsonl") // one line of zeros, far longer than a line may be
	if err := os.WriteFile(endless, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(endless, 1<<30); err != nil {
		t.Fatal(err)
	}
	_, err = ReadSample(endless, 0)
	if !errors.Is(err, readlimit.ErrTooLarge) || !strings.Contains(err.Error(), endless+":1") {
		t.Errorf("ReadSample(%s): got %v; want ErrTooLarge naming %[1]s:1", endless, err)
	}
	if _, err = ReadSample("/dev/zero", 0); !errors.Is(err, readlimit.ErrNotRegular) || !strings.Contains(err.Error(), "/dev/zero") {
		t.Errorf("ReadSample(/dev/zero): got %v; want ErrNotRegular naming /dev/zero", err)
	}
}
