package search

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestTopK: the kept hits are the k best of distinct documents, a document
// offered twice (the same id in two places of the corpus) keeping its best
// score, ties going to the smaller id; against a map of each document's
// best score, sorted.
func TestTopK(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, c := range []struct{ k, docs, offers int }{{1, 5, 40}, {3, 10, 200}, {10, 8, 100}, {50, 400, 3000}} {
		tk := newTopK(c.k)
		best := map[string]float32{}
		for range c.offers {
			doc := fmt.Sprintf("d%03d", rng.IntN(c.docs))
			sc := float32(rng.IntN(20)) // many ties
			if tk.admits(sc) {
				tk.add(doc, sc)
			}
			if b, ok := best[doc]; !ok || sc > b {
				best[doc] = sc
			}
		}
		var want []Hit
		for d, s := range best {
			want = append(want, Hit{d, s})
		}
		sortHits(want)
		want = want[:min(c.k, len(want))]
		got := tk.hits()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("k %d, %d documents, %d offers: got %v; want %v", c.k, c.docs, c.offers, got, want)
		}
	}
}
