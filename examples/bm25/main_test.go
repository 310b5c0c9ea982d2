package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestBM25 checks one score worked by hand and the run's order: three
// documents, the query "cat" in one of them once.
func TestBM25(t *testing.T) {
	docs := []doc{{"a", "the cat sat"}, {"b", "the dog sat down"}, {"c", "the dog"}}
	ix := newIndex(docs)
	s := ix.scores("cat cat")
	// idf = ln(1 + (3−1+0.5)/(1+0.5)); tf 1, |a| = 3, avg 3: norm = k1.
	idf := math.Log(1 + 2.5/1.5)
	if want := idf * 1 * (k1 + 1) / (1 + k1); math.Abs(s[0]-want) > 1e-12 || len(s) != 1 {
		t.Fatalf("scores %v; want only doc a at %v (a repeated query term counts once)", s, want)
	}
	var out bytes.Buffer
	if err := writeRun(&out, ix, []doc{{"q1", "dog"}}, 10); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// c is shorter than b, so it ranks first.
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "q1 Q0 c 1 ") || !strings.HasPrefix(lines[1], "q1 Q0 b 2 ") {
		t.Fatalf("run:\n%s\nwant c then b", out.String())
	}
}
