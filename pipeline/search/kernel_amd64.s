#include "textflag.h"

// The amd64 block kernels: queries × corpus rows as a register-tiled matrix
// product. Each scores a few query rows (q, rows n apart) against rows
// corpus rows (c, a multiple of 4, rows n apart) into
// out[i*ostride + j] (float32). See kernel_amd64.go for who calls which.
//
// Registers (12 general ones; R14, R15 and BP are left alone): SI the
// queries, DI the group of 4 corpus rows, R9 a row's bytes; in a group
// R12 and R10 point at queries 0 and 2, R13 and R11 at rows 0 and 2 (rows
// 1 and 3 are R9 further), all four advancing a step at a time; CX steps
// left, BX groups left, DX out (4 outputs further a group), R8 ostride in
// bytes, AX scratch.

// REDUCE4F_Y folds four ymm float32 accumulators into X0 = [Σa Σb Σc Σd].
#define REDUCE4F_Y(ya, yb, yc, yd) \
	VHADDPS yb, ya, Y0; \
	VHADDPS yd, yc, Y1; \
	VHADDPS Y1, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0

// REDUCE4F_Z is REDUCE4F_Y for four zmm accumulators.
#define REDUCE4F_Z(za, zb, zc, zd, ya, yb, yc, yd) \
	VEXTRACTF64X4 $1, za, Y0; \
	VADDPS Y0, ya, Y0; \
	VEXTRACTF64X4 $1, zb, Y1; \
	VADDPS Y1, yb, Y1; \
	VEXTRACTF64X4 $1, zc, Y2; \
	VADDPS Y2, yc, Y2; \
	VEXTRACTF64X4 $1, zd, Y3; \
	VADDPS Y3, yd, Y3; \
	REDUCE4F_Y(Y0, Y1, Y2, Y3)

// REDUCE4I_Y folds four ymm int32 accumulators into X0 = [Σa Σb Σc Σd].
#define REDUCE4I_Y(ya, yb, yc, yd) \
	VPHADDD yb, ya, Y0; \
	VPHADDD yd, yc, Y1; \
	VPHADDD Y1, Y0, Y0; \
	VEXTRACTI128 $1, Y0, X1; \
	VPADDD X1, X0, X0

// REDUCE4I_Z is REDUCE4I_Y for four zmm accumulators.
#define REDUCE4I_Z(za, zb, zc, zd, ya, yb, yc, yd) \
	VEXTRACTI64X4 $1, za, Y0; \
	VPADDD Y0, ya, Y0; \
	VEXTRACTI64X4 $1, zb, Y1; \
	VPADDD Y1, yb, Y1; \
	VEXTRACTI64X4 $1, zc, Y2; \
	VPADDD Y2, yc, Y2; \
	VEXTRACTI64X4 $1, zd, Y3; \
	VPADDD Y3, yd, Y3; \
	REDUCE4I_Y(Y0, Y1, Y2, Y3)

// ---- float32, AVX-512: 4 queries × 4 rows, 16 floats a step ----

// F32Z_STEP multiplies one step of 16 floats (loads by LD, which masks
// the tail) into the 16 accumulators Z16–Z31.
#define F32Z_STEP(LD) \
	LD(0(R13), Z0); \
	LD(0(R13)(R9*1), Z1); \
	LD(0(R11), Z2); \
	LD(0(R11)(R9*1), Z3); \
	LD(0(R12), Z4); \
	VFMADD231PS Z0, Z4, Z16; \
	VFMADD231PS Z1, Z4, Z17; \
	VFMADD231PS Z2, Z4, Z18; \
	VFMADD231PS Z3, Z4, Z19; \
	LD(0(R12)(R9*1), Z5); \
	VFMADD231PS Z0, Z5, Z20; \
	VFMADD231PS Z1, Z5, Z21; \
	VFMADD231PS Z2, Z5, Z22; \
	VFMADD231PS Z3, Z5, Z23; \
	LD(0(R10), Z6); \
	VFMADD231PS Z0, Z6, Z24; \
	VFMADD231PS Z1, Z6, Z25; \
	VFMADD231PS Z2, Z6, Z26; \
	VFMADD231PS Z3, Z6, Z27; \
	LD(0(R10)(R9*1), Z7); \
	VFMADD231PS Z0, Z7, Z28; \
	VFMADD231PS Z1, Z7, Z29; \
	VFMADD231PS Z2, Z7, Z30; \
	VFMADD231PS Z3, Z7, Z31

#define LDPS(m, z) VMOVUPS m, z
#define LDPS_MASK(m, z) VMOVUPS.Z m, K1, z

// ZERO16 clears the accumulators Z16–Z31.
#define ZERO16 \
	VPXORD Z16, Z16, Z16; VPXORD Z17, Z17, Z17; VPXORD Z18, Z18, Z18; VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; VPXORD Z21, Z21, Z21; VPXORD Z22, Z22, Z22; VPXORD Z23, Z23, Z23; \
	VPXORD Z24, Z24, Z24; VPXORD Z25, Z25, Z25; VPXORD Z26, Z26, Z26; VPXORD Z27, Z27, Z27; \
	VPXORD Z28, Z28, Z28; VPXORD Z29, Z29, Z29; VPXORD Z30, Z30, Z30; VPXORD Z31, Z31, Z31

// GROUP_START points R12/R10 at q0/q2 and R13/R11 at c0/c2 of the group.
#define GROUP_START \
	MOVQ SI, R12; \
	LEAQ (SI)(R9*2), R10; \
	MOVQ DI, R13; \
	LEAQ (DI)(R9*2), R11

#define ADVANCE(n) \
	ADDQ $n, R12; \
	ADDQ $n, R10; \
	ADDQ $n, R13; \
	ADDQ $n, R11

// GROUP_END moves on to the next group of four rows and four outputs.
#define GROUP_END \
	ADDQ $16, DX; \
	LEAQ (DI)(R9*4), DI

// STORE_Qi stores X0 as query i's 4 outputs of the group (STORE_Q3
// clobbers AX).
#define STORE_Q0 VMOVUPS X0, (DX)
#define STORE_Q1 VMOVUPS X0, (DX)(R8*1)
#define STORE_Q2 VMOVUPS X0, (DX)(R8*2)
#define STORE_Q3 LEAQ (DX)(R8*2), AX; VMOVUPS X0, (AX)(R8*1)

// func dotF32AVX512(q, c *float32, rows, dims int, out *float32, ostride int)
TEXT ·dotF32AVX512(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), SI
	MOVQ c+8(FP), DI
	MOVQ rows+16(FP), BX
	MOVQ dims+24(FP), R9
	MOVQ out+32(FP), DX
	MOVQ ostride+40(FP), R8
	SHLQ $2, R8
	MOVQ R9, CX
	ANDQ $15, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1 // the tail's floats
	SHLQ $2, R9
	SHRQ $2, BX
	JZ f32z_done

f32z_group:
	GROUP_START
	ZERO16
	MOVQ R9, CX
	SHRQ $6, CX
	JZ f32z_tail

f32z_step:
	F32Z_STEP(LDPS)
	ADVANCE(64)
	DECQ CX
	JNZ f32z_step

f32z_tail:
	KORTESTW K1, K1
	JZ f32z_reduce
	F32Z_STEP(LDPS_MASK)

f32z_reduce:
	REDUCE4F_Z(Z16, Z17, Z18, Z19, Y16, Y17, Y18, Y19)
	STORE_Q0
	REDUCE4F_Z(Z20, Z21, Z22, Z23, Y20, Y21, Y22, Y23)
	STORE_Q1
	REDUCE4F_Z(Z24, Z25, Z26, Z27, Y24, Y25, Y26, Y27)
	STORE_Q2
	REDUCE4F_Z(Z28, Z29, Z30, Z31, Y28, Y29, Y30, Y31)
	STORE_Q3
	GROUP_END
	DECQ BX
	JNZ f32z_group

f32z_done:
	VZEROUPPER
	RET

// ---- float32, AVX2 + FMA: 2 queries × 4 rows, 8 floats a step ----
// The dims & 7 last floats are the caller's.

// func dotF32AVX2(q, c *float32, rows, dims int, out *float32, ostride int)
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), SI
	MOVQ c+8(FP), DI
	MOVQ rows+16(FP), BX
	MOVQ dims+24(FP), R9
	MOVQ out+32(FP), DX
	MOVQ ostride+40(FP), R8
	SHLQ $2, R8
	SHLQ $2, R9
	SHRQ $2, BX
	JZ f32y_done

f32y_group:
	GROUP_START
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	MOVQ R9, CX
	SHRQ $5, CX
	JZ f32y_reduce

f32y_step:
	VMOVUPS (R13), Y0
	VMOVUPS (R13)(R9*1), Y1
	VMOVUPS (R11), Y2
	VMOVUPS (R11)(R9*1), Y3
	VMOVUPS (R12), Y4
	VFMADD231PS Y0, Y4, Y8
	VFMADD231PS Y1, Y4, Y9
	VFMADD231PS Y2, Y4, Y10
	VFMADD231PS Y3, Y4, Y11
	VMOVUPS (R12)(R9*1), Y5
	VFMADD231PS Y0, Y5, Y12
	VFMADD231PS Y1, Y5, Y13
	VFMADD231PS Y2, Y5, Y14
	VFMADD231PS Y3, Y5, Y15
	ADVANCE(32)
	DECQ CX
	JNZ f32y_step

f32y_reduce:
	REDUCE4F_Y(Y8, Y9, Y10, Y11)
	STORE_Q0
	REDUCE4F_Y(Y12, Y13, Y14, Y15)
	STORE_Q1
	GROUP_END
	DECQ BX
	JNZ f32y_group

f32y_done:
	VZEROUPPER
	RET

// ---- int8 / uint8, AVX2: 2 queries × 4 rows, 16 codes a step ----
// Codes widened to int16 (WIDEN: VPMOVSXBW for int8, VPMOVZXBW for uint8)
// and multiplied in pairs into int32 (VPMADDWD: exact, no saturation).
// The dims & 15 last codes are the caller's.

#define CODES_Y(WIDEN) \
	MOVQ q+0(FP), SI; \
	MOVQ c+8(FP), DI; \
	MOVQ rows+16(FP), BX; \
	MOVQ dims+24(FP), R9; \
	MOVQ out+32(FP), DX; \
	MOVQ ostride+40(FP), R8; \
	SHLQ $2, R8; \
	SHRQ $2, BX; \
	JZ codes_done; \
codes_group: \
	GROUP_START; \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y9, Y9, Y9; \
	VPXOR Y10, Y10, Y10; \
	VPXOR Y11, Y11, Y11; \
	VPXOR Y12, Y12, Y12; \
	VPXOR Y13, Y13, Y13; \
	VPXOR Y14, Y14, Y14; \
	VPXOR Y15, Y15, Y15; \
	MOVQ R9, CX; \
	SHRQ $4, CX; \
	JZ codes_reduce; \
codes_step: \
	WIDEN (R13), Y0; \
	WIDEN (R13)(R9*1), Y1; \
	WIDEN (R11), Y2; \
	WIDEN (R11)(R9*1), Y3; \
	WIDEN (R12), Y4; \
	VPMADDWD Y0, Y4, Y5; VPADDD Y5, Y8, Y8; \
	VPMADDWD Y1, Y4, Y5; VPADDD Y5, Y9, Y9; \
	VPMADDWD Y2, Y4, Y5; VPADDD Y5, Y10, Y10; \
	VPMADDWD Y3, Y4, Y5; VPADDD Y5, Y11, Y11; \
	WIDEN (R12)(R9*1), Y4; \
	VPMADDWD Y0, Y4, Y5; VPADDD Y5, Y12, Y12; \
	VPMADDWD Y1, Y4, Y5; VPADDD Y5, Y13, Y13; \
	VPMADDWD Y2, Y4, Y5; VPADDD Y5, Y14, Y14; \
	VPMADDWD Y3, Y4, Y5; VPADDD Y5, Y15, Y15; \
	ADVANCE(16); \
	DECQ CX; \
	JNZ codes_step; \
codes_reduce: \
	REDUCE4I_Y(Y8, Y9, Y10, Y11); \
	VCVTDQ2PS X0, X0; \
	STORE_Q0; \
	REDUCE4I_Y(Y12, Y13, Y14, Y15); \
	VCVTDQ2PS X0, X0; \
	STORE_Q1; \
	GROUP_END; \
	DECQ BX; \
	JNZ codes_group; \
codes_done: \
	VZEROUPPER; \
	RET

// func dotI8AVX2(q, c *int8, rows, dims int, out *float32, ostride int)
TEXT ·dotI8AVX2(SB), NOSPLIT, $0-48
	CODES_Y(VPMOVSXBW)

// func dotU8AVX2(q, c *uint8, rows, dims int, out *float32, ostride int)
TEXT ·dotU8AVX2(SB), NOSPLIT, $0-48
	CODES_Y(VPMOVZXBW)

// ---- int8, AVX-512 VNNI: 4 queries × 4 rows, 64 codes a step ----
// VPDPBUSD multiplies unsigned bytes by signed ones: the corpus's codes
// take +128 (XOR 0x80), so each sum is q·c + 128·Σq, and qoff[i] =
// 128·Σq_i is taken off at the end (exact in int32).

#define I8Z_STEP(LD) \
	LD(0(R13), Z0); \
	LD(0(R13)(R9*1), Z1); \
	LD(0(R11), Z2); \
	LD(0(R11)(R9*1), Z3); \
	VPXORD Z8, Z0, Z0; \
	VPXORD Z8, Z1, Z1; \
	VPXORD Z8, Z2, Z2; \
	VPXORD Z8, Z3, Z3; \
	LD(0(R12), Z4); \
	VPDPBUSD Z4, Z0, Z16; \
	VPDPBUSD Z4, Z1, Z17; \
	VPDPBUSD Z4, Z2, Z18; \
	VPDPBUSD Z4, Z3, Z19; \
	LD(0(R12)(R9*1), Z5); \
	VPDPBUSD Z5, Z0, Z20; \
	VPDPBUSD Z5, Z1, Z21; \
	VPDPBUSD Z5, Z2, Z22; \
	VPDPBUSD Z5, Z3, Z23; \
	LD(0(R10), Z6); \
	VPDPBUSD Z6, Z0, Z24; \
	VPDPBUSD Z6, Z1, Z25; \
	VPDPBUSD Z6, Z2, Z26; \
	VPDPBUSD Z6, Z3, Z27; \
	LD(0(R10)(R9*1), Z7); \
	VPDPBUSD Z7, Z0, Z28; \
	VPDPBUSD Z7, Z1, Z29; \
	VPDPBUSD Z7, Z2, Z30; \
	VPDPBUSD Z7, Z3, Z31

#define LDB(m, z) VMOVDQU8 m, z
#define LDB_MASK(m, z) VMOVDQU8.Z m, K1, z

// FINISH_I8(off) takes the qoff entry at off(AX) off X0 and converts it to float32.
#define FINISH_I8(off) \
	VPBROADCASTD off(AX), X1; \
	VPSUBD X1, X0, X0; \
	VCVTDQ2PS X0, X0

// func dotI8VNNI(q, c *int8, rows, dims int, out *float32, ostride int, qoff *[4]int32)
TEXT ·dotI8VNNI(SB), NOSPLIT, $0-56
	MOVQ q+0(FP), SI
	MOVQ c+8(FP), DI
	MOVQ rows+16(FP), BX
	MOVQ dims+24(FP), R9
	MOVQ out+32(FP), DX
	MOVQ ostride+40(FP), R8
	SHLQ $2, R8
	MOVQ R9, CX
	ANDQ $63, CX
	MOVQ $1, AX
	SHLQ CX, AX
	DECQ AX
	KMOVQ AX, K1 // the tail's codes
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z8
	SHRQ $2, BX
	JZ i8z_done

i8z_group:
	GROUP_START
	ZERO16
	MOVQ R9, CX
	SHRQ $6, CX
	JZ i8z_tail

i8z_step:
	I8Z_STEP(LDB)
	ADVANCE(64)
	DECQ CX
	JNZ i8z_step

i8z_tail:
	KORTESTQ K1, K1
	JZ i8z_reduce
	I8Z_STEP(LDB_MASK)

i8z_reduce:
	MOVQ qoff+48(FP), AX
	REDUCE4I_Z(Z16, Z17, Z18, Z19, Y16, Y17, Y18, Y19)
	FINISH_I8(0)
	STORE_Q0
	REDUCE4I_Z(Z20, Z21, Z22, Z23, Y20, Y21, Y22, Y23)
	FINISH_I8(4)
	STORE_Q1
	REDUCE4I_Z(Z24, Z25, Z26, Z27, Y24, Y25, Y26, Y27)
	FINISH_I8(8)
	STORE_Q2
	REDUCE4I_Z(Z28, Z29, Z30, Z31, Y28, Y29, Y30, Y31)
	FINISH_I8(12)
	LEAQ (DX)(R8*2), AX
	VMOVUPS X0, (AX)(R8*1)
	GROUP_END
	DECQ BX
	JNZ i8z_group

i8z_done:
	VZEROUPPER
	RET

// ---- binary, AVX-512 VPOPCNTDQ: 4 queries × 4 rows, 8 words a step ----
// Each lane counts the differing bits of one word (VPXORQ, VPOPCNTQ); the
// 64-bit counts are narrowed to 32 bits (VPMOVQD) before the fold, and
// the score is dims − the count.

#define BIN_PAIR(z, acc) \
	VPXORQ z, Z4, Z5; \
	VPOPCNTQ Z5, Z5; \
	VPADDQ Z5, acc, acc

#define BIN_Q(acc0, acc1, acc2, acc3) \
	BIN_PAIR(Z0, acc0); \
	BIN_PAIR(Z1, acc1); \
	BIN_PAIR(Z2, acc2); \
	BIN_PAIR(Z3, acc3)

#define BIN_STEP(LD) \
	LD(0(R13), Z0); \
	LD(0(R13)(R9*1), Z1); \
	LD(0(R11), Z2); \
	LD(0(R11)(R9*1), Z3); \
	LD(0(R12), Z4); \
	BIN_Q(Z16, Z17, Z18, Z19); \
	LD(0(R12)(R9*1), Z4); \
	BIN_Q(Z20, Z21, Z22, Z23); \
	LD(0(R10), Z4); \
	BIN_Q(Z24, Z25, Z26, Z27); \
	LD(0(R10)(R9*1), Z4); \
	BIN_Q(Z28, Z29, Z30, Z31)

#define LDQ(m, z) VMOVDQU64 m, z
#define LDQ_MASK(m, z) VMOVDQU64.Z m, K1, z

// BIN_REDUCE folds four accumulators of counts into X0 = dims − [Σa Σb Σc Σd] as float32.
#define BIN_REDUCE(za, zb, zc, zd) \
	VPMOVQD za, Y0; \
	VPMOVQD zb, Y1; \
	VPMOVQD zc, Y2; \
	VPMOVQD zd, Y3; \
	REDUCE4I_Y(Y0, Y1, Y2, Y3); \
	VPSUBD X0, X9, X0; \
	VCVTDQ2PS X0, X0

// func binVPOPCNT(q, c *uint64, rows, words, dims int, out *float32, ostride int)
TEXT ·binVPOPCNT(SB), NOSPLIT, $0-56
	MOVQ q+0(FP), SI
	MOVQ c+8(FP), DI
	MOVQ rows+16(FP), BX
	MOVQ words+24(FP), R9
	MOVQ dims+32(FP), AX
	MOVQ AX, X9
	VPBROADCASTD X9, X9
	MOVQ out+40(FP), DX
	MOVQ ostride+48(FP), R8
	SHLQ $2, R8
	MOVQ R9, CX
	ANDQ $7, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1 // the tail's words
	SHLQ $3, R9
	SHRQ $2, BX
	JZ bin_done

bin_group:
	GROUP_START
	ZERO16
	MOVQ R9, CX
	SHRQ $6, CX
	JZ bin_tail

bin_step:
	BIN_STEP(LDQ)
	ADVANCE(64)
	DECQ CX
	JNZ bin_step

bin_tail:
	KORTESTW K1, K1
	JZ bin_reduce
	BIN_STEP(LDQ_MASK)

bin_reduce:
	BIN_REDUCE(Z16, Z17, Z18, Z19)
	STORE_Q0
	BIN_REDUCE(Z20, Z21, Z22, Z23)
	STORE_Q1
	BIN_REDUCE(Z24, Z25, Z26, Z27)
	STORE_Q2
	BIN_REDUCE(Z28, Z29, Z30, Z31)
	STORE_Q3
	GROUP_END
	DECQ BX
	JNZ bin_group

bin_done:
	VZEROUPPER
	RET

// ---- the largest of n float32s (n a multiple of 32, ≥ 32), AVX ----

// func maxF32AVX(s *float32, n int) float32
TEXT ·maxF32AVX(SB), NOSPLIT, $0-20
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	VMOVUPS (SI), Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	SHRQ $5, CX

max_step:
	VMAXPS (SI), Y0, Y0
	VMAXPS 32(SI), Y1, Y1
	VMAXPS 64(SI), Y2, Y2
	VMAXPS 96(SI), Y3, Y3
	ADDQ $128, SI
	DECQ CX
	JNZ max_step
	VMAXPS Y1, Y0, Y0
	VMAXPS Y3, Y2, Y2
	VMAXPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET
