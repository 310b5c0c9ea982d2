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
)

// maxSocketPath is the longest usable sun_path on Linux (108 bytes with the
// terminating NUL).
const maxSocketPath = 107

// runtimeDir returns the directory that holds synapse/workers: dir if set,
// else $XDG_RUNTIME_DIR, else a new private temporary directory (created
// reports true; the pool removes it on Close).
func runtimeDir(dir string) (path string, created bool, err error) {
	if dir != "" {
		return dir, false, nil
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		return x, false, nil
	}
	tmp, err := os.MkdirTemp("", "synapse-") // mode 0700
	if err != nil {
		return "", false, fmt.Errorf("supervise: runtime dir: %w", err)
	}
	return tmp, true, nil
}

// workersDir creates <root>/synapse/workers with mode 0700 and makes sure
// both directories are private to this user.
func workersDir(root string) (string, error) {
	dir := filepath.Join(root, "synapse", "workers")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("supervise: workers dir: %w", err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := ensurePrivate(d); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// ensurePrivate checks that d is a directory owned by this user and narrows
// its mode to 0700.
func ensurePrivate(d string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return fmt.Errorf("supervise: workers dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("supervise: workers dir: %s is not a directory", d)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("supervise: workers dir: %s is owned by uid %d, not %d", d, st.Uid, os.Getuid())
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("supervise: workers dir: %w", err)
		}
	}
	return nil
}

// listen creates the listening socket at path, first removing a stale
// socket file that nobody answers on. A path that is not a socket, or a
// socket someone answers on, is left alone and reported.
func listen(path string) (*net.UnixListener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("supervise: socket path %q is %d bytes, longer than %d", path, len(path), maxSocketPath)
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
