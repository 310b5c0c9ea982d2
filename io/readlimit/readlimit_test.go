package readlimit

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestReadLine: lines within the bound are read whole, the last one
// without its newline with io.EOF; an endless line (/dev/zero) and a line
// one byte over are refused with ErrTooLarge.
func TestReadLine(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader("ab\n"+strings.Repeat("x", 40)+"\nend"), 16)
	for _, want := range []string{"ab\n", strings.Repeat("x", 40) + "\n", "end"} {
		got, err := ReadLine(r, "f", 41)
		if string(got) != want || (err != nil) != (want == "end") {
			t.Errorf("ReadLine: got %q, %v; want %q", got, err, want)
		}
	}
	r = bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", 41)+"\n"), 16)
	if _, err := ReadLine(r, "f", 41); !errors.Is(err, ErrTooLarge) {
		t.Errorf("one byte over: got %v; want ErrTooLarge", err)
	}
	f, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := ReadLine(bufio.NewReader(f), "/dev/zero", 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("/dev/zero: got %v; want ErrTooLarge", err)
	}
}
