//go:build unix

package modelcache

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// flock opens (creating) path and takes an exclusive lock on it; with wait
// false it fails with errLocked instead of waiting. The lock is the open
// file's: it is released by unlock, or by the kernel when the process dies.
func flock(path string, wait bool) (unlock func(), err error) {
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("modelcache: lock: %w", err)
	}
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	for {
		err = syscall.Flock(int(fh.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		fh.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("modelcache: lock %s: %w", path, err)
	}
	return func() { fh.Close() }, nil
}
