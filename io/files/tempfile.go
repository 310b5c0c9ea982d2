package files

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// tempMarker is in the name of every temporary file synapse writes beside
// a final one: FINAL.tmp-synapse-PID-RANDOM. The PID lets a later run tell
// a dead run's leftovers from a live run's files (RemoveStaleTemps).
const TempMarker = ".tmp-synapse-"

// createTemp creates a new, empty temporary file beside final and returns
// it open for writing. It is created exclusively (O_EXCL): an existing
// name — a file, or a symbolic link planted in a shared directory — is
// never opened, followed or truncated; another random name is tried.
func CreateTemp(final string) (*os.File, error) {
	dir, base := filepath.Split(final)
	prefix := filepath.Join(dir, base+TempMarker+strconv.Itoa(os.Getpid())+"-")
	for range 100 {
		var r [6]byte
		if _, err := rand.Read(r[:]); err != nil {
			return nil, fmt.Errorf("temporary file: %w", err)
		}
		f, err := os.OpenFile(prefix+hex.EncodeToString(r[:]), os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("temporary file for %s: %w", final, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("temporary file for %s: no free name", final)
}

// RemoveStaleTemps removes the temporary files a killed run left beside
// final (a SIGKILL during the final write leaves a full-size one): only
// what is provably a dead synapse run's — named FINAL.tmp-synapse-PID-…,
// a regular file (not a link), owned by this user, and whose PID is not a
// running process. Call it holding the output's lock (OpenCheckpointed
// does), so that no run of this output is between writing and renaming.
// It returns the files removed.
func RemoveStaleTemps(final string) ([]string, error) {
	dir, base := filepath.Split(final)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), base+TempMarker)
		if !ok {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("stale temporary files: %w", err)
	}
	return removed, nil
}

// processAlive reports whether a process with this pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
