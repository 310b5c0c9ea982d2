package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUntrusted marks a directory or file that another user could change:
// one owned by a user other than this one and root, or one that others
// may write (a directory without the sticky bit). Whoever can change it
// could put their own worker socket or model where synapse takes it from.
// Starting again unchanged cannot succeed.
var ErrUntrusted = errors.New("another user could change it")

// TrustedPath resolves dir's symbolic links and checks every directory of
// the resolved path, from "/" down, with CheckTrusted for this user: no
// other user may rename or replace what is below it. It returns the
// resolved path; a missing directory is the file system's error.
func TrustedPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	uid := os.Getuid()
	for d := resolved; ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			return "", err
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("%w: %s is not a directory", ErrUntrusted, d)
		}
		if err := CheckTrusted(d, fi, uid); err != nil {
			return "", err
		}
		if d == filepath.Dir(d) {
			return resolved, nil
		}
	}
}

// CheckTrusted checks one file or directory, described by fi (from Lstat):
// it must be owned by uid or by root, and others (group or world) may not
// write it, unless it is a directory with the sticky bit (as /tmp), in
// which only an entry's owner may rename or remove it.
func CheckTrusted(path string, fi fs.FileInfo, uid int) error {
	if owner, ok := Owner(fi); ok && owner != uid && owner != 0 {
		return fmt.Errorf("%w: %s is owned by uid %d, not by uid %d or root", ErrUntrusted, path, owner, uid)
	}
	if fi.Mode().Perm()&0o022 != 0 && !(fi.IsDir() && fi.Mode()&fs.ModeSticky != 0) {
		what := "has no sticky bit"
		if !fi.IsDir() {
			what = "is not a directory"
		}
		return fmt.Errorf("%w: %s is writable by others (mode %v) and %s", ErrUntrusted, path, fi.Mode().Perm(), what)
	}
	return nil
}

// Owner is the uid that owns the file fi describes, if the platform says.
func Owner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
