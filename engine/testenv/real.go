package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// RequireRealEnv names the variable that, set to 1, turns a missing real
// model into a test failure instead of a skip: `make test-real` sets it
// after fetching the models, so that its checks cannot pass without them.
const RequireRealEnv = "SYNAPSE_REQUIRE_REAL"

// RealTestsEnv names the variable that, set to 1, opts in to the tests on
// real models outside `make test-real`. Without it (or RequireRealEnv)
// they skip even when the models are fetched: `make demo` puts one into
// .cache/models, and `make test` must not grow by their minutes because
// of it.
const RealTestsEnv = "SYNAPSE_REAL_TESTS"

// RealTestsEnabled reports whether tests on real models run:
// SYNAPSE_REAL_TESTS=1, or SYNAPSE_REQUIRE_REAL=1 (`make test-real`).
func RealTestsEnabled() bool {
	return os.Getenv(RealTestsEnv) == "1" || os.Getenv(RequireRealEnv) == "1"
}

// RealModelsDir is where `make real-models` puts the real models (pinned
// packages, checked by sha256): $SYNAPSE_REAL_MODELS, else .cache/models in
// the checkout.
func RealModelsDir() string {
	if dir := os.Getenv("SYNAPSE_REAL_MODELS"); dir != "" {
		return dir
	}
	return filepath.Join(repoRoot(), ".cache", "models")
}

// RealModel returns the path of the real model name (a directory or a
// file below RealModelsDir), or skips the test: when real-model tests are
// not enabled (RealTestsEnabled), or saying how to fetch a missing model —
// failing it instead when SYNAPSE_REQUIRE_REAL=1. The skip message starts
// with "needs real models:", which the skip summary of `make test` counts.
func RealModel(t testing.TB, name string) string {
	t.Helper()
	if !RealTestsEnabled() {
		t.Skipf("needs real models: they run in `make test-real` (or with %s=1), not in `make test`", RealTestsEnv)
	}
	p := filepath.Join(RealModelsDir(), name)
	if _, err := os.Stat(p); err != nil {
		MissingRealModel(t, "%s is not fetched (`make real-models`, or `make test-real` which runs these tests): %v", name, err)
	}
	return p
}

// MissingRealModel skips the test because a real model it needs is
// absent, or fails it when SYNAPSE_REQUIRE_REAL=1.
func MissingRealModel(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := "needs real models: " + fmt.Sprintf(format, args...)
	if os.Getenv(RequireRealEnv) == "1" {
		t.Fatalf("%s (%s=1)", msg, RequireRealEnv)
	}
	t.Skip(msg)
}
