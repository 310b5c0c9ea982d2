package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/synapse-embed/synapse/model/onnx/cpuclass"
)

// Tests of what depends on the CPU class run a test binary again on an
// emulated CPU: qemu-x86_64 (Debian's qemu-user) with -cpu EmulatedCPU, an
// x86-64 with AVX2 and FMA and no AVX-512, VNNI or AMX, the class where
// ONNX Runtime's int8 kernels saturate (docs/onnx.md). QEMU's TCG has no
// AVX-512, so whatever the host, the child sees that class.

// EmulatedCPU is the QEMU CPU model the emulated runs use.
const EmulatedCPU = "Haswell"

// EmulatorEnv names the variable that, set to 1, runs the tests on an
// emulated CPU: `make test-cpu` sets it, with SYNAPSE_REQUIRE_EMULATOR=1,
// which turns a missing qemu-x86_64 into a failure instead of a skip. The
// emulation is slow (minutes), so `make test` skips them, saying so.
const (
	EmulatorEnv        = "SYNAPSE_EMULATED_CPU"
	RequireEmulatorEnv = "SYNAPSE_REQUIRE_EMULATOR"
)

// Emulator returns the path of qemu-x86_64 ($SYNAPSE_QEMU, else on PATH),
// or skips the test saying why — fails it when SYNAPSE_REQUIRE_EMULATOR=1.
// The skip message starts with "needs an emulated CPU:", which the skip
// summary of `make test` counts.
func Emulator(t testing.TB) string {
	t.Helper()
	if os.Getenv(EmulatorEnv) != "1" && os.Getenv(RequireEmulatorEnv) != "1" {
		t.Skipf("needs an emulated CPU: runs in `make test-cpu` (%s=1), minutes of qemu-x86_64 -cpu %s", EmulatorEnv, EmulatedCPU)
	}
	name := os.Getenv("SYNAPSE_QEMU")
	if name == "" {
		name = "qemu-x86_64"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		msg := fmt.Sprintf("needs an emulated CPU: %s not found (`make test-cpu` installs Debian's qemu-user and runs these tests): %v", name, err)
		if os.Getenv(RequireEmulatorEnv) == "1" {
			t.Fatalf("%s (%s=1)", msg, RequireEmulatorEnv)
		}
		t.Skip(msg)
	}
	return p
}

// CPUClass names this process's x86-64 class as ONNX Runtime's int8
// kernels see it (cpuclass.Of): "amx", "avx512-vnni", "avx-vnni",
// "avx512", "avx2" or "baseline".
func CPUClass() string { return cpuclass.Of() }
