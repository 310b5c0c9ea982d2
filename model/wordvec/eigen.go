package wordvec

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"
)

// Randomized range finder settings: extra columns beyond the rank asked
// for, and power iterations (each one sharpens the spectrum's decay).
const (
	oversample = 10
	powerIters = 4
)

// topEigen returns, for each row of the symmetric matrix a, its row of
// U·|Λ|^½ over the k eigenpairs of largest |λ| (the truncated SVD of a
// symmetric matrix), found by a randomized range finder with power
// iterations and a Rayleigh–Ritz step.
func topEigen(a *csr, k int, seed uint64) [][]float32 {
	l := min(k+oversample, a.n)
	q := gaussian(a.n, l, seed)
	orthonormalize(q, a.n, l)
	for range powerIters {
		q = a.mulDense(q, l)
		orthonormalize(q, a.n, l)
	}
	aq := a.mulDense(q, l)
	t := mat.NewSymDense(l, nil)
	for i := 0; i < l; i++ {
		for j := i; j < l; j++ {
			var s float64
			for r := 0; r < a.n; r++ {
				s += q[r*l+i] * aq[r*l+j]
			}
			t.SetSym(i, j, s)
		}
	}
	var eig mat.EigenSym
	eig.Factorize(t, true)
	vals := eig.Values(nil)
	var w mat.Dense
	eig.VectorsTo(&w)
	order := make([]int, l)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return math.Abs(vals[order[i]]) > math.Abs(vals[order[j]]) })
	out := make([][]float32, a.n)
	for r := range out {
		out[r] = make([]float32, k)
		for c := 0; c < k; c++ {
			e := order[c]
			var s float64
			for j := 0; j < l; j++ {
				s += q[r*l+j] * w.At(j, e)
			}
			out[r][c] = float32(s * math.Sqrt(math.Abs(vals[e])))
		}
	}
	return out
}

// gaussian is an n×l row-major matrix of standard normal draws (Box–Muller
// over splitmix64, the same on every platform).
func gaussian(n, l int, seed uint64) []float64 {
	s := seed ^ 0x5eed5eed5eed5eed
	next := func() float64 {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		return (float64(z>>11) + 0.5) / (1 << 53)
	}
	out := make([]float64, n*l)
	for i := range out {
		u, v := next(), next()
		out[i] = math.Sqrt(-2*math.Log(u)) * math.Cos(2*math.Pi*v)
	}
	return out
}

// orthonormalize turns the columns of the n×l row-major matrix x into an
// orthonormal basis of their span by modified Gram–Schmidt, run twice for
// stability (on a column-major copy, so that each dot product is
// contiguous); a column that vanishes is left zero.
func orthonormalize(x []float64, n, l int) {
	cols := make([][]float64, l)
	for j := range cols {
		cols[j] = make([]float64, n)
		for r := 0; r < n; r++ {
			cols[j][r] = x[r*l+j]
		}
	}
	for pass := 0; pass < 2; pass++ {
		for j, cj := range cols {
			for _, ci := range cols[:j] {
				d := dot(ci, cj)
				for r := range cj {
					cj[r] -= d * ci[r]
				}
			}
			inv := 0.0
			if ss := dot(cj, cj); ss > 1e-24 {
				inv = 1 / math.Sqrt(ss)
			}
			for r := range cj {
				cj[r] *= inv
			}
		}
	}
	for j, c := range cols {
		for r := 0; r < n; r++ {
			x[r*l+j] = c[r]
		}
	}
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
