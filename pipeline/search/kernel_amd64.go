package search

import "golang.org/x/sys/cpu"

// The assembly kernels (kernel_amd64.s); binary's Go kernel is POPCNTQ
// already (math/bits.OnesCount64). Each scores query rows q (4, or 2
// for the AVX2 ones; rows dims elements apart) against rows corpus rows c
// (a multiple of 4) into out[i*ostride+j].

//go:noescape
func dotF32AVX512(q, c *float32, rows, dims int, out *float32, ostride int)

//go:noescape
func dotF32AVX2(q, c *float32, rows, dims int, out *float32, ostride int)

//go:noescape
func dotI8AVX2(q, c *int8, rows, dims int, out *float32, ostride int)

//go:noescape
func dotU8AVX2(q, c *uint8, rows, dims int, out *float32, ostride int)

//go:noescape
func binVPOPCNT(q, c *uint64, rows, words, dims int, out *float32, ostride int)

//go:noescape
func dotI8VNNI(q, c *int8, rows, dims int, out *float32, ostride int, qoff *[4]int32)

//go:noescape
func maxF32AVX(s *float32, n int) float32

func init() {
	x := cpu.X86
	avx2 := x.HasAVX2 && x.HasFMA
	avx512 := x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL
	if avx2 {
		maxOf = maxAVX
		sets = append(sets, kernelSet{name: "avx2", f32: f32AVX2, i8: i8AVX2, u8: u8AVX2, bin: binGo})
	}
	if avx2 && avx512 {
		k := kernelSet{name: "avx512", f32: f32AVX512, i8: i8AVX2, u8: u8AVX2, bin: binGo}
		if x.HasAVX512VNNI {
			k.name, k.i8 = k.name+"+vnni", i8VNNI
		}
		if x.HasAVX512VPOPCNTDQ {
			k.name, k.bin = k.name+"+vpopcntdq", binVPOPCNT4
		}
		sets = append(sets, k)
	}
	kern = sets[len(sets)-1]
}

func f32AVX512(q, c []float32, rows, dims int, out []float32, ostride int) {
	checkBlock(len(q), len(c), rows, dims, len(out), ostride)
	if rows > 0 {
		dotF32AVX512(&q[0], &c[0], rows, dims, &out[0], ostride)
	}
}

func f32AVX2(q, c []float32, rows, dims int, out []float32, ostride int) {
	checkBlock(len(q), len(c), rows, dims, len(out), ostride)
	if rows == 0 {
		return
	}
	dotF32AVX2(&q[0], &c[0], rows, dims, &out[0], ostride)
	dotF32AVX2(&q[2*dims], &c[0], rows, dims, &out[2*ostride], ostride)
	if t := dims &^ 7; t < dims { // the last dims % 8 floats
		for i := range 4 {
			qt := q[i*dims+t : (i+1)*dims]
			for j := range rows {
				out[i*ostride+j] += dotF32(qt, c[j*dims+t:])
			}
		}
	}
}

// codesAVX2 runs an AVX2 code kernel on queries 0–1 and 2–3 and adds the
// last dims % 16 codes' products.
func codesAVX2[T int8 | uint8](kernel func(q, c *T, rows, dims int, out *float32, ostride int), q, c []T, rows, dims int, out []float32, ostride int) {
	checkBlock(len(q), len(c), rows, dims, len(out), ostride)
	if rows == 0 {
		return
	}
	kernel(&q[0], &c[0], rows, dims, &out[0], ostride)
	kernel(&q[2*dims], &c[0], rows, dims, &out[2*ostride], ostride)
	if t := dims &^ 15; t < dims {
		for i := range 4 {
			qt := q[i*dims+t : (i+1)*dims]
			for j := range rows {
				out[i*ostride+j] += float32(dotCodes(qt, c[j*dims+t:]))
			}
		}
	}
}

func i8AVX2(q, c []int8, rows, dims int, out []float32, ostride int) {
	codesAVX2(dotI8AVX2, q, c, rows, dims, out, ostride)
}

func u8AVX2(q, c []uint8, rows, dims int, out []float32, ostride int) {
	codesAVX2(dotU8AVX2, q, c, rows, dims, out, ostride)
}

func i8VNNI(q, c []int8, rows, dims int, out []float32, ostride int) {
	checkBlock(len(q), len(c), rows, dims, len(out), ostride)
	if rows == 0 {
		return
	}
	var qoff [4]int32 // 128 · Σq_i: what the corpus codes' +128 added
	for i := range 4 {
		var s int32
		for _, x := range q[i*dims : (i+1)*dims] {
			s += int32(x)
		}
		qoff[i] = 128 * s
	}
	dotI8VNNI(&q[0], &c[0], rows, dims, &out[0], ostride, &qoff)
}

func binVPOPCNT4(q, c []uint64, rows, words, dims int, out []float32, ostride int) {
	checkBlock(len(q), len(c), rows, words, len(out), ostride)
	if rows > 0 {
		binVPOPCNT(&q[0], &c[0], rows, words, dims, &out[0], ostride)
	}
}

// maxAVX is maxGo with VMAXPS on the first multiple of 32 floats.
func maxAVX(s []float32) float32 {
	n := len(s) &^ 31
	if n == 0 {
		return maxGo(s)
	}
	m := maxF32AVX(&s[0], n)
	if n < len(s) {
		m = max(m, maxGo(s[n:]))
	}
	return m
}
