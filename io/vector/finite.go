package vector

// NonFinite is the index of v's first NaN or infinite value, or -1 when
// every value is finite. No run writes such a vector (the engine's answers
// are refused, a --previous output's rows embedded again, a search's
// inputs refused): this is the one check all of them apply.
func NonFinite(v []float32) int {
	for i, x := range v {
		// x − x is 0 for a finite x and NaN for NaN and ±Inf.
		if f := float64(x); f-f != 0 {
			return i
		}
	}
	return -1
}
