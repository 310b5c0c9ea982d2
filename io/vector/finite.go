package vector

import "unsafe"

// NonFinite is the index of v's first NaN or infinite value, or -1 when
// every value is finite. No run writes such a vector (the engine's answers
// are refused, a --previous output's rows embedded again, a search's
// inputs refused): this is the one check all of them apply.
//
// A float32 is NaN or infinite when its 8 exponent bits are all ones;
// adding 1 below them then carries into the sign bit, which is what eight
// values at a time are tested for, without a branch each.
func NonFinite(v []float32) int {
	const exp, carry, sign = 0x7f800000, 0x00800000, 0x80000000
	u := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(v))), len(v))
	i := 0
	for ; i+8 <= len(u); i += 8 {
		x := u[i : i+8 : i+8]
		if ((x[0]&exp+carry)|(x[1]&exp+carry)|(x[2]&exp+carry)|(x[3]&exp+carry)|
			(x[4]&exp+carry)|(x[5]&exp+carry)|(x[6]&exp+carry)|(x[7]&exp+carry))&sign != 0 {
			break
		}
	}
	for ; i < len(u); i++ {
		if u[i]&exp == exp {
			return i
		}
	}
	return -1
}
