package main

import (
	"bytes"
	"os"
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
		"1 set SYNAPSE_RSS_ROWS to measure); race detector off: no C compiler\n"
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
