package cli

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/corpus"
)

// TestGenCorpus writes a small synthetic corpus, reads it back, and checks
// that the same seed gives the same rows and a bad --out is a usage error.
func TestGenCorpus(t *testing.T) {
	dir := t.TempDir()
	read := func(path string) []corpus.Doc {
		t.Helper()
		r, err := corpus.Open([]string{path}, corpus.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var docs []corpus.Doc
		for {
			d, err := r.Next()
			if err != nil {
				break
			}
			docs = append(docs, d)
		}
		return docs
	}
	a, b := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.parquet")
	runSynapse(t, nil, "gen-corpus", "--rows", "300", "--seed", "7", "--out", a).wantCode(t, exitOK)
	runSynapse(t, nil, "gen-corpus", "--rows", "300", "--seed", "7", "--out", b).wantCode(t, exitOK)
	da, db := read(a), read(b)
	if len(da) != 300 || len(db) != 300 {
		t.Fatalf("got %d and %d rows; want 300", len(da), len(db))
	}
	for i := range da {
		if da[i].ID != db[i].ID || da[i].Text != db[i].Text || da[i].ID != "synth-"+strconv.Itoa(i) {
			t.Fatalf("row %d: %q %q vs %q %q", i, da[i].ID, da[i].Text, db[i].ID, db[i].Text)
		}
	}
	res := runSynapse(t, nil, "gen-corpus", "--rows", "3", "--out", filepath.Join(dir, "c.jsonl"))
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "--out FILE.parquet") {
		t.Errorf("stderr %q; want the --out rule", res.stderr)
	}
}
