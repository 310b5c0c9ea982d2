package tokenize

import (
	"fmt"
	"math"
	"strconv"
	"sync"
)

// serdeFloat converts a JSON number the way serde_json does without its
// float_roundtrip feature, which is how the Rust tokenizers library reads
// tokenizer.json: the digits as a u64 significand (digits past its range
// dropped, an integer part too long for it counted in the exponent), the
// significand rounded to float64, then one multiplication or division by
// the float64 closest to the power of ten. That is not always the correctly
// rounded value Go's strconv gives (about one number in ten of the Unigram
// scores of a real vocabulary lands one unit in the last place away), and
// Viterbi ties between segmentations of equal total score then fall the
// other way.
func serdeFloat(lit string) (float64, error) {
	bad := func() (float64, error) { return 0, fmt.Errorf("number %q", lit) }
	i, neg := 0, false
	if i < len(lit) && lit[i] == '-' {
		neg, i = true, i+1
	}
	start := i
	var sig uint64
	exp := 0
	full := false // the significand cannot take another digit
	digit := func(d uint64, fraction bool) {
		switch {
		case !full && sig <= (math.MaxUint64-d)/10:
			sig = sig*10 + d
			if fraction {
				exp--
			}
		case !fraction: // an integer digit past the significand's range still counts
			full = true
			exp++
		default:
			full = true
		}
	}
	for ; i < len(lit) && lit[i] >= '0' && lit[i] <= '9'; i++ {
		digit(uint64(lit[i]-'0'), false)
	}
	if i == start {
		return bad()
	}
	if i < len(lit) && lit[i] == '.' {
		i++
		fs := i
		for ; i < len(lit) && lit[i] >= '0' && lit[i] <= '9'; i++ {
			digit(uint64(lit[i]-'0'), true)
		}
		if i == fs {
			return bad()
		}
	}
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		eneg := false
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			eneg, i = lit[i] == '-', i+1
		}
		es := i
		e := 0
		for ; i < len(lit) && lit[i] >= '0' && lit[i] <= '9'; i++ {
			if e < 1<<30 {
				e = e*10 + int(lit[i]-'0')
			}
		}
		if i == es {
			return bad()
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if i != len(lit) {
		return bad()
	}
	return serdeFromParts(lit, neg, sig, exp)
}

// serdeFromParts is serde_json's f64_from_parts: the significand rounded to
// float64, then multiplied or divided by a power of ten.
func serdeFromParts(lit string, neg bool, sig uint64, exp int) (float64, error) {
	f := float64(sig)
	for {
		n := exp
		if n < 0 {
			n = -n
		}
		if n <= 308 {
			if exp >= 0 {
				f *= pow10Table()[n]
			} else {
				f /= pow10Table()[n]
			}
			break
		}
		if f == 0 {
			break
		}
		if exp >= 0 {
			return 0, fmt.Errorf("number %q out of range", lit)
		}
		f /= 1e308
		exp += 308
	}
	if math.IsInf(f, 0) {
		return 0, fmt.Errorf("number %q out of range", lit)
	}
	if neg {
		f = -f
	}
	return f, nil
}

var (
	pow10Once sync.Once
	pow10s    [309]float64
)

// pow10Table holds the float64 closest to each power of ten (Rust's 1eN literals).
func pow10Table() *[309]float64 {
	pow10Once.Do(func() {
		for n := range pow10s {
			pow10s[n], _ = strconv.ParseFloat("1e"+strconv.Itoa(n), 64)
		}
	})
	return &pow10s
}
