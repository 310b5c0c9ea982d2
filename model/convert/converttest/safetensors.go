package converttest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/synapse-embed/synapse/model/safetensors"
)

// round returns v as the dtype ("F16", "BF16"; "" or "F32": unchanged)
// stores it, back in float32: what the converter reads from such a file.
func round(v float32, dtype string) float32 {
	switch dtype {
	case "F16":
		return fromHalf(toHalf(v))
	case "BF16":
		return math.Float32frombits(uint32(toBF16(v)) << 16)
	}
	return v
}

// toBF16 rounds v to bfloat16, to nearest even.
func toBF16(v float32) uint16 {
	b := math.Float32bits(v)
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// toHalf rounds a finite v to IEEE binary16, to nearest even (subnormals
// included; beyond 65504 it saturates, which the generated weights never
// reach).
func toHalf(v float32) uint16 {
	var sign uint16
	x := float64(v)
	if x < 0 {
		sign, x = 0x8000, -x
	}
	if x < math.Ldexp(1, -14) { // subnormal: a multiple of 2^-24
		return sign | uint16(math.RoundToEven(x*(1<<24)))
	}
	frac, exp := math.Frexp(x) // x = frac·2^exp, frac in [0.5, 1)
	e := exp - 1
	m := math.RoundToEven((frac*2 - 1) * 1024)
	if m == 1024 {
		e, m = e+1, 0
	}
	if e > 15 {
		return sign | 0x7bff
	}
	return sign | uint16(e+15)<<10 | uint16(m)
}

// fromHalf is binary16's value.
func fromHalf(h uint16) float32 {
	e, m := int(h>>10)&0x1f, float64(h&0x3ff)
	v := math.Ldexp(m, -24)
	if e > 0 {
		v = math.Ldexp(1+m/1024, e-15)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return float32(v)
}

// WriteSafetensors writes tensors to path as a safetensors file of dtype
// ("F32", "F16" or "BF16"); F16 and BF16 values are rounded to it.
func WriteSafetensors(path string, t Tensors, dtype string) error {
	if dtype == "" || dtype == "F32" {
		return safetensors.Write(path, t.Values, t.Shapes)
	}
	names := make([]string, 0, len(t.Values))
	for n := range t.Values {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr := map[string]safetensors.Tensor{}
	var data []byte
	for _, n := range names {
		begin := int64(len(data))
		for _, v := range t.Values[n] {
			h := toBF16(v)
			if dtype == "F16" {
				h = toHalf(v)
			}
			data = binary.LittleEndian.AppendUint16(data, h)
		}
		hdr[n] = safetensors.Tensor{DType: dtype, Shape: t.Shapes[n], Offsets: [2]int64{begin, int64(len(data))}}
	}
	hb, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
	return os.WriteFile(path, append(append(out, hb...), data...), 0o644)
}

// writeShards writes t as n safetensors files model-0000K-of-0000N and
// model.safetensors.index.json, tensors dealt out in name order.
func writeShards(dir string, t Tensors, dtype string, n int) error {
	names := make([]string, 0, len(t.Values))
	for name := range t.Values {
		names = append(names, name)
	}
	sort.Strings(names)
	shards := make([]Tensors, n)
	for i := range shards {
		shards[i] = Tensors{Values: map[string][]float32{}, Shapes: map[string][]int64{}}
	}
	index := map[string]string{}
	for i, name := range names {
		k := i % n
		shards[k].Values[name], shards[k].Shapes[name] = t.Values[name], t.Shapes[name]
		index[name] = fmt.Sprintf("model-%05d-of-%05d.safetensors", k+1, n)
	}
	for k, s := range shards {
		if err := WriteSafetensors(filepath.Join(dir, fmt.Sprintf("model-%05d-of-%05d.safetensors", k+1, n)), s, dtype); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{}, "weight_map": index}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), b, 0o644)
}
