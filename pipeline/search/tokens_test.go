package search

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/pipeline/search/searchtest"
)

// randomTokens are n documents of 1 to maxChunks chunks of 1 to maxTokens
// unit token vectors (flattened, dims each), every tenth document a copy
// of the one before under another id (ties, broken by id).
func randomTokens(rng *rand.Rand, n, maxChunks, maxTokens, dims int, prefix string) []doc {
	docs := make([]doc, n)
	for i := range docs {
		docs[i].ID = fmt.Sprintf("%s%05d", prefix, (i*7919)%n)
		if i%10 == 9 && i > 0 {
			docs[i].Vecs = docs[i-1].Vecs
			continue
		}
		for range 1 + rng.IntN(maxChunks) {
			var v []float32
			for range 1 + rng.IntN(maxTokens) {
				v = append(v, randomUnit(rng, dims)...)
			}
			docs[i].Vecs = append(docs[i].Vecs, v)
		}
	}
	return docs
}

// maxSim64 is ColBERT's MaxSim of a query's and a chunk's flattened token
// vectors (dims each), brute force in float64: the sum over the query's
// tokens of the largest dot product with one of the chunk's.
func maxSim64(dims int) func(q, c []float32) float64 {
	return func(q, c []float32) float64 {
		var sum float64
		for i := 0; i < len(q); i += dims {
			best := math.Inf(-1)
			for j := 0; j < len(c); j += dims {
				best = max(best, dot64(q[i:i+dims], c[j:j+dims]))
			}
			sum += best
		}
		return sum
	}
}

// TestMaxSimSearch: over token-vector queries and corpus (two files, Arrow
// and Parquet, in small batches; 12 dims, so that the kernels' tails run),
// every query's hits are those of MaxSim computed by brute force in
// float64 from the same vectors, a document scored by its best chunk, ties
// by id, within 1e-5; blocks of several sizes and 1 to 3 threads give the
// same hits, and so does a float16 corpus to float16's precision.
func TestMaxSimSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 9))
	const dims = 12
	dir := t.TempDir()
	corpus := randomTokens(rng, 300, 3, 9, dims, "d")
	queries := randomTokens(rng, 17, 1, 7, dims, "q")
	cpaths := []string{filepath.Join(dir, "c0.arrow"), filepath.Join(dir, "c1.parquet")}
	searchtest.WriteTokens(t, cpaths[0], corpus[:180], dims, vector.Float32, false, 37)
	searchtest.WriteTokens(t, cpaths[1], corpus[180:], dims, vector.Float32, false, 64)
	qpath := filepath.Join(dir, "q.arrow")
	searchtest.WriteTokens(t, qpath, queries, dims, vector.Float32, true, 10)
	want := exact(queries, corpus, 15, maxSim64(dims))
	for _, c := range []struct{ block, threads int }{{1, 1}, {5, 1}, {1024, 1}, {1024, 3}, {5, 2}} {
		t.Run(fmt.Sprintf("block %d, %d threads", c.block, c.threads), func(t *testing.T) {
			got := runSearch(t, Options{Queries: open(t, "--queries", []string{qpath}), Corpus: open(t, "--corpus", cpaths), K: 15, Block: c.block, Threads: c.threads})
			sameHits(t, "MaxSim search", got, want, 1e-5)
		})
	}
	t.Run("float16 corpus", func(t *testing.T) {
		half := filepath.Join(dir, "c16.arrow")
		searchtest.WriteTokens(t, half, corpus, dims, vector.Float16, false, 50)
		got := runSearch(t, Options{Queries: open(t, "--queries", []string{qpath}), Corpus: open(t, "--corpus", []string{half}), K: 15, Block: 8})
		for q := range want {
			if got[q][0].Doc != want[q][0].Doc || math.Abs(float64(got[q][0].Score-want[q][0].Score)) > 1e-2 {
				t.Errorf("query %d: best %s %v; want %s %v", q, got[q][0].Doc, got[q][0].Score, want[q][0].Doc, want[q][0].Score)
			}
		}
	})
}

// TestMaxSimSearchRefused: dense queries against a token corpus, documents
// as queries, queries as a corpus and --rescore are refused, saying why.
func TestMaxSimSearchRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 3))
	dir := t.TempDir()
	docs := randomTokens(rng, 20, 2, 4, 8, "d")
	c, q := filepath.Join(dir, "c.arrow"), filepath.Join(dir, "q.arrow")
	searchtest.WriteTokens(t, c, docs, 8, vector.Float32, false, 100)
	searchtest.WriteTokens(t, q, docs, 8, vector.Float32, true, 100)
	dense := writeVectors(t, dir, "dense", randomDocs(rng, 20, 1, 8), vector.Float32, nil, 1)
	tests := []struct {
		name            string
		queries, corpus []string
		rescore         int
		want            string
	}{
		{"dense queries", dense, []string{c}, 0, "embed the queries with --vectors tokens --as-query"},
		{"token queries, dense corpus", []string{q}, dense, 0, "cannot search a corpus of one vector a chunk"},
		{"documents as queries", []string{c}, []string{c}, 0, "the queries were embedded as documents"},
		{"queries as corpus", []string{q}, []string{q}, 0, "the corpus holds token vectors of queries"},
		{"rescore", []string{q}, []string{c}, 4, "--rescore with a token-vector corpus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Queries: open(t, "--queries", tt.queries), Corpus: open(t, "--corpus", tt.corpus), Rescore: tt.rescore}
			err := Check(&o)
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want ErrInput saying %q", err, tt.want)
			}
		})
	}
}
