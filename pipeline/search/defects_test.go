package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/io/vector"
)

// TestSearchHugeK: a k far above the corpus's documents gives the run
// k = the corpus's size gives, in memory bounded by the corpus (issue 32
// #1: a map sized by k for every query of a block took 24 GB).
func TestSearchHugeK(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const dims, ndocs = 16, 300
	corpus := randomDocs(rng, ndocs, 2, dims)
	queries := randomDocs(rng, 8, 1, dims)
	dir := t.TempDir()
	qs := open(t, "--queries", writeVectors(t, dir, "q", queries, vector.Float32, nil, 1))
	f32 := open(t, "--corpus", writeVectors(t, dir, "f", corpus, vector.Float32, nil, 2))
	bin := open(t, "--corpus", writeVectors(t, dir, "b", corpus, vector.UBinary, nil, 1))
	for _, c := range []struct {
		name string
		o    Options
	}{
		{"float32", Options{Queries: qs, Corpus: f32}},
		{"binary, rescored", Options{Queries: qs, Corpus: bin, Rescore: 4}},
	} {
		o := c.o
		o.K = ndocs
		want := runSearch(t, o)
		for _, k := range []int{1 << 20, 1 << 40, math.MaxInt} {
			o.K = k
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			got := runSearch(t, o)
			runtime.ReadMemStats(&after)
			sameHits(t, fmt.Sprintf("%s, k %d", c.name, k), got, want, 0)
			// The corpus's hits take a few hundred KiB; a structure sized by k
			// (here 8 queries × 2^20 map entries at least) takes hundreds of MiB.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
				t.Errorf("%s, k %d: allocated %d MiB; want at most 32 MiB (k = %d allocates what the corpus needs)", c.name, k, alloc>>20, ndocs)
			}
		}
	}
}

// TestSearchCancel: a cancelled search stops within a tile of each thread,
// not at the end of a record batch (issue 32 #1: SIGTERM went unheard for
// 17 minutes).
func TestSearchCancel(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const dims, threads = 32, 2
	corpus := randomDocs(rng, 20*TileRows, 1, dims) // one record batch of 20 tiles
	queries := randomDocs(rng, 4, 1, dims)
	dir := t.TempDir()
	qs := open(t, "--queries", writeVectors(t, dir, "q", queries, vector.Float32, nil, 1))
	cs := open(t, "--corpus", writeBatches(t, dir, "c", corpus, vector.Float32, nil, 1, len(corpus)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var tiles atomic.Int64
	var once sync.Once
	tileHook = func() {
		tiles.Add(1)
		once.Do(cancel)
	}
	defer func() { tileHook = nil }()
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Options{Queries: qs, Corpus: cs, Threads: threads}, func(string, []Hit) error { return nil })
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v; want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the cancelled search had not returned after a minute")
	}
	if n := tiles.Load(); n > threads {
		t.Errorf("got %d tiles scored; want at most %d (one a thread: the one under way when the search was cancelled)", n, threads)
	}
}

// TestSearchNonFinite: a NaN or infinite value in a float query, corpus
// or --rescore-with vector is refused, naming the file, row and id (issue
// 32 #6: NaN scores were written with exit 0).
func TestSearchNonFinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	const dims = 24
	dir := t.TempDir()
	good := randomDocs(rng, 50, 2, dims)
	queries := randomDocs(rng, 6, 1, dims)
	bad := func(docs []doc, i, c, dim int, x float32) []doc {
		out := make([]doc, len(docs))
		for j, d := range docs {
			out[j] = doc{ID: d.ID, Vecs: make([][]float32, len(d.Vecs))}
			for k, v := range d.Vecs {
				out[j].Vecs[k] = append([]float32(nil), v...)
			}
		}
		out[i].Vecs[c][dim] = x
		return out
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	qs := writeVectors(t, dir, "q", queries, vector.Float32, nil, 1)
	nanQs := writeVectors(t, dir, "qnan", bad(queries, 4, 0, 7, nan), vector.Float32, nil, 1)
	cs := writeVectors(t, dir, "c", good, vector.Float32, nil, 1)
	// Document 10's last chunk: its row is the chunks of documents 0–9 plus its others.
	d, c := 10, len(good[10].Vecs)-1
	row := c
	for _, x := range good[:d] {
		row += len(x.Vecs)
	}
	infCs := writeVectors(t, dir, "cinf", bad(good, d, c, 3, inf), vector.Float32, nil, 1)
	infHalf := writeVectors(t, dir, "chalf", bad(good, d, c, 3, -inf), vector.Float16, nil, 1)
	bin := writeVectors(t, dir, "b", good, vector.UBinary, nil, 1)
	for _, tc := range []struct {
		name                  string
		queries, corpus, with []string
		want                  []string
	}{
		{"NaN query", nanQs, cs, nil, []string{"--queries", nanQs[0], "row 4 ", "id " + queries[4].ID, "dimension 7 is NaN"}},
		{"+Inf corpus", qs, infCs, nil, []string{"--corpus", infCs[0], fmt.Sprintf("row %d ", row), "id " + good[d].ID, "dimension 3 is +Inf"}},
		{"-Inf float16 corpus", qs, infHalf, nil, []string{"--corpus", infHalf[0], fmt.Sprintf("row %d ", row), "dimension 3 is -Inf"}},
		{"+Inf --rescore-with", qs, bin, infCs, []string{"--rescore-with", infCs[0], fmt.Sprintf("row %d ", row), "id " + good[d].ID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Queries: open(t, "--queries", tc.queries), Corpus: open(t, "--corpus", tc.corpus), K: 50}
			if tc.with != nil {
				o.Rescore, o.RescoreWith = 4, open(t, "--rescore-with", tc.with)
			}
			_, err := Run(context.Background(), o, func(string, []Hit) error { return nil })
			if !errors.Is(err, ErrInput) {
				t.Fatalf("got %v; want ErrInput", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q; want it to name %q", err, w)
				}
			}
		})
	}
}
