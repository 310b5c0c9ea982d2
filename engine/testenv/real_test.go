package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRealModelOptIn: a real model that is fetched (here a directory of
// that name in SYNAPSE_REAL_MODELS, as `make demo` leaves one) is not used
// by a plain test run — the test skips, saying where such tests run — and is
// used with SYNAPSE_REAL_TESTS=1 or SYNAPSE_REQUIRE_REAL=1.
func TestRealModelOptIn(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "all-MiniLM-L6-v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SYNAPSE_REAL_MODELS", dir)
	for _, tc := range []struct {
		real, require string
		used          bool
	}{
		{"", "", false},
		{"0", "", false},
		{"1", "", true},
		{"", "1", true},
	} {
		t.Setenv(RealTestsEnv, tc.real)
		t.Setenv(RequireRealEnv, tc.require)
		used := usesModel(t)
		if used != tc.used {
			t.Errorf("%s=%q %s=%q: the fetched model used %v; want %v", RealTestsEnv, tc.real, RequireRealEnv, tc.require, used, tc.used)
		}
	}
}

// skipper is a testing.TB whose Skip stops the call that asked for it, so
// that the skips this test provokes are not counted as its own.
type skipper struct{ testing.TB }

type skipped struct{}

func (skipper) Helper()                     {}
func (skipper) Skipf(string, ...any)        { panic(skipped{}) }
func (s skipper) Fatalf(f string, a ...any) { s.TB.Helper(); s.TB.Fatalf(f, a...) }

// usesModel reports whether RealModel returned the fetched model instead of
// skipping.
func usesModel(t *testing.T) (used bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(skipped); !ok {
				panic(r)
			}
			used = false
		}
	}()
	RealModel(skipper{t}, "all-MiniLM-L6-v2")
	return true
}
