package wordvec

import (
	"math"
	"reflect"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestWords(t *testing.T) {
	got := Words([]string{"The cat, the DOG.", "the cat sat", "a-b"}, 2, 10)
	if want := []string{"the", "cat"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Words = %q; want %q (most frequent first, min count 2)", got, want)
	}
	if got := Words([]string{"b a c b a c d"}, 1, 2); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("Words with max 2 = %q; want ties in byte order", got)
	}
}

// TestPPMI checks the matrix against the formula worked by hand: sequences
// "1 2" and "1 3" with a window of 1 give the symmetric counts
// c(1,2) = c(1,3) = 1, row sums 2, 1, 1 and a total of 4, so with α = 1
// PMI(1,2) = log(1·4 / (2·1)) = log 2 in both directions.
func TestPPMI(t *testing.T) {
	c := cooccurrences([][]int32{{1, 2}, {1, 3}}, 4, make([]bool, 4), 1)
	m := c.ppmi(1)
	want := map[[2]int]float64{{1, 2}: math.Log(2), {1, 3}: math.Log(2), {2, 1}: math.Log(2), {3, 1}: math.Log(2)}
	got := map[[2]int]float64{}
	for r := 0; r < m.n; r++ {
		for p := m.rowPtr[r]; p < m.rowPtr[r+1]; p++ {
			got[[2]int{r, int(m.col[p])}] = m.val[p]
		}
	}
	if len(got) != len(want) {
		t.Fatalf("ppmi entries %v; want %v", got, want)
	}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-12 {
			t.Errorf("ppmi%v = %v; want %v", k, got[k], v)
		}
	}
	// Smoothing lowers a rare context's probability less than a frequent
	// one's: with α = 0.75, PMI(2,1) (context 1, frequent) rises.
	s := c.ppmi(0.75)
	if s.val[s.rowPtr[2]] <= math.Log(2) {
		t.Errorf("smoothed PMI(2,1) = %v; want above log 2", s.val[s.rowPtr[2]])
	}
}

// TestTopEigen compares the randomized eigenvectors with an exact
// decomposition of the same matrix (gonum's EigenSym on its dense form).
func TestTopEigen(t *testing.T) {
	const n, k = 80, 4
	// A matrix with four clear eigenvalues (8, −6, 5, 4) over noise below 0.5.
	g := gaussian(n, k, 3)
	orthonormalize(g, n, k)
	lambda := []float64{8, -6, 5, 4}
	noise := gaussian(n, n, 4)
	dense := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			v := 0.01 * (noise[i*n+j] + noise[j*n+i])
			for c, l := range lambda {
				v += l * g[i*k+c] * g[j*k+c]
			}
			dense.SetSym(i, j, v)
		}
	}
	a := &csr{n: n, rowPtr: make([]int, n+1)}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			a.col = append(a.col, int32(j))
			a.val = append(a.val, dense.At(i, j))
		}
		a.rowPtr[i+1] = len(a.col)
	}
	got := topEigen(a, k, 1)

	var eig mat.EigenSym
	if !eig.Factorize(dense, true) {
		t.Fatal("EigenSym failed")
	}
	vals := eig.Values(nil)
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	for c, l := range lambda {
		e := nearest(vals, l)
		var dotSign float64
		for r := 0; r < n; r++ {
			dotSign += float64(got[r][c]) * vecs.At(r, e)
		}
		sign := math.Copysign(1, dotSign)
		for r := 0; r < n; r++ {
			want := sign * vecs.At(r, e) * math.Sqrt(math.Abs(vals[e]))
			if d := math.Abs(float64(got[r][c]) - want); d > 1e-4 {
				t.Fatalf("component %d (λ=%v) row %d: %v; want %v", c, vals[e], r, got[r][c], want)
			}
		}
	}
}

func nearest(vals []float64, x float64) int {
	best := 0
	for i, v := range vals {
		if math.Abs(v-x) < math.Abs(vals[best]-x) {
			best = i
		}
	}
	return best
}

func TestEmbeddingRow(t *testing.T) {
	u := []float32{0.5, -0.5, 0.5, -0.5}
	dst := make([]float32, len(u)+sinkDims)
	embeddingRow(dst, u, 0.6)
	var sum, ss float64
	for _, x := range dst {
		sum += float64(x)
		ss += float64(x) * float64(x)
	}
	if math.Abs(sum) > 1e-6 || math.Abs(ss-1) > 1e-6 {
		t.Fatalf("row %v: sum %v, squared length %v; want 0 and 1 (a layer norm leaves it unchanged up to √width)", dst, sum, ss)
	}
	if dst[0] != 0.3 || math.Abs(float64(dst[4])-0.8/math.Sqrt2) > 1e-6 {
		t.Fatalf("row %v; want weight·u, then the sinks ±√(1−weight²)/√2", dst)
	}
}

func TestLearnRefusesTooFewTokens(t *testing.T) {
	if _, err := Learn([][]int32{{1, 2, 3}}, 4, nil, Config{Dims: 8}); err == nil {
		t.Fatal("Learn: 8 dimensions from 3 tokens accepted")
	}
}
