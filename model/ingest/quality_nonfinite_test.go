package ingest

import (
	"math"
	"testing"
)

// TestNonFinite: a variant's vectors holding a NaN or an infinity are
// counted (measure refuses such a variant, exit 2, whatever --min-cosine:
// a NaN cosine would otherwise pass every comparison and then fail to be
// written to entry.json).
func TestNonFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	vs := [][]float32{{1, 2}, {nan, 1}, {0, inf}, {3, 4}, {nan, nan}}
	if n := nonFinite(vs); n != 3 {
		t.Errorf("nonFinite = %d; want 3", n)
	}
	if n := nonFinite(vs[:1]); n != 0 {
		t.Errorf("nonFinite of finite vectors = %d; want 0", n)
	}
}
