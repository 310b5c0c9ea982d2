package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/tokenize"
)

// TestExitCodesEndToEnd runs one case per row of the README's exit code table, for
// the mistakes a user makes most: each gets its code, the message names the
// culprit, and a run that never started prints no summary.
func TestExitCodesEndToEnd(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t)
	good := filepath.Join(dir, "good.jsonl")
	writeJSONL(t, good, []map[string]any{{"id": "a", "text": "hello world"}, {"id": "b", "text": "the cell"}})
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"id\": \"a\", \"text\": \"hello\"}\n{broken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	many := filepath.Join(dir, "many.jsonl")
	var docs []map[string]any
	for i := range 20 {
		// distinct texts: --dedup would send one identical text once
		docs = append(docs, map[string]any{"id": fmt.Sprint(i), "text": fmt.Sprintf("hello world %d", i)})
	}
	writeJSONL(t, many, docs)
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	notModel := filepath.Join(dir, "not-a-model.gguf")
	if err := os.WriteFile(notModel, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	cls, _ := tok.Affixes() // in every chunk: every request crashes
	out := func(name string) string { return filepath.Join(dir, name) }
	embed := func(args ...string) []string {
		return append([]string{"embed", "--workers", "1", "--threads", "1"}, args...)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		stderr  string // in stderr
		summary bool   // a summary on stdout
	}{
		{"success", embed(good, "-m", model, "-o", out("ok.arrow")), exitOK, "", true},
		{"rows in errors", embed(bad, "-m", model, "-o", out("partial.arrow")), exitPartial, "1 of 2 rows could not be embedded", true},
		{"empty input", embed(empty, "-m", model, "-o", out("empty.arrow")), exitOK, "the input held no records", true},
		{"unknown flag", embed(good, "-m", model, "--frobnicate"), exitUsage, "frobnicate", false},
		{"no model", embed(good), exitUsage, "no model", false},
		{"missing input", embed(out("nope.jsonl"), "-m", model), exitUsage, "nope.jsonl", false},
		{"missing model", embed(good, "-m", out("nope.gguf"), "-o", out("x.arrow")), exitUsage, "nope.gguf", false},
		{"not a model", embed(good, "-m", notModel, "-o", out("x.arrow")), exitUsage, "not a usable model", false},
		{"unknown output format", embed(good, "-m", model, "-o", out("x.csv")), exitUsage, `".csv"`, false},
		{"output directory missing", embed(good, "-m", model, "-o", out("no/such/dir/x.arrow")), exitUsage, "no/such/dir", false},
		{"output over input", embed(good, "-m", model, "-o", good), exitUsage, "the run would overwrite the input", false},
		{"dims too large", embed(good, "-m", model, "-o", out("x.arrow"), "--dims", "4096"), exitUsage, "--dims 4096 is larger", false},
		{"chunk too large", embed(good, "-m", model, "-o", out("x.arrow"), "--chunk-tokens", "100000"), exitUsage, "--chunk-tokens 100000", false},
		{"bad chaos", embed(good, "-m", model, "-o", out("x.arrow"), "--chaos", "frob=1"), exitUsage, "frob", false},
		{"quarantined model", embed(many, "-m", model, "-o", out("q.arrow"), "--chaos", fmt.Sprintf("abort-on-token=%d", cls[0])),
			exitFatal, "quarantined", true},
		{"tokenize: missing model", []string{"tokenize", "-m", out("nope.gguf")}, exitUsage, "nope.gguf", false},
		{"tokenize: not a model", []string{"tokenize", "-m", notModel}, exitUsage, "not a usable model", false},
		{"inspect: missing model", []string{"inspect", out("nope.gguf")}, exitUsage, "nope.gguf", false},
		{"inspect: not a model", []string{"inspect", notModel}, exitUsage, "not a usable model", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runSynapse(t, nil, tc.args...)
			res.wantCode(t, tc.code)
			if !strings.Contains(res.stderr, tc.stderr) {
				t.Errorf("stderr does not say %q:\n%s", tc.stderr, res.stderr)
			}
			if got := strings.Contains(res.stdout, "rows read"); got != tc.summary {
				t.Errorf("summary printed: %v; want %v\nstdout:\n%s", got, tc.summary, res.stdout)
			}
		})
	}
}

// TestChaosNotInherited: SYNAPSE_CHAOS in the user's environment arms
// nothing (a poisoned token is embedded like any other); --chaos arms the
// drills and the run says so.
func TestChaosNotInherited(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t)
	in := filepath.Join(dir, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "a", "text": "hello world"}})
	tok, err := tokenize.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	cls, _ := tok.Affixes()
	drill := fmt.Sprintf("abort-on-token=%d", cls[0])
	res := runSynapse(t, []string{"SYNAPSE_CHAOS=" + drill}, "embed", in, "-m", model, "-o", filepath.Join(dir, "a.arrow"), "--workers", "1")
	res.wantCode(t, exitOK)
	if strings.Contains(res.stdout+res.stderr, "CHAOS") || strings.Contains(res.stderr, "chaos") {
		t.Errorf("a stray SYNAPSE_CHAOS was acted on:\n%s\n%s", res.stdout, res.stderr)
	}
	res = runSynapse(t, nil, "embed", in, "-m", model, "-o", filepath.Join(dir, "b.arrow"), "--workers", "1", "--chaos", "delay=1ms")
	res.wantCode(t, exitOK)
	if !strings.Contains(res.stdout, "CHAOS DRILLS") || !strings.Contains(res.stderr, "chaos drills armed") {
		t.Errorf("a run with drills does not say so loudly:\nstdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	}
}
