package search

import (
	"cmp"
	"container/heap"
	"slices"
	"strings"
)

// Hit is a document found for a query and its score.
type Hit struct {
	Doc   string
	Score float32
}

// better says whether a ranks before b: a higher score, or the same score
// and a smaller document id.
func better(a, b Hit) bool {
	return a.Score > b.Score || (a.Score == b.Score && a.Doc < b.Doc)
}

// sortHits orders hits best first (ties by document id, ascending).
func sortHits(hs []Hit) {
	slices.SortFunc(hs, func(a, b Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(a.Doc, b.Doc)
	})
}

// topK keeps the k best hits of distinct documents: a min-heap (the worst
// kept hit on top) and the set of the documents in it, so that a document
// seen again (the same id in two places of the corpus, which is rare: it
// is then found by a scan of the heap) keeps its best score instead of
// taking two places. Its heap and set grow with the hits kept, never sized
// by k: a k larger than the corpus (a number the user typed) costs what
// the corpus's documents cost.
type topK struct {
	k  int
	h  []Hit
	in map[string]struct{}
}

func newTopK(k int) *topK { return &topK{k: k, in: map[string]struct{}{}} }

// admits says whether a hit of this score could enter: a cheap test before
// the document's id is looked at.
func (t *topK) admits(score float32) bool {
	return len(t.h) < t.k || score >= t.h[0].Score
}

// floor is the score below which no hit enters, and whether there is one
// (the list is full).
func (t *topK) floor() (float32, bool) {
	if len(t.h) < t.k {
		return 0, false
	}
	return t.h[0].Score, true
}

// add offers a hit; doc is cloned when kept.
func (t *topK) add(doc string, score float32) {
	if _, ok := t.in[doc]; ok {
		i := slices.IndexFunc(t.h, func(h Hit) bool { return h.Doc == doc })
		if score > t.h[i].Score {
			t.h[i].Score = score
			heap.Fix(t, i)
		}
		return
	}
	hit := Hit{Doc: doc, Score: score}
	if len(t.h) < t.k {
		hit.Doc = strings.Clone(doc)
		t.in[hit.Doc] = struct{}{}
		heap.Push(t, hit)
		return
	}
	if !better(hit, t.h[0]) {
		return
	}
	delete(t.in, t.h[0].Doc)
	hit.Doc = strings.Clone(doc)
	t.h[0] = hit
	t.in[hit.Doc] = struct{}{}
	heap.Fix(t, 0)
}

// hits are the kept hits, best first.
func (t *topK) hits() []Hit {
	out := slices.Clone(t.h)
	sortHits(out)
	return out
}

// heap.Interface, worst hit first.
func (t *topK) Len() int           { return len(t.h) }
func (t *topK) Less(i, j int) bool { return better(t.h[j], t.h[i]) }
func (t *topK) Swap(i, j int)      { t.h[i], t.h[j] = t.h[j], t.h[i] }
func (t *topK) Push(x any)         { t.h = append(t.h, x.(Hit)) }
func (t *topK) Pop() any {
	h := t.h[len(t.h)-1]
	t.h = t.h[:len(t.h)-1]
	return h
}
