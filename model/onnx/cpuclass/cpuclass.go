// Package cpuclass names the class of an x86-64 CPU by the features ONNX
// Runtime chooses its int8 kernels by (docs/onnx.md, "int8 on every CPU").
// A quantized variant's quality figures are recorded with the class they
// were measured on.
package cpuclass

import "golang.org/x/sys/cpu"

// The classes, most capable first.
const (
	AMX        = "amx"         // AMX-INT8 tiles
	AVX512VNNI = "avx512-vnni" // vpdpbusd on 512 bits
	AVXVNNI    = "avx-vnni"    // vpdpbusd on 256 bits
	AVX512     = "avx512"      // AVX-512 BW without VNNI: vpmaddubsw
	AVX2       = "avx2"        // vpmaddubsw on 256 bits
	Baseline   = "baseline"    // SSE only
	Other      = "other"       // not x86-64
)

// Of returns this CPU's class.
func Of() string {
	if !cpu.X86.HasSSE2 {
		return Other
	}
	switch {
	case cpu.X86.HasAMXInt8:
		return AMX
	case cpu.X86.HasAVX512VNNI:
		return AVX512VNNI
	case cpu.X86.HasAVXVNNI:
		return AVXVNNI
	case cpu.X86.HasAVX512BW:
		return AVX512
	case cpu.X86.HasAVX2:
		return AVX2
	}
	return Baseline
}

// Saturates reports whether ONNX Runtime multiplies uint8 by int8 on class
// with vpmaddubsw, whose int16 sums saturate for 8-bit weights.
func Saturates(class string) bool { return class == AVX512 || class == AVX2 }
