package pgtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// sysProcAttr runs a program as cred (nil: the test's user); the kernel
// SIGKILLs it when the test process dies without its cleanups (a test
// binary's timeout), and the backends follow their postmaster.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
}

// killTree SIGKILLs the postmaster pid and its children, and returns the
// children. PostgreSQL puts each child in a session of its own, so that
// no process group holds them all: the postmaster is stopped first, so
// that it forks no more, its children are found in /proc and killed, then
// it is.
func killTree(pid int) []int {
	syscall.Kill(pid, syscall.SIGSTOP)
	kids := children(pid)
	for _, k := range kids {
		syscall.Kill(k, syscall.SIGKILL)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	return kids
}

// children are the processes whose parent is pid.
func children(pid int) []int {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	var kids []int
	for _, p := range paths {
		if _, ppid, ok := procStat(p); ok && ppid == pid {
			k, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			kids = append(kids, k)
		}
	}
	return kids
}

// gone reports whether pid has exited (it may be a zombie not yet reaped:
// it holds no memory then).
func gone(pid int) bool {
	state, _, ok := procStat("/proc/" + strconv.Itoa(pid) + "/stat")
	return !ok || state == 'Z' || state == 'X'
}

// procStat reads a process's state and parent from /proc/PID/stat:
// "PID (COMM) STATE PPID ...", where COMM may hold spaces and parentheses.
func procStat(path string) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(string(f[1]))
	return f[0][0], ppid, err == nil
}
