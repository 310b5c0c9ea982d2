package pipeline

import "testing"

func unitOfLen(seq int64, n int) unit[item] {
	return unit[item]{seq: seq, item: item{ids: make([]int32, n)}, tokens: n}
}

func TestPackerBudgetAndOrder(t *testing.T) {
	p := &Packer[item]{Budget: 10, Window: 6}
	lens := []int{3, 9, 2, 12, 4, 4, 5}
	var batches [][]unit[item]
	for i, n := range lens {
		batches = append(batches, p.Add(unitOfLen(int64(i), n))...)
	}
	batches = append(batches, p.Flush()...)
	seen := map[int64]bool{}
	for _, b := range batches {
		sum := 0
		for _, u := range b {
			sum += u.tokens
			if seen[u.seq] {
				t.Errorf("unit %d packed twice", u.seq)
			}
			seen[u.seq] = true
		}
		if sum > 10 && len(b) != 1 {
			t.Errorf("batch of %d tokens holds %d units; want an oversized unit alone", sum, len(b))
		}
	}
	if len(seen) != len(lens) {
		t.Errorf("packed %d units; want %d", len(seen), len(lens))
	}
	if got := p.Held(); got != 0 {
		t.Errorf("packer still holds %d units after Flush", got)
	}
}

func TestPackerGroupsSimilarLengths(t *testing.T) {
	p := &Packer[item]{Budget: 8, Window: 100}
	for i, n := range []int{1, 7, 1, 7, 1, 7} {
		p.Add(unitOfLen(int64(i), n))
	}
	got := p.Flush()
	// Sorted: 1,1,1 | 7 | 7 | 7.
	if len(got) != 4 || len(got[0]) != 3 {
		t.Fatalf("got %d batches (first holds %d); want 4 with the three short units together", len(got), len(got[0]))
	}
}

func TestPackerMaxItems(t *testing.T) {
	p := &Packer[item]{Budget: 1000, MaxItems: 2, Window: 100}
	for i := range 5 {
		p.Add(unitOfLen(int64(i), 3))
	}
	got := p.Flush()
	if len(got) != 3 || len(got[0]) != 2 || len(got[2]) != 1 {
		t.Fatalf("got %d batches; want 3 of at most 2 units", len(got))
	}
}
