package supervise

import (
	"net"
	"syscall"
	"time"
)

// sysProcAttr gives a worker SIGKILL when its spawning thread (the pool's
// spawner thread, see spawner) or the whole module dies, and its own process
// group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
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
			nfd, _, err := syscall.Accept4(int(fd), syscall.SOCK_CLOEXEC)
			if err != nil { // EAGAIN: the backlog is empty
				return true
			}
			syscall.Close(nfd)
		}
	})
}
