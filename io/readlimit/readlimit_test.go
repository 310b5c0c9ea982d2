package readlimit

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadFile: a file within the bound is read whole; a file one byte over
// is refused with ErrTooLarge, /dev/zero with ErrNotRegular.
func TestReadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("12345"), 0o644)
	if b, err := ReadFile(p, 5); err != nil || string(b) != "12345" {
		t.Errorf("within the bound: got %q, %v; want 12345", b, err)
	}
	if _, err := ReadFile(p, 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("one byte over: got %v; want ErrTooLarge", err)
	}
	if _, err := ReadFile("/dev/zero", 1<<20); !errors.Is(err, ErrNotRegular) {
		t.Errorf("/dev/zero: got %v; want ErrNotRegular", err)
	}
}

// TestOpenRegular: Open refuses what is not a regular file — a FIFO with no
// writer (without blocking: this test would hang otherwise), a device, a
// directory, a link to a FIFO — naming it and its type, and opens a regular
// file (also through a link) in blocking mode.
func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(dir, "reg")
	os.WriteFile(reg, []byte("x"), 0o644)
	os.Symlink(fifo, filepath.Join(dir, "to-fifo"))
	os.Symlink(reg, filepath.Join(dir, "to-reg"))
	tests := []struct {
		path string
		want string // in the error; "" for a file Open opens
	}{
		{fifo, "a named pipe"},
		{filepath.Join(dir, "to-fifo"), "a named pipe"},
		{"/dev/null", "a character device"},
		{dir, "a directory"},
		{reg, ""},
		{filepath.Join(dir, "to-reg"), ""},
	}
	for _, tt := range tests {
		f, err := Open(tt.path)
		if tt.want == "" {
			if err != nil {
				t.Errorf("Open(%s): got %v; want the file", tt.path, err)
				continue
			}
			b, err := io.ReadAll(f)
			f.Close()
			if err != nil || string(b) != "x" {
				t.Errorf("read %s: got %q, %v; want \"x\"", tt.path, b, err)
			}
			continue
		}
		if err == nil {
			f.Close()
		}
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%s): got %v; want ErrNotRegular naming it and %q", tt.path, err, tt.want)
		}
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

// TestUnmarshalJSONQuotesNothing: a file that is not JSON (a link to
// someone's secrets, say) is refused saying where, quoting none of it;
// type errors and good JSON pass through.
func TestUnmarshalJSONQuotesNothing(t *testing.T) {
	var v map[string]any
	err := UnmarshalJSON([]byte("root:x:0:0:secret\n"), &v)
	if err == nil || !strings.Contains(err.Error(), "not valid JSON (at byte 1 of 18)") || strings.Contains(err.Error(), "'r'") {
		t.Errorf("got %v; want a syntax error naming the offset and quoting nothing", err)
	}
	if err := UnmarshalJSON([]byte(`{"a": 1}`), &v); err != nil || v["a"] != 1.0 {
		t.Errorf("good JSON: %v, %v", v, err)
	}
	var n struct{ A int }
	if err := UnmarshalJSON([]byte(`{"A": "x"}`), &n); err == nil {
		t.Error("a type error was dropped")
	}
}
