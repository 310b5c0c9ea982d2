package ingest

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPCA: points spread along a known direction (and less along a second)
// give that direction as the first component, its scores signed so that the
// largest by magnitude is positive, and the share of variance the kept
// components explain.
func TestPCA(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n, width = 2000, 6
	dir1 := []float64{3, 4, 0, 0, 0, 0} // |dir1| = 5
	dir2 := []float64{0, 0, 1, 0, 0, 0}
	vecs := make([][]float32, n)
	for i := range vecs {
		a, b := r.NormFloat64()*10, r.NormFloat64()*3
		v := make([]float32, width)
		for j := range v {
			v[j] = float32(a*dir1[j]/5 + b*dir2[j] + r.NormFloat64()*0.1 + 7) // offset: centred away
		}
		vecs[i] = v
	}
	scores, explained := pca(vecs, width, 2)
	// the first component's scores are the projections on dir1/5, up to the offset
	var dot, na, nb float64
	best := 0.0
	for i, v := range vecs {
		p := (float64(v[0])-7)*3/5 + (float64(v[1])-7)*4/5
		s := scores[i*2]
		dot, na, nb = dot+p*s, na+p*p, nb+s*s
		if math.Abs(s) > math.Abs(best) {
			best = s
		}
	}
	if c := math.Abs(dot / math.Sqrt(na*nb)); c < 0.999 {
		t.Errorf("first component's scores: |correlation| %.5f with the true projections; want ≥ 0.999", c)
	}
	if best <= 0 {
		t.Errorf("the largest first-component score by magnitude is %g; want it positive (model2vec's sign rule)", best)
	}
	if explained < 0.99 || explained > 1 {
		t.Errorf("explained variance share %.4f; want the two components to keep ≥ 0.99", explained)
	}
}

// TestZipf: row i is weighted by sif / (sif + p_i), p_i = (1/(i+2)) / Σ.
func TestZipf(t *testing.T) {
	rows := []float64{1, 1, 1, 1, 1, 1} // 3 rows of 2
	zipf(rows, 2, 0.1)
	sum := 1.0/2 + 1.0/3 + 1.0/4
	for i := range 3 {
		want := 0.1 / (0.1 + (1/float64(i+2))/sum)
		if math.Abs(rows[2*i]-want) > 1e-12 || rows[2*i] != rows[2*i+1] {
			t.Errorf("row %d weighted %v; want %v", i, rows[2*i:2*i+2], want)
		}
	}
	if !(rows[0] < rows[2] && rows[2] < rows[4]) {
		t.Errorf("weights %v; want rarer (later) tokens weighted more", rows)
	}
}

// TestDistillUnknownName: a name the cache does not hold is reported by
// distill (not by quantize, whose lookup it shares), and nothing is written.
func TestDistillUnknownName(t *testing.T) {
	o := testOptions(t, "")
	out := filepath.Join(t.TempDir(), "static")
	_, err := Distill(context.Background(), "no-such-model", DistillOptions{Out: out}, o)
	if err == nil || !strings.HasPrefix(err.Error(), "distill: ") || strings.Contains(err.Error(), "quantize") {
		t.Fatalf("Distill of an unknown name: %v; want an error starting \"distill: \"", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a failed distill made %s", out)
	}
	if _, err := EnsureQuantized(context.Background(), "no-such-model", QuantizeOptions{FType: "q8_0"}, o); err == nil || !strings.HasPrefix(err.Error(), "quantize: ") {
		t.Errorf("EnsureQuantized of an unknown name: %v; want an error starting \"quantize: \"", err)
	}
}
