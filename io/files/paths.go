package files

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// PathUse is one file a command reads or writes, named by the flag that
// gave it ("--errors", "input", "-o (resume file)").
type PathUse struct {
	Flag  string
	Path  string
	Write bool
}

// Reads are the files of one flag that a command reads ("" and "-" left out).
func Reads(flag string, paths ...string) []PathUse { return uses(flag, false, paths) }

// Writes are the files of one flag that a command writes ("" and "-" left out).
func Writes(flag string, paths ...string) []PathUse { return uses(flag, true, paths) }

func uses(flag string, write bool, paths []string) []PathUse {
	u := make([]PathUse, 0, len(paths))
	for _, p := range paths {
		if p != "" && p != "-" {
			u = append(u, PathUse{Flag: flag, Path: p, Write: write})
		}
	}
	return u
}

// ErrPathClash: a file a command would write is also one it reads, or
// another it writes.
var ErrPathClash = errors.New("a written file clashes with another file of the command")

// CheckPaths refuses, before any work, a file written twice or written and
// read: every written path must differ from every other path of the
// command. Paths are compared after resolving symbolic links (a path that
// does not exist yet by its resolved directory and its name) and by file
// identity (hard links to one file clash); a read directory (an ONNX model)
// clashes with a write inside it. URLs (s3://…) compare as strings. The
// error names both flags.
func CheckPaths(paths []PathUse) error {
	keys := make([]pathKey, len(paths))
	for i, p := range paths {
		keys[i] = keyOf(p.Path)
	}
	for i, a := range paths {
		for j := i + 1; j < len(paths); j++ {
			b := paths[j]
			if !a.Write && !b.Write {
				continue
			}
			if keys[i].clashes(keys[j]) {
				return fmt.Errorf("%w: %s %s %s %s %s: %s", ErrPathClash, a.Flag, a.Path, relation(a, b), b.Flag, b.Path, consequence(a, b))
			}
		}
	}
	return nil
}

// relation says how a and b, two uses that name one file, relate.
func relation(a, b PathUse) string {
	if a.Path == b.Path {
		return "is also"
	}
	return "is the same file as"
}

// consequence says what running with a and b on one file would do.
func consequence(a, b PathUse) string {
	switch {
	case a.Write && b.Write:
		return "the two outputs would overwrite each other; give them different paths"
	case a.Write:
		return "the run would overwrite " + b.Flag
	default:
		return "the run would overwrite " + a.Flag
	}
}

// pathKey identifies a file for CheckPaths.
type pathKey struct {
	name     string // resolved absolute path, or the URL
	dev, ino uint64 // of an existing file; ino 0 when unknown
	dir      bool   // an existing directory
}

func keyOf(p string) pathKey {
	if strings.Contains(p, "://") {
		return pathKey{name: p}
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return pathKey{name: filepath.Clean(p)}
	}
	k := pathKey{name: resolve(abs)}
	if st, err := os.Stat(abs); err == nil {
		k.dir = st.IsDir()
		if s, ok := st.Sys().(*syscall.Stat_t); ok {
			k.dev, k.ino = uint64(s.Dev), uint64(s.Ino)
		}
	}
	return k
}

// resolve resolves the symbolic links of abs, or of its nearest existing
// ancestor when it does not exist (yet): a planted or dangling link is
// followed as a write would follow it.
func resolve(abs string) string { return resolveN(abs, 40) }

func resolveN(abs string, links int) string {
	if r, err := filepath.EvalSymlinks(abs); err == nil || links == 0 {
		return r
	}
	if target, err := os.Readlink(abs); err == nil { // a dangling link: where a write would create the file
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(abs), target)
		}
		return resolveN(target, links-1)
	}
	dir, base := filepath.Split(abs)
	dir = filepath.Clean(dir)
	if dir == abs {
		return abs
	}
	return filepath.Join(resolveN(dir, links-1), base)
}

func (a pathKey) clashes(b pathKey) bool {
	switch {
	case a.name == b.name:
		return true
	case a.ino != 0 && a.ino == b.ino && a.dev == b.dev:
		return true
	case a.dir && within(b.name, a.name), b.dir && within(a.name, b.name):
		return true
	}
	return false
}

func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
