package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The Python readback check (examples/readback/check.py): DuckDB, pyarrow
// and LanceDB read an embed output as written. A test reference only, in
// its own venv, which `make test-readback` makes.
const (
	readbackVenvEnv    = "SYNAPSE_READBACK_VENV" // the venv; default .cache/venv-readback of the checkout
	readbackRequireEnv = "SYNAPSE_REQUIRE_READBACK"
)

// readbackPython is the venv's python, or skips the test (fails it with
// SYNAPSE_REQUIRE_READBACK=1) when there is none.
func readbackPython(t *testing.T) string {
	t.Helper()
	venv := os.Getenv(readbackVenvEnv)
	if venv == "" {
		venv = filepath.Join("..", ".cache", "venv-readback")
	}
	py, err := filepath.Abs(filepath.Join(venv, "bin", "python"))
	if err == nil {
		_, err = os.Stat(py)
	}
	if err != nil {
		msg := fmt.Sprintf("no readback venv (%v): `make test-readback` creates it (pinned duckdb, pyarrow, lancedb) and runs this test", err)
		if os.Getenv(readbackRequireEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return py
}

// TestReadbackPython: an output of `embed --with-text` under the default
// name (Parquet), and the same as Arrow IPC, read by DuckDB, pyarrow and
// LanceDB as they come: each chunk's text is its slice of the embedded
// text by bytes and by code points (DuckDB's substring), chunk_id is
// unique, and every tool's top-10 is synapse search's.
func TestReadbackPython(t *testing.T) {
	py := readbackPython(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "corpus.jsonl")
	docs := nonASCIIDocs(60)
	writeJSONL(t, in, docs)
	var queries []map[string]any
	for i, d := range docs[:12] {
		queries = append(queries, map[string]any{"id": fmt.Sprintf("q%d", i), "text": d["title"]})
	}
	queries = append(queries, map[string]any{"id": "q-cjk", "text": "日本語 テキスト 👩‍🔬"})
	qin := filepath.Join(dir, "queries.jsonl")
	writeJSONL(t, qin, queries)
	model := tinyModel(t)
	fields := []string{"--text-field", "title", "--text-field", "text"}
	common := []string{"-m", model, "--workers", "1", "--threads", "1", "-q"}
	chunks := append([]string{"--chunk-tokens", "16"}, fields...) // several chunks a document

	// the default output name, in the working directory
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := synapseCmd(ctx, t, nil, append(append([]string{"embed", in, "--with-text"}, chunks...), common...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("embed with the default output: %v\n%s", err, out)
	}
	corpusOut := filepath.Join(dir, "corpus.vectors.parquet")
	if _, err := os.Stat(corpusOut); err != nil {
		t.Fatalf("the default output: %v", err)
	}
	arrowOut := filepath.Join(dir, "corpus.arrow")
	runSynapse(t, nil, append(append([]string{"embed", in, "--with-text", "-o", arrowOut}, chunks...), common...)...).wantCode(t, exitOK)
	qOut := filepath.Join(dir, "queries.parquet")
	runSynapse(t, nil, append([]string{"embed", qin, "-o", qOut}, common...)...).wantCode(t, exitOK)
	run := filepath.Join(dir, "run.jsonl")
	runSynapse(t, nil, "search", "--queries", qOut, "--corpus", corpusOut, "-k", "10", "-o", run, "-q").wantCode(t, exitOK)

	check := exec.CommandContext(ctx, py, filepath.Join("..", "examples", "readback", "check.py"),
		"--corpus", corpusOut, "--arrow", arrowOut, "--queries", qOut, "--run", run, "--docs", in,
		"--text-field", "title", "--text-field", "text", "-k", "10", "--lancedb-dir", filepath.Join(dir, "lancedb"))
	var out bytes.Buffer
	check.Stdout, check.Stderr = &out, &out
	if err := check.Run(); err != nil {
		t.Fatalf("check.py: %v\n%s", err, out.String())
	}
	t.Logf("check.py:\n%s", out.String())
}
