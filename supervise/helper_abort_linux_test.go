package supervise

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// helperAbort dies by SIGABRT like a failed GGML_ASSERT, leaving a marker
// on stderr. The Go runtime's SIGABRT handler is replaced by the default
// action first, so the process ends by the signal without a stack dump.
func helperAbort(what string) {
	fmt.Fprintf(os.Stderr, "GGML_ASSERT(%s) failed: helper abort\n", what)
	syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{}) // no core file in the package dir
	var sa [4]uintptr                                         // kernel struct sigaction, all zero: SIG_DFL
	syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(syscall.SIGABRT), uintptr(unsafe.Pointer(&sa)), 0, 8, 0, 0)
	syscall.Kill(os.Getpid(), syscall.SIGABRT)
	helperHang()
}
