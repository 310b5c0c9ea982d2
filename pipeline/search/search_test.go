package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/pipeline/search/searchtest"
)

// doc is a test document: its id and its chunks' float32 vectors.
type doc = searchtest.Doc

func randomUnit(rng *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	var s float64
	for i := range v {
		x := rng.NormFloat64()
		v[i], s = float32(x), s+x*x
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(s))
	}
	return v
}

// randomDocs are n documents of 1 to maxChunks random unit vectors, ids in
// a shuffled order.
func randomDocs(rng *rand.Rand, n, maxChunks, dims int) []doc {
	docs := make([]doc, n)
	for i := range docs {
		docs[i].ID = fmt.Sprintf("d%05d", (i*7919)%n)
		for range 1 + rng.IntN(maxChunks) {
			docs[i].Vecs = append(docs[i].Vecs, randomUnit(rng, dims))
		}
	}
	return docs
}

// writeVectors writes docs as an embedding output of dtype d (ranges for
// int8/uint8), parts files of about equal size when parts > 1.
func writeVectors(t *testing.T, dir, name string, docs []doc, d vector.Dtype, r *vector.Ranges, parts int) []string {
	t.Helper()
	return writeBatches(t, dir, name, docs, d, r, parts, 100)
}

// writeBatches is writeVectors with record batches of batchRows rows.
func writeBatches(t *testing.T, dir, name string, docs []doc, d vector.Dtype, r *vector.Ranges, parts, batchRows int) []string {
	t.Helper()
	var paths []string
	per := (len(docs) + parts - 1) / parts
	for p := range parts {
		path := filepath.Join(dir, fmt.Sprintf("%s.%d.arrow", name, p))
		if p%2 == 1 {
			path = strings.TrimSuffix(path, ".arrow") + ".parquet"
		}
		searchtest.Write(t, path, docs[p*per:min(len(docs), (p+1)*per)], d, r, batchRows)
		paths = append(paths, path)
	}
	return paths
}

// exact is the independent computation: every query against every chunk
// in float64 (or exact integers), a document's score its best chunk's,
// sorted by score and then id.
func exact(queries []doc, corpus []doc, k int, sim func(q, c []float32) float64) [][]Hit {
	out := make([][]Hit, len(queries))
	for qi, q := range queries {
		type scored struct {
			id string
			s  float64
		}
		var all []scored
		for _, d := range corpus {
			best := math.Inf(-1)
			for _, v := range d.Vecs {
				best = max(best, sim(q.Vecs[0], v))
			}
			all = append(all, scored{d.ID, best})
		}
		slices.SortFunc(all, func(a, b scored) int {
			switch {
			case a.s > b.s:
				return -1
			case a.s < b.s:
				return 1
			}
			return strings.Compare(a.id, b.id)
		})
		for _, s := range all[:k] {
			out[qi] = append(out[qi], Hit{Doc: s.id, Score: float32(s.s)})
		}
	}
	return out
}

func dot64(q, c []float32) float64 {
	var s float64
	for i := range q {
		s += float64(q[i]) * float64(c[i])
	}
	return s
}

func runSearch(t *testing.T, o Options) [][]Hit {
	t.Helper()
	var got [][]Hit
	if _, err := Run(context.Background(), o, func(_ string, hits []Hit) error { got = append(got, hits); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func open(t *testing.T, what string, paths []string) *Vectors {
	t.Helper()
	v, err := OpenVectors(context.Background(), what, paths)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// sameHits compares ids in order and scores within tol.
func sameHits(t *testing.T, what string, got, want [][]Hit, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d queries; want %d", what, len(got), len(want))
	}
	for q := range want {
		if len(got[q]) != len(want[q]) {
			t.Fatalf("%s: query %d: %d hits; want %d", what, q, len(got[q]), len(want[q]))
		}
		for i := range want[q] {
			g, w := got[q][i], want[q][i]
			if g.Doc != w.Doc || math.Abs(float64(g.Score-w.Score)) > tol {
				t.Fatalf("%s: query %d rank %d: got %s %v; want %s %v", what, q, i+1, g.Doc, g.Score, w.Doc, w.Score)
			}
		}
	}
}

func TestSearchFloatEqualsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const dims = 48
	corpus := randomDocs(rng, 3000, 3, dims)
	queries := randomDocs(rng, 70, 1, dims)
	for i := range queries {
		queries[i].ID = fmt.Sprintf("q%d", i)
	}
	dir := t.TempDir()
	qs := open(t, "--queries", writeVectors(t, dir, "q", queries, vector.Float32, nil, 1))
	for _, parts := range []int{1, 3} {
		cs := open(t, "--corpus", writeVectors(t, dir, fmt.Sprint("c", parts), corpus, vector.Float32, nil, parts))
		want := exact(queries, corpus, 25, dot64)
		// Blocks of 16 queries: the corpus is streamed five times.
		got := runSearch(t, Options{Queries: qs, Corpus: cs, K: 25, Block: 16, Threads: 3})
		sameHits(t, fmt.Sprintf("float32, %d parts", parts), got, want, 1e-5)
	}
}

func TestSearchQuantizedEqualsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const dims = 40 // binary: 5 bytes, one partial uint64 word
	corpus := randomDocs(rng, 2000, 2, dims)
	queries := randomDocs(rng, 30, 1, dims)
	r := vector.NewRanges(dims)
	for _, d := range corpus {
		for _, v := range d.Vecs {
			r.Observe(v)
		}
	}
	dir := t.TempDir()
	qs := open(t, "--queries", writeVectors(t, dir, "q", queries, vector.Float32, nil, 1))
	for _, d := range []vector.Dtype{vector.Int8, vector.Uint8, vector.Binary, vector.UBinary, vector.Float16} {
		q, _ := vector.NewQuantizer(d, dims, r)
		sim := func(a, b []float32) float64 { // independent: codes from the rule, exact integer arithmetic
			x, y := q.Append(nil, a), q.Append(nil, b)
			var s int
			switch d {
			case vector.Int8:
				for i := range x {
					s += int(int8(x[i])) * int(int8(y[i]))
				}
			case vector.Uint8:
				for i := range x {
					s += int(x[i]) * int(y[i])
				}
			case vector.Float16: // the float32 query against the half-precision corpus
				return dot64(a, vector.Decode(nil, d, dims, y, nil))
			default:
				for i := range x {
					s += 8 - bits.OnesCount8(x[i]^y[i])
				}
			}
			return float64(s)
		}
		cs := open(t, "--corpus", writeVectors(t, dir, string(d), corpus, d, rangesIf(d, r), 2))
		want := exact(queries, corpus, 20, sim)
		got := runSearch(t, Options{Queries: qs, Corpus: cs, K: 20, Block: 7})
		sameHits(t, string(d), got, want, 1e-5)
	}
}

func rangesIf(d vector.Dtype, r *vector.Ranges) *vector.Ranges {
	if d.Ranged() {
		return r
	}
	return nil
}

// TestSearchRescore: binary with --rescore against the float32 vectors
// equals the exact float search re-ranked within the binary candidates.
func TestSearchRescore(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const dims, k, n = 64, 10, 4
	corpus := randomDocs(rng, 1500, 2, dims)
	queries := randomDocs(rng, 20, 1, dims)
	dir := t.TempDir()
	qs := open(t, "--queries", writeVectors(t, dir, "q", queries, vector.Float32, nil, 1))
	bin := open(t, "--corpus", writeVectors(t, dir, "b", corpus, vector.UBinary, nil, 1))
	f32 := open(t, "--rescore-with", writeVectors(t, dir, "f", corpus, vector.Float32, nil, 2))
	cands := runSearch(t, Options{Queries: qs, Corpus: bin, K: n * k})
	got := runSearch(t, Options{Queries: qs, Corpus: bin, K: k, Rescore: n, RescoreWith: f32})
	for q := range queries {
		var sub []doc
		for _, h := range cands[q] {
			sub = append(sub, corpus[slices.IndexFunc(corpus, func(d doc) bool { return d.ID == h.Doc })])
		}
		want := exact(queries[q:q+1], sub, k, dot64)
		sameHits(t, fmt.Sprintf("query %d", q), got[q:q+1], want, 1e-5)
	}
}

func TestSearchRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	dir := t.TempDir()
	docs := randomDocs(rng, 20, 2, 16)
	f32 := open(t, "--corpus", writeVectors(t, dir, "f", docs, vector.Float32, nil, 1))
	bin := open(t, "--corpus", writeVectors(t, dir, "b", docs, vector.Binary, nil, 1))
	other := open(t, "--queries", writeVectors(t, dir, "o", randomDocs(rng, 5, 1, 24), vector.Float32, nil, 1))
	for name, o := range map[string]Options{
		"dims":                {Queries: other, Corpus: f32},
		"multi-chunk queries": {Queries: f32, Corpus: f32},
		"binary queries":      {Queries: bin, Corpus: f32},
		"rescore float":       {Queries: f32, Corpus: f32, Rescore: 4},
		"rescore-with alone":  {Queries: f32, Corpus: bin, RescoreWith: f32},
	} {
		_, err := Run(context.Background(), o, func(string, []Hit) error { return nil })
		if !errors.Is(err, ErrInput) {
			t.Errorf("%s: got %v; want ErrInput", name, err)
		}
	}
	if _, err := OpenVectors(context.Background(), "--corpus", []string{filepath.Join(dir, "f.0.arrow.errors.jsonl")}); !errors.Is(err, ErrInput) {
		t.Errorf("an errors file as corpus: got %v; want ErrInput", err)
	}
}
