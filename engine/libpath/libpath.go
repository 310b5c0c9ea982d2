// Package libpath finds the native libraries synapse loads at run time
// (llama.cpp, ONNX Runtime), in one documented search order, and says what
// is missing and how to get it when they are not there.
//
// The search order, first match wins:
//
//  1. the command-line flag (--llama-lib DIR), then the environment variable
//     (SYNAPSE_LLAMA_LIB=DIR): a path named there must hold the library; a
//     wrong one is an error, never skipped for the next place;
//  2. beside the binary, where `make install PREFIX=…` puts it:
//     PREFIX/bin/synapse finds PREFIX/lib/synapse/<dir>/<release>;
//  3. the user's data directory: $XDG_DATA_HOME/synapse/<dir>/<release>
//     (XDG_DATA_HOME defaults to ~/.local/share);
//  4. the repository cache `make setup` fills: .cache/<dir>/<release> in the
//     source checkout that holds the binary (bin/synapse), else in the
//     current directory (`go run .`).
package libpath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Lib describes one pinned native library release.
type Lib struct {
	Name    string // what users call it: "llama.cpp"
	Flag    string // the command-line flag: "--llama-lib"
	Env     string // the environment variable: "SYNAPSE_LLAMA_LIB"
	Dir     string // its folder in the install, data and cache layouts: "llama"
	Release string // the pinned release: "v0.5.0"
	// Check reports what is wrong with a path that exists (files missing, a
	// different release), or nil when the library is there.
	Check func(path string) error
	// Get says how to get the library, for the error that lists the places
	// searched: "`make setup` in a synapse checkout fetches it from npm …".
	Get string
}

// Env is what the search reads of the process; ProcessEnv fills it.
type Env struct {
	Flag    string              // the flag's value, "" when not given
	Getenv  func(string) string // os.Getenv
	Exe     string              // the running binary, symlinks resolved ("" if unknown)
	Home    string              // the home directory ("" if unknown)
	Workdir string              // the current directory ("" if unknown)
}

// ProcessEnv is the Env of this process, with flag the value of the Lib's
// flag ("" when not given).
func ProcessEnv(flag string) Env {
	e := Env{Flag: flag, Getenv: os.Getenv}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		e.Exe = exe
	}
	e.Home, _ = os.UserHomeDir()
	e.Workdir, _ = os.Getwd()
	return e
}

// Place is one place searched.
type Place struct {
	Path     string // absolute
	Source   string // "--llama-lib", "SYNAPSE_LLAMA_LIB", "beside the binary", …
	Explicit bool   // named by the user: it must hold the library
}

// Places lists, in search order, where l is looked for. With the flag or
// the environment variable set, that is the only place.
func (l Lib) Places(e Env) []Place {
	env := ""
	if e.Getenv != nil {
		env = e.Getenv(l.Env)
	}
	switch {
	case e.Flag != "" && e.Flag != env:
		return []Place{{Path: abs(e.Flag, e.Workdir), Source: l.Flag, Explicit: true}}
	case env != "":
		return []Place{{Path: abs(env, e.Workdir), Source: l.Env, Explicit: true}}
	}
	var out []Place
	rel := filepath.Join(l.Dir, l.Release)
	if e.Exe != "" {
		out = append(out, Place{Path: filepath.Join(filepath.Dir(filepath.Dir(e.Exe)), "lib", "synapse", rel), Source: "beside the binary"})
	}
	if data, source := dataHome(e); data != "" {
		out = append(out, Place{Path: filepath.Join(data, "synapse", rel), Source: source})
	}
	cache := filepath.Join(".cache", rel)
	if e.Exe != "" {
		out = append(out, Place{Path: filepath.Join(filepath.Dir(filepath.Dir(e.Exe)), cache), Source: "the source checkout of the binary"})
	}
	if e.Workdir != "" {
		out = append(out, Place{Path: filepath.Join(e.Workdir, cache), Source: "the current directory's checkout"})
	}
	return dedupe(out)
}

// dataHome is $XDG_DATA_HOME, else ~/.local/share ("" if neither is
// known), and how it was found. A relative XDG_DATA_HOME is invalid (XDG
// Base Directory specification) and ignored.
func dataHome(e Env) (string, string) {
	if e.Getenv != nil {
		if d := e.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
			return d, "$XDG_DATA_HOME"
		}
	}
	if e.Home == "" {
		return "", ""
	}
	return filepath.Join(e.Home, ".local", "share"), "the data directory, XDG_DATA_HOME unset"
}

func abs(p, wd string) string {
	if filepath.IsAbs(p) || wd == "" {
		return filepath.Clean(p)
	}
	return filepath.Join(wd, p)
}

func dedupe(ps []Place) []Place {
	seen := map[string]bool{}
	out := ps[:0]
	for _, p := range ps {
		if !seen[p.Path] {
			seen[p.Path] = true
			out = append(out, p)
		}
	}
	return out
}

// Find returns the first place that holds l. When none does it returns a
// *NotFoundError naming every place and why it did not do.
func (l Lib) Find(e Env) (Place, error) {
	nf := &NotFoundError{Lib: l}
	for _, p := range l.Places(e) {
		err := l.check(p.Path)
		if err == nil {
			return p, nil
		}
		nf.Tried = append(nf.Tried, Tried{p, err})
	}
	return Place{}, nf
}

// check reports why path does not hold l.
func (l Lib) check(path string) error {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errors.New("does not exist")
		}
		return err
	}
	if l.Check == nil {
		return nil
	}
	return l.Check(path)
}

// Tried is a place searched and why it did not hold the library.
type Tried struct {
	Place
	Err error
}

// NotFoundError lists the places searched for a library.
type NotFoundError struct {
	Lib   Lib
	Tried []Tried
}

func (e *NotFoundError) Error() string {
	var b strings.Builder
	l := e.Lib
	if len(e.Tried) == 1 && e.Tried[0].Explicit {
		t := e.Tried[0]
		fmt.Fprintf(&b, "%s %s libraries: %s %s: %v.\n", l.Name, l.Release, t.Source, t.Path, t.Err)
	} else {
		fmt.Fprintf(&b, "%s %s libraries not found (%s and %s not set); looked in:\n", l.Name, l.Release, l.Flag, l.Env)
		for _, t := range e.Tried {
			fmt.Fprintf(&b, "  %s (%s): %v\n", t.Path, t.Source, t.Err)
		}
	}
	fmt.Fprintf(&b, "To get them: %s", l.Get)
	return b.String()
}
