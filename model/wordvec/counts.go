package wordvec

import (
	"math"
	"sort"
)

// counts are a corpus's windowed co-occurrence counts.
type counts struct {
	n       int                // vocabulary size
	pair    map[uint64]float64 // key a<<32|b with a <= b: symmetric counts
	unigram []int
	tokens  int
	pairs   int
}

// cooccurrences counts, for each pair of tokens at most window apart in one
// sequence, a weight falling with their distance d: (window−d+1)/window, as
// word2vec's dynamic window does on average.
func cooccurrences(seqs [][]int32, n int, skip []bool, window int) *counts {
	c := &counts{n: n, pair: map[uint64]float64{}, unigram: make([]int, n)}
	for _, seq := range seqs {
		for i, a := range seq {
			if a < 0 || int(a) >= n || skip[a] {
				continue
			}
			c.unigram[a]++
			c.tokens++
			for d := 1; d <= window && i+d < len(seq); d++ {
				b := seq[i+d]
				if b < 0 || int(b) >= n || skip[b] {
					continue
				}
				c.pair[pairKey(a, b)] += float64(window-d+1) / float64(window)
			}
		}
	}
	c.pairs = len(c.pair)
	return c
}

func pairKey(a, b int32) uint64 {
	if a > b {
		a, b = b, a
	}
	return uint64(a)<<32 | uint64(b)
}

// activeTokens counts the tokens that co-occur with any other.
func (c *counts) activeTokens() int {
	seen := make([]bool, c.n)
	k := 0
	for key := range c.pair {
		for _, id := range []uint64{key >> 32, key & 0xffffffff} {
			if !seen[id] {
				seen[id] = true
				k++
			}
		}
	}
	return k
}

// csr is a square sparse matrix in compressed sparse row form.
type csr struct {
	n      int
	rowPtr []int
	col    []int32
	val    []float64
}

// ppmi is the positive PMI matrix of the counts, symmetric, with the
// context distribution raised to the power alpha:
// max(0, log(P(w,c) / (P(w)·Pα(c)))).
func (c *counts) ppmi(alpha float64) *csr {
	row := make([]float64, c.n)
	var total float64
	for key, v := range c.pair {
		a, b := key>>32, key&0xffffffff
		row[a] += v
		total += v
		if a != b {
			row[b] += v
			total += v
		}
	}
	var ctxTotal float64
	ctx := make([]float64, c.n)
	for i, r := range row {
		ctx[i] = math.Pow(r, alpha)
		ctxTotal += ctx[i]
	}
	type entry struct {
		r, c int32
		v    float64
	}
	entries := make([]entry, 0, 2*len(c.pair))
	add := func(a, b uint64, v float64) {
		// P(w,c) = v/total, P(w) = row[a]/total, Pα(c) = ctx[b]/ctxTotal.
		pmi := math.Log(v * ctxTotal / (row[a] * ctx[b]))
		if pmi > 0 {
			entries = append(entries, entry{int32(a), int32(b), pmi})
		}
	}
	for key, v := range c.pair {
		a, b := key>>32, key&0xffffffff
		add(a, b, v)
		if a != b {
			add(b, a, v)
		}
	}
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].r != entries[j].r {
			return entries[i].r < entries[j].r
		}
		return entries[i].c < entries[j].c
	})
	m := &csr{n: c.n, rowPtr: make([]int, c.n+1), col: make([]int32, len(entries)), val: make([]float64, len(entries))}
	for i, e := range entries {
		m.rowPtr[e.r+1]++
		m.col[i], m.val[i] = e.c, e.v
	}
	for i := 0; i < c.n; i++ {
		m.rowPtr[i+1] += m.rowPtr[i]
	}
	return m
}

// mulDense returns m·x for x an n×k row-major dense matrix.
func (m *csr) mulDense(x []float64, k int) []float64 {
	out := make([]float64, m.n*k)
	for r := 0; r < m.n; r++ {
		o := out[r*k : (r+1)*k]
		for p := m.rowPtr[r]; p < m.rowPtr[r+1]; p++ {
			v, xr := m.val[p], x[int(m.col[p])*k:int(m.col[p]+1)*k]
			for j := range o {
				o[j] += v * xr[j]
			}
		}
	}
	return out
}
