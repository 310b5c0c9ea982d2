package pipeline

import (
	"testing"
)

func chunkOfLen(doc int64, n int) Chunk {
	return Chunk{Doc: doc, IDs: make([]int32, n)}
}

func TestPackerBudgetAndOrder(t *testing.T) {
	p := &Packer{Budget: 10, Window: 6}
	lens := []int{3, 9, 2, 12, 4, 4, 5}
	var batches []Batch
	for i, n := range lens {
		batches = append(batches, p.Add(chunkOfLen(int64(i), n))...)
	}
	batches = append(batches, p.Flush()...)
	seen := map[int64]bool{}
	for _, b := range batches {
		sum := 0
		for _, c := range b.Chunks {
			sum += len(c.IDs)
			if seen[c.Doc] {
				t.Errorf("doc %d packed twice", c.Doc)
			}
			seen[c.Doc] = true
		}
		if sum != b.Tokens {
			t.Errorf("batch tokens %d; want %d", b.Tokens, sum)
		}
		if b.Tokens > 10 && len(b.Chunks) != 1 {
			t.Errorf("batch of %d tokens holds %d chunks; want an oversized chunk alone", b.Tokens, len(b.Chunks))
		}
	}
	if len(seen) != len(lens) {
		t.Errorf("packed %d chunks; want %d", len(seen), len(lens))
	}
	// The window of six flushes once before the seventh chunk arrives.
	if got := len(p.held); got != 0 {
		t.Errorf("packer still holds %d chunks after Flush", got)
	}
}

func TestPackerGroupsSimilarLengths(t *testing.T) {
	p := &Packer{Budget: 8, Window: 100}
	for i, n := range []int{1, 7, 1, 7, 1, 7} {
		p.Add(chunkOfLen(int64(i), n))
	}
	got := p.Flush()
	// Sorted: 1,1,1 | 7 | 7 | 7.
	if len(got) != 4 || len(got[0].Chunks) != 3 {
		t.Fatalf("got %d batches (first holds %d); want 4 with the three short chunks together", len(got), len(got[0].Chunks))
	}
}
