// Package testenv finds what tests need outside the repository: the shared
// fixtures, the llama.cpp and ONNX Runtime libraries and a built synapse binary.
package testenv

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
)

// repoRoot is the module root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// RequireFixturesEnv names the variable that, set to 1, turns a missing
// fixture into a test failure instead of a skip: CI sets it, so that a run
// that was meant to compare with the references cannot pass without them.
const RequireFixturesEnv = "SYNAPSE_REQUIRE_FIXTURES"

// fixturesDir is $SYNAPSE_FIXTURES, else ../shared/fixtures beside the
// repository.
func fixturesDir() string {
	if dir := os.Getenv("SYNAPSE_FIXTURES"); dir != "" {
		return dir
	}
	return filepath.Join(repoRoot(), "..", "shared", "fixtures")
}

// HaveFixtures reports whether the shared fixtures directory exists.
func HaveFixtures() bool {
	_, err := os.Stat(fixturesDir())
	return err == nil
}

// MissingFixture skips the test because a fixture it needs is absent, or
// fails it when SYNAPSE_REQUIRE_FIXTURES=1. The message starts with
// "needs fixtures:", which the skip summary of `make test` counts.
func MissingFixture(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := "needs fixtures: " + fmt.Sprintf(format, args...)
	if os.Getenv(RequireFixturesEnv) == "1" {
		t.Fatalf("%s (%s=1)", msg, RequireFixturesEnv)
	}
	t.Skip(msg)
}

// Fixtures returns the shared fixtures directory ($SYNAPSE_FIXTURES, else
// ../shared/fixtures beside the repository), or skips the test
// (MissingFixture).
func Fixtures(t testing.TB) string {
	t.Helper()
	dir := fixturesDir()
	if _, err := os.Stat(dir); err != nil {
		MissingFixture(t, "the shared fixtures are not at %s (set SYNAPSE_FIXTURES): %v", dir, err)
	}
	return dir
}

// Fixture returns the path of a file below the fixtures directory.
func Fixture(t testing.TB, rel ...string) string {
	t.Helper()
	return filepath.Join(append([]string{Fixtures(t)}, rel...)...)
}

// LlamaLib returns the llama.cpp library directory: $SYNAPSE_LLAMA_LIB,
// which must then hold the libraries (else the test fails), or the cache
// that `make setup` fills, without which the test skips (fails with
// SYNAPSE_REQUIRE_FIXTURES=1).
func LlamaLib(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("SYNAPSE_LLAMA_LIB")
	explicit := dir != ""
	if !explicit {
		dir = filepath.Join(repoRoot(), ".cache", "llama", "v0.5.0")
	}
	if _, err := os.Stat(filepath.Join(dir, "libllama.so")); err != nil {
		if explicit {
			t.Fatalf("SYNAPSE_LLAMA_LIB=%s: %v", dir, err)
		}
		MissingFixture(t, "llama.cpp libraries not found in %s (run `make setup` or set SYNAPSE_LLAMA_LIB): %v", dir, err)
	}
	return dir
}

// ORTLib returns the ONNX Runtime library directory ($SYNAPSE_ORT_LIB, else
// the cache that `make setup` fills) or skips the test.
func ORTLib(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("SYNAPSE_ORT_LIB")
	if dir == "" {
		dir = filepath.Join(repoRoot(), ".cache", "onnxruntime", "1.30.0")
	}
	lib := dir
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		lib = filepath.Join(dir, "libonnxruntime.so.1")
	}
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("ONNX Runtime library not found at %s (run `make setup` or set SYNAPSE_ORT_LIB): %v", lib, err)
	}
	return dir
}

// HFTokenizers returns the directory of the test reference tokenizers
// ($SYNAPSE_HF_TOKENIZERS, else the cache `make hf-tokenizers` fills) and
// the node executable that runs them, or skips the test.
func HFTokenizers(t testing.TB) (dir, node string) {
	t.Helper()
	dir = os.Getenv("SYNAPSE_HF_TOKENIZERS")
	if dir == "" {
		dir = filepath.Join(repoRoot(), ".cache", "hf-tokenizers", "0.6.0")
	}
	if _, err := os.Stat(filepath.Join(dir, "index.js")); err != nil {
		t.Skipf("reference tokenizers not found in %s (run `make hf-tokenizers` or set SYNAPSE_HF_TOKENIZERS): %v", dir, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("reference tokenizers need Node.js: %v", err)
	}
	return dir, node
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)

// Binary builds the synapse command once per test process and returns its
// path. A build failure fails the test (and every later caller): a test
// that needs synapse never skips because synapse does not compile.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "synapse-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "synapse")
		buildOut, buildErr = goBuild(repoRoot(), binPath)
	})
	failBuild(t, buildErr, buildOut)
	return binPath
}

// failBuild fails the test when the build failed.
func failBuild(t testing.TB, err error, out []byte) {
	t.Helper()
	if err != nil {
		t.Fatalf("building synapse: %v\n%s", err, out)
	}
}

func goBuild(dir, out string) ([]byte, error) {
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

// Cosine is the cosine similarity of two vectors of the same length.
func Cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// StrangerUID is the user (nobody) that tests of another user on the
// machine run processes as.
const StrangerUID = 65534

// Stranger returns credentials of another user (StrangerUID) for
// exec.Cmd.SysProcAttr, or skips the test when it does not run as root,
// which alone may start processes as another user. The skip message is
// the same for every such test, so the skip summary counts one reason.
func Stranger(t testing.TB) *syscall.Credential {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root: runs a process as another user (uid 65534)")
	}
	return &syscall.Credential{Uid: StrangerUID, Gid: StrangerUID}
}

// StrangerExecutable copies the running test binary into a directory
// another user can read, for running it as that user (the go tool's
// build directory is private), and returns the copy's path.
func StrangerExecutable(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "stranger")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, filepath.Base(self))
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}
