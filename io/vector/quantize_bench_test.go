package vector

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkQuantize is the cost embed --dtype adds per chunk: one 384-dim
// float32 vector (MiniLM's width) turned into each dtype's bytes, as the
// embed sink does before the writer. docs/search-bench.md sets it beside
// the time a chunk takes to embed.
//
//	go test ./io/vector -run '^$' -bench Quantize -benchtime 200000x
func BenchmarkQuantize(b *testing.B) {
	const dims = 384
	rng := rand.New(rand.NewPCG(1, 2))
	vecs := make([][]float32, 1024)
	r := NewRanges(dims)
	for i := range vecs {
		vecs[i] = make([]float32, dims)
		for j := range vecs[i] {
			vecs[i][j] = float32(rng.NormFloat64()) / 20
		}
		r.Observe(vecs[i])
	}
	for _, d := range Dtypes {
		b.Run(d.String(), func(b *testing.B) {
			q, err := NewQuantizer(d, dims, r)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 0, Float32.Width(dims))
			b.SetBytes(int64(Float32.Width(dims)))
			b.ResetTimer()
			for i := range b.N {
				buf = q.Append(buf[:0], vecs[i%len(vecs)])
			}
			if len(buf) != d.Width(dims) {
				b.Fatalf("got %d bytes; want %d", len(buf), d.Width(dims))
			}
		})
	}
}
