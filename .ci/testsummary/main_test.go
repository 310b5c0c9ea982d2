package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// events is a `go test -json` run: a pass, a skip for a missing fixture in
// two tests, another skip, a failure with its output, a build failure.
const events = `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:12: needs fixtures: the shared fixtures are not at /x (set SYNAPSE_FIXTURES)\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestC/sub","Output":"    c_test.go:3: needs fixtures: reference: open /x/y: no such file\n"}
{"Action":"skip","Package":"p","Test":"TestC/sub"}
{"Action":"output","Package":"p","Test":"TestD","Output":"    d_test.go:9: set SYNAPSE_RSS_ROWS to measure\n"}
{"Action":"skip","Package":"p","Test":"TestD"}
{"Action":"output","Package":"p","Test":"TestE","Output":"    e_test.go:1: got 2; want 3\n"}
{"Action":"output","Package":"p","Test":"TestE","Output":"--- FAIL: TestE (0.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestE"}
{"Action":"output","Package":"p","Output":"FAIL\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}
{"Action":"fail","Package":"p"}
{"ImportPath":"q","Action":"build-output","Output":"q/x.go:1:1: syntax error\n"}
{"ImportPath":"q","Action":"build-fail"}
`

func TestFilterAndSummary(t *testing.T) {
	log := filepath.Join(t.TempDir(), "events.json")
	var out bytes.Buffer
	failed, err := filter(strings.NewReader(events), &out, log)
	if err != nil || !failed {
		t.Fatalf("filter: failed %v, err %v; want a failure reported", failed, err)
	}
	got := out.String()
	for _, want := range []string{"got 2; want 3", "--- FAIL: TestE", "FAIL\tp\t0.1s", "q/x.go:1:1: syntax error"} {
		if !strings.Contains(got, want) {
			t.Errorf("filter output %q; want it to show %q", got, want)
		}
	}
	for _, not := range []string{"=== RUN", "needs fixtures", "SYNAPSE_RSS_ROWS"} {
		if strings.Contains(got, not) {
			t.Errorf("filter output %q; want it without %q (passed and skipped tests are quiet)", got, not)
		}
	}
	if err := appendNote(log, "race detector off: no C compiler"); err != nil {
		t.Fatal(err)
	}
	var sum bytes.Buffer
	if err := summarize(&sum, []string{log}); err != nil {
		t.Fatal(err)
	}
	want := "tests: 1 passed, 1 failed, 3 skipped (2 need the shared fixtures (../shared/fixtures or SYNAPSE_FIXTURES); " +
		"1 set SYNAPSE_RSS_ROWS to measure); failed outside any test: q (build failed); race detector off: no C compiler\n"
	if sum.String() != want {
		t.Errorf("summary:\n got %q\nwant %q", sum.String(), want)
	}
}

func TestFilterPassing(t *testing.T) {
	in := `{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.1s\n"}
{"Action":"pass","Package":"p"}
`
	var out bytes.Buffer
	failed, err := filter(strings.NewReader(in), &out, "")
	if err != nil || failed || out.String() != "ok  \tp\t0.1s\n" {
		t.Errorf("filter: %q, failed %v, err %v; want only the ok line", out.String(), failed, err)
	}
	if _, err := os.Stat("events.json"); err == nil {
		t.Error("a log was written without -log")
	}
}

// TestTimedOutAndFailing runs the Makefile's test-packages recipe for real
// on a module of its own: one package with a passing and a failing test,
// one (in TEST_LONG, with a 3 s timeout) whose test outlives it. Both
// failures must be shown and counted, the timed-out test by name, and the
// recipe must fail.
func TestTimedOutAndFailing(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skipf("needs make: %v", err)
	}
	mod := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module tox\n\ngo 1.22\n")
	write("fast/fast_test.go", `package fast
import "testing"
func TestPasses(t *testing.T) {}
func TestFails(t *testing.T) { t.Fatal("got 2; want 3") }
`)
	write("slow/slow_test.go", `package slow
import ("testing"; "time")
func TestQuick(t *testing.T) {}
func TestHangs(t *testing.T) { t.Run("forever", func(t *testing.T) { time.Sleep(time.Hour) }) }
`)
	bin := filepath.Join(mod, "testsummary")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	events := filepath.Join(mod, "events.json")
	cmd := exec.Command("make", "-s", "--no-print-directory", "-C", filepath.Join("..", ".."), "test-packages",
		"TEST_MODULE="+mod, "TEST_LONG=slow=3s", "TEST_TIMEOUT=2m", "TEST_SKIP=", "TEST_EXTRA=",
		"TEST_EVENTS="+events, "TESTSUMMARY="+bin)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("make test-packages passed; want it to fail\n%s", out)
	}
	for _, want := range []string{"got 2; want 3", "--- FAIL: TestHangs/forever (still running when package tox/slow failed: timed out or crashed)",
		"panic: test timed out after 3s"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make test-packages output lacks %q:\n%s", want, out)
		}
	}
	var sum bytes.Buffer
	if err := summarize(&sum, []string{events}); err != nil {
		t.Fatal(err)
	}
	want := "tests: 2 passed, 3 failed, 0 skipped; still running when their package failed (timed out or crashed): tox/slow TestHangs/forever\n"
	if sum.String() != want {
		t.Errorf("summary:\n got %q\nwant %q", sum.String(), want)
	}
}
