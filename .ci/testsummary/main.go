// Command testsummary filters `go test -json` for `make test` and ends the
// run with one line that counts the tests passed, failed and skipped, and
// says why tests were skipped, so that a green run cannot hide skips.
//
//	go test -json ./... | go run ./.ci/testsummary -log events.json
//	go run ./.ci/testsummary -summary events.json
//
// As a filter it prints what a plain `go test` prints for packages (ok,
// FAIL, build errors) and the output of failed tests only, appends every
// event to the -log file, and exits 1 if a test or a build failed. -note
// appends a line for the summary (e.g. that the race detector was off).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is one `go test -json` line (test2json's TestEvent), or a note.
type event struct {
	Action     string
	Package    string `json:",omitempty"`
	ImportPath string `json:",omitempty"` // build-output, build-fail
	Test       string `json:",omitempty"`
	Output     string `json:",omitempty"`
}

func main() {
	logPath := flag.String("log", "", "append every event to this file")
	summary := flag.Bool("summary", false, "print the one-line summary of the event files named as arguments")
	note := flag.String("note", "", "append a note for the summary to the -log file and exit")
	flag.Parse()
	var err error
	switch {
	case *note != "":
		err = appendNote(*logPath, *note)
	case *summary:
		err = summarize(os.Stdout, flag.Args())
	default:
		var failed bool
		failed, err = filter(os.Stdin, os.Stdout, *logPath)
		if err == nil && failed {
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
		os.Exit(2)
	}
}

func appendNote(path, text string) error {
	if path == "" {
		return fmt.Errorf("-note needs -log")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	line, _ := json.Marshal(event{Action: "note", Output: text})
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// filter copies the package results and the output of failed tests from
// in to out and reports whether anything failed. A test still running when
// its package fails (the package timed out, or a test crashed it) is shown
// as failed with the head of its output: go test reports no result for it.
func filter(in io.Reader, out io.Writer, logPath string) (failed bool, err error) {
	var log *os.File
	if logPath != "" {
		if log, err = os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			return false, err
		}
		defer log.Close()
	}
	held := map[string][]string{} // package/test → output so far
	open := runs{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if log != nil {
			if _, err := log.Write(append(line, '\n')); err != nil {
				return failed, fmt.Errorf("log: %w", err)
			}
		}
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(out, "%s\n", line) // not JSON: go test's own complaint
			continue
		}
		open.track(e)
		key := e.Package + "/" + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Test == "" && e.Action == "output":
			if e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output)
			}
		case e.Test == "" && e.Action == "fail":
			failed = true
			for _, test := range open.leaves(e.Package) {
				fmt.Fprintf(out, "--- FAIL: %s (still running when package %s failed: timed out or crashed)\n", test, e.Package)
				fmt.Fprint(out, head(held[e.Package+"/"+test], 40))
			}
			open.end(e.Package)
		case e.Action == "output":
			held[key] = append(held[key], e.Output)
		case e.Action == "fail":
			failed = true
			fmt.Fprint(out, strings.Join(held[key], ""))
			delete(held, key)
		case e.Action == "pass" || e.Action == "skip":
			delete(held, key)
		}
	}
	return failed, sc.Err()
}

// head is the first n lines of a test's output, saying how many it left.
func head(output []string, n int) string {
	if len(output) <= n {
		return strings.Join(output, "")
	}
	return strings.Join(output[:n], "") + fmt.Sprintf("\t… %d more lines in the event log\n", len(output)-n)
}

// runs are the tests of each package that started and have no result yet.
type runs map[string]map[string]bool

// track notes a test's start and its result.
func (r runs) track(e event) {
	if e.Test == "" {
		return
	}
	switch e.Action {
	case "run":
		if r[e.Package] == nil {
			r[e.Package] = map[string]bool{}
		}
		r[e.Package][e.Test] = true
	case "pass", "fail", "skip":
		delete(r[e.Package], e.Test)
	}
}

// leaves are the package's tests still running that have no subtest still
// running, sorted: the tests a timeout or a crash stopped.
func (r runs) leaves(pkg string) []string {
	var out []string
	for test := range r[pkg] {
		leaf := true
		for other := range r[pkg] {
			if strings.HasPrefix(other, test+"/") {
				leaf = false
				break
			}
		}
		if leaf {
			out = append(out, test)
		}
	}
	sort.Strings(out)
	return out
}

// end forgets a finished package's tests.
func (r runs) end(pkg string) { delete(r, pkg) }

// tally counts the tests of one or more runs.
type tally struct {
	passed, failed, skipped int
	reasons                 map[string]int // why tests were skipped
	notes                   []string
	stopped                 []string // "pkg Test": running when its package failed
	broken                  []string // packages that failed outside any test
}

// fileLine is the "file_test.go:12: " prefix of a t.Skip message.
var fileLine = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// reason is the first line of a skipped test's own message, or "no reason
// given"; every missing fixture counts as one reason.
func reason(output []string) string {
	for _, o := range output {
		s := strings.TrimSpace(o)
		if s == "" || strings.HasPrefix(s, "=== ") || strings.HasPrefix(s, "--- SKIP") {
			continue
		}
		s = strings.TrimSpace(fileLine.ReplaceAllString(s, ""))
		if strings.HasPrefix(s, "needs fixtures:") {
			return "need the shared fixtures (../shared/fixtures or SYNAPSE_FIXTURES)"
		}
		return s
	}
	return "no reason given"
}

func (t *tally) read(r io.Reader) error {
	output := map[string][]string{}
	open := runs{}
	failedIn := map[string]int{} // package → tests failed
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		open.track(e)
		key := e.Package + "/" + e.Test
		switch {
		case e.Action == "note":
			t.notes = append(t.notes, e.Output)
		case e.Action == "build-fail":
			t.broken = append(t.broken, strings.Fields(e.ImportPath + " ?")[0]+" (build failed)")
		case e.Test == "" && e.Action == "fail":
			t.packageFailed(e.Package, open, failedIn[e.Package])
		case e.Test == "":
		case e.Action == "output":
			output[key] = append(output[key], e.Output)
		case e.Action == "pass":
			t.passed++
		case e.Action == "fail":
			t.failed++
			failedIn[e.Package]++
		case e.Action == "skip":
			t.skipped++
			t.reasons[reason(output[key])]++
		}
	}
	return sc.Err()
}

// packageFailed counts the tests still running when package pkg failed as
// failed, naming the innermost; a package that failed with no test failed
// or running failed outside any test (TestMain, init, or its build).
func (t *tally) packageFailed(pkg string, open runs, testsFailed int) {
	leaves := open.leaves(pkg)
	t.failed += len(open[pkg])
	for _, test := range leaves {
		t.stopped = append(t.stopped, pkg+" "+test)
	}
	open.end(pkg)
	if len(leaves) == 0 && testsFailed == 0 && !t.builtBroken(pkg) {
		t.broken = append(t.broken, pkg)
	}
}

// builtBroken reports whether pkg's failure is already counted as a build
// failure.
func (t *tally) builtBroken(pkg string) bool {
	for _, b := range t.broken {
		if b == pkg+" (build failed)" {
			return true
		}
	}
	return false
}

// line is the summary: counts, then the skip reasons, most frequent first.
func (t *tally) line() string {
	s := fmt.Sprintf("tests: %d passed, %d failed, %d skipped", t.passed, t.failed, t.skipped)
	var rs []string
	for r := range t.reasons {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool {
		if t.reasons[rs[i]] != t.reasons[rs[j]] {
			return t.reasons[rs[i]] > t.reasons[rs[j]]
		}
		return rs[i] < rs[j]
	})
	for i, r := range rs {
		rs[i] = fmt.Sprintf("%d %s", t.reasons[r], r)
	}
	if len(rs) > 0 {
		s += " (" + strings.Join(rs, "; ") + ")"
	}
	if len(t.stopped) > 0 {
		s += "; still running when their package failed (timed out or crashed): " + strings.Join(t.stopped, ", ")
	}
	if len(t.broken) > 0 {
		s += "; failed outside any test: " + strings.Join(t.broken, ", ")
	}
	for _, n := range t.notes {
		s += "; " + n
	}
	return s
}

func summarize(w io.Writer, paths []string) error {
	t := &tally{reasons: map[string]int{}}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = t.read(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	_, err := fmt.Fprintln(w, t.line())
	return err
}
