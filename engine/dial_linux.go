package engine

import (
	"fmt"
	"net"
	"syscall"
)

// checkModulePeer checks the listener's credentials: user uid, process pid.
func checkModulePeer(nc *net.UnixConn, uid, pid int) error {
	rc, err := nc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := rc.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	if int(cred.Uid) != uid {
		return fmt.Errorf("%w: it belongs to uid %d, not %d", ErrUntrustedModule, cred.Uid, uid)
	}
	if int(cred.Pid) != pid {
		return fmt.Errorf("%w: it belongs to pid %d, not to the parent process %d", ErrUntrustedModule, cred.Pid, pid)
	}
	return nil
}
