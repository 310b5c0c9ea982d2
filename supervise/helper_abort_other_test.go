//go:build !linux

package supervise

import (
	"fmt"
	"os"
	"runtime/debug"
	"syscall"
)

// helperAbort dies by SIGABRT like a failed GGML_ASSERT, leaving a marker
// on stderr (followed by the Go runtime's stack dump).
func helperAbort(what string) {
	fmt.Fprintf(os.Stderr, "GGML_ASSERT(%s) failed: helper abort\n", what)
	syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	debug.SetTraceback("crash")
	panic("helper abort")
}
