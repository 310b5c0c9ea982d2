package cli

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/pipeline/search/searchtest"
)

// randomSearchDocs are n documents of one random vector each.
func randomSearchDocs(rng *rand.Rand, prefix string, n, dims int) []searchtest.Doc {
	docs := make([]searchtest.Doc, n)
	for i := range docs {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		docs[i] = searchtest.Doc{ID: fmt.Sprintf("%s%03d", prefix, i), Vecs: [][]float32{v}}
	}
	return docs
}

// TestSearchStdout: -o - writes the TREC run the .trec file holds, byte
// for byte, to stdout, and the summary to stderr.
func TestSearchStdout(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	searchtest.Write(t, p("q.arrow"), randomSearchDocs(rng, "q", 7, 16), vector.Float32, nil, 100)
	searchtest.Write(t, p("c.arrow"), randomSearchDocs(rng, "d", 90, 16), vector.Float32, nil, 40)
	args := []string{"search", "--queries", p("q.arrow"), "--corpus", p("c.arrow"), "-k", "12"}
	code, _, stderr := runCLI(t, append(args, "-o", p("run.trec"))...)
	if code != 0 {
		t.Fatalf("-o run.trec: exit %d; want 0\n%s", code, stderr)
	}
	want, err := os.ReadFile(p("run.trec"))
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, append(args, "-o", "-")...)
	if code != 0 {
		t.Fatalf("-o -: exit %d; want 0\n%s", code, stderr)
	}
	if stdout != string(want) {
		t.Errorf("-o -: stdout\n%s\nwant the .trec file's\n%s", stdout, want)
	}
	if lines := strings.Count(stdout, "\n"); lines != 7*12 {
		t.Errorf("-o -: got %d lines; want %d", lines, 7*12)
	}
	if !strings.Contains(stderr, "searched") || !strings.Contains(stderr, "7 queries") || !strings.Contains(stderr, "the run to stdout") {
		t.Errorf("-o -: stderr %q; want the summary", stderr)
	}
}

// TestSearchNonFiniteExit: a NaN query dimension or an infinite corpus
// value exits 2 naming the file, the row and the id, and writes no run.
func TestSearchNonFiniteExit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	qs, cs := randomSearchDocs(rng, "q", 5, 8), randomSearchDocs(rng, "d", 60, 8)
	searchtest.Write(t, p("q.arrow"), qs, vector.Float32, nil, 100)
	searchtest.Write(t, p("c.arrow"), cs, vector.Float32, nil, 25)
	qs[3].Vecs[0][2] = float32(math.NaN())
	searchtest.Write(t, p("q-nan.arrow"), qs, vector.Float32, nil, 100)
	cs[41].Vecs[0][5] = float32(math.Inf(1))
	searchtest.Write(t, p("c-inf.parquet"), cs, vector.Float32, nil, 25)
	for _, c := range []struct {
		queries, corpus string
		want            []string
	}{
		{"q-nan.arrow", "c.arrow", []string{"--queries", p("q-nan.arrow"), "row 3 ", "id q003", "NaN"}},
		{"q.arrow", "c-inf.parquet", []string{"--corpus", p("c-inf.parquet"), "row 41 ", "id d041", "+Inf"}},
	} {
		out := p(c.corpus + ".trec")
		code, _, stderr := runCLI(t, "search", "--queries", p(c.queries), "--corpus", p(c.corpus), "-o", out)
		if code != 2 {
			t.Errorf("%s × %s: exit %d; want 2\n%s", c.queries, c.corpus, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s × %s: stderr %q; want it to name %q", c.queries, c.corpus, stderr, w)
			}
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s × %s: the refused search wrote %s", c.queries, c.corpus, out)
		}
	}
}
