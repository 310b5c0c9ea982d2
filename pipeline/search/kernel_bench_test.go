package search

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkKernels: each kernel set on one score4 call's work, 4 queries ×
// TileRows rows of 384 dims (MiniLM's); the pairs/s metric is query·row
// similarities a second of one goroutine.
//
//	go test ./pipeline/search -run '^$' -bench Kernels -benchtime 2000x
func BenchmarkKernels(b *testing.B) {
	const dims, rows = 384, TileRows
	rng := rand.New(rand.NewPCG(1, 2))
	qf, cf := randF32(rng, 4*dims, fillRandom), randF32(rng, rows*dims, fillRandom)
	qi, ci := randInt8(rng, 4*dims, fillRandom), randInt8(rng, rows*dims, fillRandom)
	qu, cu := randUint8(rng, 4*dims, fillRandom), randUint8(rng, rows*dims, fillRandom)
	qb, cb := randWords(rng, 4*dims/64, fillRandom), randWords(rng, rows*dims/64, fillRandom)
	out := make([]float32, 4*TileRows)
	for _, k := range sets {
		for _, c := range []struct {
			dtype string
			run   func()
		}{
			{"float32", func() { k.f32(qf, cf, rows, dims, out, TileRows) }},
			{"int8", func() { k.i8(qi, ci, rows, dims, out, TileRows) }},
			{"uint8", func() { k.u8(qu, cu, rows, dims, out, TileRows) }},
			{"binary", func() { k.bin(qb, cb, rows, dims/64, dims, out, TileRows) }},
		} {
			b.Run(k.name+"/"+c.dtype, func(b *testing.B) {
				for b.Loop() {
					c.run()
				}
				b.ReportMetric(float64(4*rows)*float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			})
		}
	}
}
