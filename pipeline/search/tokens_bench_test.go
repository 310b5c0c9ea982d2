package search

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkMaxSim is one query's MaxSim over 100,000 chunks: a batch of
// 1,000 chunks of 64 token vectors (128 dims, ColBERT's width) scored 100
// times by a 32-token query (ColBERT's query length), as maxSimPass
// scores each corpus batch. One op is one query over the 100,000 chunks.
func BenchmarkMaxSim(b *testing.B) {
	const dims, chunks, perChunk, qtoks, batches = 128, 1000, 64, 32, 100
	rng := rand.New(rand.NewPCG(1, 2))
	tc := &tokenCols{off: make([]int, chunks+1)}
	for i := range chunks {
		tc.off[i+1] = tc.off[i] + perChunk
		for range perChunk {
			tc.vals = append(tc.vals, randomUnit(rng, dims)...)
		}
	}
	q := tokenQuery{n: qtoks}
	for range qtoks {
		q.vecs = append(q.vecs, randomUnit(rng, dims)...)
	}
	stride := tc.off[chunks]
	dots, acc := make([]float32, 4*stride), make([]float64, chunks)
	b.ReportAllocs()
	for b.Loop() {
		for range batches {
			maxSim(q, tc, chunks, dims, tc.vals, stride, dots, acc)
		}
	}
	b.ReportMetric(float64(batches*chunks)/(b.Elapsed().Seconds()/float64(b.N)), "chunks/s")
}
