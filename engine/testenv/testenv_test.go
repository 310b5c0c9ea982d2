package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeTB records how a helper ended a test instead of ending this one.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Skip(args ...any) {
	f.skip = fmt.Sprint(args...)
	runtime.Goexit()
}

// call runs fn with a fakeTB in its own goroutine (Goexit ends only that).
func call(fn func(testing.TB)) *fakeTB {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

// TestBuildFailureFails: a package that does not compile fails the test
// that needs the binary; it is never a skip.
func TestBuildFailureFails(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":  "module broken\n\ngo 1.26\n",
		"main.go": "package main\n\nfunc main() { this does not compile }\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := goBuild(dir, filepath.Join(t.TempDir(), "bin"))
	if err == nil {
		t.Fatal("the broken package built")
	}
	f := call(func(tb testing.TB) { failBuild(tb, err, out) })
	if f.fatal == "" || f.skip != "" {
		t.Errorf("a broken build: fatal %q, skip %q; want a fatal failure", f.fatal, f.skip)
	}
	if !strings.Contains(f.fatal, "building") {
		t.Errorf("fatal message %q; want it to say the build failed", f.fatal)
	}
}

// TestMissingFixture: a missing fixture skips the test, or fails it under
// SYNAPSE_REQUIRE_FIXTURES=1, as CI runs.
func TestMissingFixture(t *testing.T) {
	t.Setenv("SYNAPSE_FIXTURES", filepath.Join(t.TempDir(), "none"))
	for _, require := range []string{"", "1"} {
		t.Setenv(RequireFixturesEnv, require)
		f := call(func(tb testing.TB) { Fixture(tb, "models", "ref-bert-embed.gguf") })
		switch {
		case require == "" && (f.skip == "" || f.fatal != ""):
			t.Errorf("without %s: skip %q, fatal %q; want a skip", RequireFixturesEnv, f.skip, f.fatal)
		case require == "1" && (f.fatal == "" || f.skip != ""):
			t.Errorf("with %s=1: skip %q, fatal %q; want a failure", RequireFixturesEnv, f.skip, f.fatal)
		}
		if !strings.Contains(f.skip+f.fatal, "needs fixtures:") {
			t.Errorf("message %q; want it to start with needs fixtures:", f.skip+f.fatal)
		}
	}
	if HaveFixtures() {
		t.Error("HaveFixtures with SYNAPSE_FIXTURES pointing nowhere")
	}
}

// TestLlamaLibExplicit: a SYNAPSE_LLAMA_LIB that holds no libraries is a
// failure, never a skip.
func TestLlamaLibExplicit(t *testing.T) {
	t.Setenv("SYNAPSE_LLAMA_LIB", t.TempDir())
	f := call(func(tb testing.TB) { LlamaLib(tb) })
	if f.fatal == "" || f.skip != "" {
		t.Errorf("skip %q, fatal %q; want a failure", f.skip, f.fatal)
	}
}
