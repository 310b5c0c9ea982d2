package libpath

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testLib is a library whose directories hold a file "lib.so" with the
// release in it.
var testLib = Lib{
	Name: "testlib", Flag: "--test-lib", Env: "SYNAPSE_TEST_LIB", Dir: "testlib", Release: "1.0",
	Check: func(dir string) error {
		b, err := os.ReadFile(filepath.Join(dir, "lib.so"))
		switch {
		case errors.Is(err, os.ErrNotExist):
			return errors.New("no lib.so")
		case err != nil:
			return err
		case string(b) != "1.0":
			return errors.New("release " + string(b))
		}
		return nil
	},
	Get: "run `make setup`",
}

// layout is a machine: a home, a prefix with the binary, a source checkout,
// a working directory; put installs the library in some of them.
type layout struct {
	root string
	env  map[string]string
}

func newLayout(t *testing.T) *layout {
	return &layout{root: t.TempDir(), env: map[string]string{}}
}

func (l *layout) path(rel string) string { return filepath.Join(l.root, rel) }

func (l *layout) put(t *testing.T, rel, release string) string {
	t.Helper()
	dir := l.path(rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lib.so"), []byte(release), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// envFor runs the binary at exe (relative to the root) from wd.
func (l *layout) envFor(exe, wd, flag string) Env {
	return Env{Flag: flag, Getenv: func(k string) string { return l.env[k] },
		Exe: l.path(exe), Home: l.path("home"), Workdir: l.path(wd)}
}

func TestFindSearchOrder(t *testing.T) {
	const (
		installed = "prefix/lib/synapse/testlib/1.0"
		data      = "home/.local/share/synapse/testlib/1.0"
		checkout  = "src/synapse/.cache/testlib/1.0"
		workdir   = "work/.cache/testlib/1.0"
	)
	tests := []struct {
		name       string
		have       []string // installed libraries, in this order
		exe        string
		flag, env  string // relative to the root ("" = not set)
		want       string // relative to the root
		wantSource string
	}{
		{"beside the binary", []string{data, installed}, "prefix/bin/synapse", "", "", installed, "beside the binary"},
		{"data directory", []string{data, checkout}, "prefix/bin/synapse", "", "", data, "the data directory, XDG_DATA_HOME unset"},
		{"checkout of the binary", []string{checkout, workdir}, "src/synapse/bin/synapse", "", "", checkout, "the source checkout of the binary"},
		{"current directory", []string{workdir}, "gobuild/exe/synapse", "", "", workdir, "the current directory's checkout"},
		{"flag first", []string{installed, "mine"}, "prefix/bin/synapse", "mine", "", "mine", "--test-lib"},
		{"environment", []string{installed, "mine"}, "prefix/bin/synapse", "", "mine", "mine", "SYNAPSE_TEST_LIB"},
		{"flag over environment", []string{"a", "b"}, "prefix/bin/synapse", "a", "b", "a", "--test-lib"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLayout(t)
			for _, rel := range tt.have {
				l.put(t, rel, "1.0")
			}
			if tt.env != "" {
				l.env["SYNAPSE_TEST_LIB"] = l.path(tt.env)
			}
			flag := ""
			if tt.flag != "" {
				flag = l.path(tt.flag)
			}
			got, err := testLib.Find(l.envFor(tt.exe, "work", flag))
			if err != nil {
				t.Fatalf("Find: %v", err)
			}
			if got.Path != l.path(tt.want) || got.Source != tt.wantSource {
				t.Errorf("got %s (%s); want %s (%s)", got.Path, got.Source, l.path(tt.want), tt.wantSource)
			}
		})
	}
}

func TestFindXDGDataHome(t *testing.T) {
	l := newLayout(t)
	want := l.put(t, "xdg/synapse/testlib/1.0", "1.0")
	l.put(t, "home/.local/share/synapse/testlib/1.0", "1.0")
	l.env["XDG_DATA_HOME"] = l.path("xdg")
	got, err := testLib.Find(l.envFor("bin/synapse", "work", ""))
	if err != nil || got.Path != want || got.Source != "$XDG_DATA_HOME" {
		t.Errorf("got %+v, %v; want %s from $XDG_DATA_HOME", got, err, want)
	}
	l.env["XDG_DATA_HOME"] = "relative/dir" // invalid: ignored
	got, err = testLib.Find(l.envFor("bin/synapse", "work", ""))
	if err != nil || got.Path != l.path("home/.local/share/synapse/testlib/1.0") {
		t.Errorf("relative XDG_DATA_HOME: got %+v, %v; want ~/.local/share", got, err)
	}
}

// TestFindExplicitIsFinal: a flag or variable naming a wrong place is an
// error saying what is wrong there, even when another place would do.
func TestFindExplicitIsFinal(t *testing.T) {
	l := newLayout(t)
	l.put(t, "prefix/lib/synapse/testlib/1.0", "1.0")
	l.put(t, "old", "0.9")
	if err := os.MkdirAll(l.path("empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, flag, env string
		want            []string
	}{
		{"missing flag dir", "nowhere", "", []string{"--test-lib", "nowhere", "does not exist", "run `make setup`"}},
		{"empty env dir", "", "empty", []string{"SYNAPSE_TEST_LIB", "empty", "no lib.so"}},
		{"wrong release", "old", "", []string{"--test-lib", "old", "release 0.9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			delete(l.env, "SYNAPSE_TEST_LIB")
			if tt.env != "" {
				l.env["SYNAPSE_TEST_LIB"] = l.path(tt.env)
			}
			flag := ""
			if tt.flag != "" {
				flag = tt.flag // relative: to the working directory
			}
			got, err := testLib.Find(l.envFor("prefix/bin/synapse", ".", flag))
			var nf *NotFoundError
			if !errors.As(err, &nf) {
				t.Fatalf("got %+v, %v; want a *NotFoundError", got, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q; want it to say %q", err, w)
				}
			}
		})
	}
}

// TestNotFoundListsEveryPlace: with nothing set and nothing installed, the
// error names each place searched, why it did not do, and how to get it.
func TestNotFoundListsEveryPlace(t *testing.T) {
	l := newLayout(t)
	if err := os.MkdirAll(l.path("prefix/lib/synapse/testlib/1.0"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := testLib.Find(l.envFor("prefix/bin/synapse", "work", ""))
	if err == nil {
		t.Fatal("found a library that is not there")
	}
	msg := err.Error()
	for _, w := range []string{
		"testlib 1.0 libraries not found", "--test-lib and SYNAPSE_TEST_LIB not set",
		l.path("prefix/lib/synapse/testlib/1.0") + " (beside the binary): no lib.so",
		l.path("home/.local/share/synapse/testlib/1.0") + " (the data directory, XDG_DATA_HOME unset): does not exist",
		l.path("prefix/.cache/testlib/1.0") + " (the source checkout of the binary): does not exist",
		l.path("work/.cache/testlib/1.0") + " (the current directory's checkout): does not exist",
		"To get them: run `make setup`",
	} {
		if !strings.Contains(msg, w) {
			t.Errorf("error:\n%s\nwant it to say %q", msg, w)
		}
	}
}

func TestPlacesDeduplicated(t *testing.T) {
	l := newLayout(t)
	// The binary in the checkout it is run from: one cache place, not two.
	places := testLib.Places(l.envFor("src/bin/synapse", "src", ""))
	seen := map[string]int{}
	for _, p := range places {
		seen[p.Path]++
		if seen[p.Path] > 1 {
			t.Errorf("place %s listed twice in %+v", p.Path, places)
		}
	}
	if len(places) != 3 {
		t.Errorf("got %d places %+v; want 3 (install, data, cache)", len(places), places)
	}
}
