package readlimit

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestReadFile: a file within the bound is read whole; /dev/zero and a file
// one byte over are refused with ErrTooLarge.
func TestReadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("12345"), 0o644)
	if b, err := ReadFile(p, 5); err != nil || string(b) != "12345" {
		t.Errorf("within the bound: got %q, %v; want 12345", b, err)
	}
	if _, err := ReadFile(p, 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("one byte over: got %v; want ErrTooLarge", err)
	}
	if _, err := ReadFile("/dev/zero", 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("/dev/zero: got %v; want ErrTooLarge", err)
	}
}
