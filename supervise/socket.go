package supervise

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/synapse-embed/synapse/io/files"
)

// maxSocketPath is the longest usable sun_path on Linux (108 bytes with the
// terminating NUL).
const maxSocketPath = 107

// runtimeDir returns the directory that holds synapse/workers: dir if set,
// else $XDG_RUNTIME_DIR, else a new private temporary directory (created
// reports true; the pool removes it on Close). A given or inherited
// directory must already exist (it is never created) and be trusted: see
// trustedRoot.
func runtimeDir(dir string) (path string, created bool, err error) {
	what := "runtime dir"
	if dir == "" {
		dir, what = os.Getenv("XDG_RUNTIME_DIR"), "XDG_RUNTIME_DIR"
	}
	if dir != "" {
		p, err := trustedRoot(dir)
		if err != nil {
			return "", false, fmt.Errorf("supervise: %s %s: %w", what, dir, err)
		}
		return p, false, nil
	}
	tmp, err := os.MkdirTemp("", "synapse-") // mode 0700
	if err != nil {
		return "", false, fmt.Errorf("supervise: runtime dir: %w", err)
	}
	return tmp, true, nil
}

// ErrSocketPathTooLong: the runtime directory is so deep that a worker
// socket's path does not fit in sun_path. Starting again unchanged cannot
// succeed.
var ErrSocketPathTooLong = errors.New("socket path too long")

// CheckRuntimeDir checks, before any work, the runtime directory a pool
// with this RuntimeDir would use (see Config.RuntimeDir): that it exists and
// is trusted, and that a worker socket's path in it fits. Its errors wrap
// ErrRuntimeDir or ErrSocketPathTooLong when the directory cannot be used.
func CheckRuntimeDir(dir string) error {
	if dir == "" && os.Getenv("XDG_RUNTIME_DIR") == "" {
		return nil // a private temporary directory
	}
	root, _, err := runtimeDir(dir)
	if err != nil {
		return err
	}
	d := root
	for _, name := range []string{"synapse", "workers"} { // as workersDir will find them
		d = filepath.Join(d, name)
		fi, err := os.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return fmt.Errorf("supervise: workers dir: %w", err)
		}
		if err := checkPrivate(d, fi); err != nil {
			return err
		}
	}
	longest := filepath.Join(root, "synapse", "workers", fmt.Sprintf("%d-%d-w%d.sock", os.Getpid(), 9999, 999))
	if len(longest) > maxSocketPath {
		return fmt.Errorf("supervise: %w: %s holds worker sockets of up to %d bytes, longer than %d (choose a shorter runtime directory)",
			ErrSocketPathTooLong, root, len(longest), maxSocketPath)
	}
	return nil
}

// ErrRuntimeDir marks a runtime directory that is missing or that another
// user could change: whoever can rename entries in it could put their own
// listener where a restarted worker dials. Starting again unchanged cannot
// succeed.
var ErrRuntimeDir = errors.New("unusable runtime directory")

// trustedRoot resolves dir's symbolic links and checks every directory of
// the resolved path, from "/" down (files.TrustedPath): each must be owned
// by this user or by root, and one that others may write must have the
// sticky bit (as /tmp has), so that no other user can rename or replace
// what is below it. A missing directory is an error: it is not created.
func trustedRoot(dir string) (string, error) {
	p, err := files.TrustedPath(dir)
	switch {
	case errors.Is(err, files.ErrUntrusted):
		return "", fmt.Errorf("%w: %w: that user could replace the worker sockets (unset XDG_RUNTIME_DIR, e.g. after sudo -E)", ErrRuntimeDir, err)
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%w: %v (synapse does not create it)", ErrRuntimeDir, err)
	case err != nil:
		return "", fmt.Errorf("%w: %w", ErrRuntimeDir, err)
	}
	return p, nil
}

// workersDir creates <root>/synapse/workers with mode 0700, one level at a
// time, and makes sure both directories are private to this user. Each
// level is checked (without following a symbolic link) before anything is
// created inside it, so a planted link is refused, never followed.
func workersDir(root string) (string, error) {
	dir := root
	for _, name := range []string{"synapse", "workers"} {
		dir = filepath.Join(dir, name)
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("supervise: workers dir: %w", err)
		}
		if err := ensurePrivate(dir); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// ensurePrivate checks that d is a directory (not a symbolic link) owned by
// this user and narrows its mode to 0700.
func ensurePrivate(d string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return fmt.Errorf("supervise: workers dir: %w", err)
	}
	if err := checkPrivate(d, fi); err != nil {
		return err
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("supervise: workers dir: %w", err)
		}
	}
	return nil
}

// checkPrivate checks that d, described by fi (from Lstat), is a directory
// owned by this user.
func checkPrivate(d string, fi fs.FileInfo) error {
	if !fi.IsDir() {
		return fmt.Errorf("supervise: workers dir: %w: %s is not a directory (%v)", ErrRuntimeDir, d, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("supervise: workers dir: %w: %s is owned by uid %d, not %d", ErrRuntimeDir, d, st.Uid, os.Getuid())
	}
	return nil
}

// listen creates the listening socket at path, first removing a stale
// socket file that nobody answers on. A path that is not a socket, or a
// socket someone answers on, is left alone and reported.
func listen(path string) (*net.UnixListener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("supervise: %w: %q is %d bytes, longer than %d (choose a shorter runtime directory)", ErrSocketPathTooLong, path, len(path), maxSocketPath)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("supervise: listen: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	return ln, nil
}

// removeStale removes path if it is a socket with no listener behind it.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("supervise: stale socket: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("supervise: %s exists and is not a socket; not removing it", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("supervise: %s is in use by a live listener", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("supervise: stale socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("supervise: stale socket: %w", err)
	}
	return nil
}

// sweepStale removes sockets of dead modules from dir: files named
// "<pid>-*.sock" whose pid is not a running process and that refuse
// connections. The pid check keeps a live module's socket safe in the
// instant between its bind and listen.
func sweepStale(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		pidStr, _, ok := strings.Cut(name, "-")
		if !ok || !strings.HasSuffix(name, ".sock") {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		_ = removeStale(filepath.Join(dir, name)) // best effort; listen re-checks its own path
	}
}

// processAlive reports whether a process with this pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
