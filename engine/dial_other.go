//go:build unix && !linux

package engine

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// checkModulePeer checks the listener's user where the system reports it
// (LOCAL_PEERCRED on the BSDs and macOS); the process is not known there.
func checkModulePeer(nc *net.UnixConn, uid, _ int) error {
	rc, err := nc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Xucred
	var credErr error
	if err := rc.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("LOCAL_PEERCRED: %w", credErr)
	}
	if int(cred.Uid) != uid {
		return fmt.Errorf("%w: it belongs to uid %d, not %d", ErrUntrustedModule, cred.Uid, uid)
	}
	return nil
}
