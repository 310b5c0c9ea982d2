//go:build !linux

package pgtest

import "syscall"

// sysProcAttr runs a program as cred (nil: the test's user).
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}

// killTree SIGKILLs the postmaster pid. Its children, not found here,
// exit when they notice it gone.
func killTree(pid int) []int {
	syscall.Kill(pid, syscall.SIGKILL)
	return nil
}

func gone(pid int) bool { return true }
