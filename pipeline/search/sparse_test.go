package search

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/pipeline/search/searchtest"
)

// randomSparse are n documents of 1 to maxChunks vectors over vocab terms,
// about one term in eight non-zero (positive, as SPLADE's weights), some
// chunks empty, and every tenth document a copy of the one before under
// another id (ties, broken by id).
func randomSparse(rng *rand.Rand, n, maxChunks, vocab int, prefix string) []doc {
	docs := make([]doc, n)
	for i := range docs {
		docs[i].ID = fmt.Sprintf("%s%05d", prefix, (i*7919)%n)
		if i%10 == 9 {
			docs[i].Vecs = docs[i-1].Vecs
			continue
		}
		for range 1 + rng.IntN(maxChunks) {
			v := make([]float32, vocab)
			if rng.IntN(20) > 0 {
				for j := range v {
					if rng.IntN(8) == 0 {
						v[j] = float32(rng.ExpFloat64())
					}
				}
			}
			docs[i].Vecs = append(docs[i].Vecs, v)
		}
	}
	return docs
}

// TestSparseSearch: over sparse queries and a sparse corpus (two files,
// Arrow and Parquet, in small batches), every query's hits are those of
// the sparse dot product computed directly in float64 from the same
// vectors, a document scored by its best chunk, ties by id; blocks of
// several sizes give the same hits.
func TestSparseSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 7))
	const vocab = 300
	dir := t.TempDir()
	corpus := randomSparse(rng, 400, 3, vocab, "d")
	queries := randomSparse(rng, 23, 1, vocab, "q")
	cpaths := []string{filepath.Join(dir, "c0.arrow"), filepath.Join(dir, "c1.parquet")}
	searchtest.WriteSparse(t, cpaths[0], corpus[:250], 37)
	searchtest.WriteSparse(t, cpaths[1], corpus[250:], 64)
	qpath := filepath.Join(dir, "q.arrow")
	searchtest.WriteSparse(t, qpath, queries, 10)
	want := exact(queries, corpus, 15, dot64)
	for _, block := range []int{1, 5, 1024} {
		t.Run(fmt.Sprint("block ", block), func(t *testing.T) {
			got := runSearch(t, Options{Queries: open(t, "--queries", []string{qpath}), Corpus: open(t, "--corpus", cpaths), K: 15, Block: block})
			sameHits(t, "sparse search", got, want, 0)
		})
	}
}

// TestSparseSearchRefused: dense queries against a sparse corpus, sparse
// ones against a dense corpus and --rescore are refused, saying why.
func TestSparseSearchRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	sp := filepath.Join(dir, "s.arrow")
	searchtest.WriteSparse(t, sp, randomSparse(rng, 20, 2, 16, "d"), 100)
	dense := writeVectors(t, dir, "dense", randomDocs(rng, 20, 1, 16), vector.Float32, nil, 1)
	tests := []struct {
		name            string
		queries, corpus []string
		rescore         int
		want            string
	}{
		{"dense queries, sparse corpus", dense, []string{sp}, 0, "dense queries cannot search a sparse corpus"},
		{"sparse queries, dense corpus", []string{sp}, dense, 0, "sparse queries (embed --vectors sparse) cannot search a dense corpus"},
		{"rescore", []string{sp}, []string{sp}, 4, "--rescore with a sparse corpus"},
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
