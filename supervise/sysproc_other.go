//go:build unix && !linux

package supervise

import (
	"net"
	"syscall"
	"time"
)

// sysProcAttr puts a worker in its own process group. Outside Linux there is
// no parent-death signal: a killed module leaves workers that exit when their
// socket closes.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// discardBacklog closes connections already queued on ln (a killed worker
// of an earlier generation may have connected after its slot gave up on
// it), so the next accept sees only the new worker.
func discardBacklog(ln *net.UnixListener) {
	ln.SetDeadline(time.Time{})
	rc, err := ln.SyscallConn()
	if err != nil {
		return
	}
	rc.Read(func(fd uintptr) bool {
		for {
			nfd, _, err := syscall.Accept(int(fd))
			if err != nil { // EAGAIN: the backlog is empty
				return true
			}
			syscall.Close(nfd)
		}
	})
}
