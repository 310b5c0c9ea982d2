package tokenize

import (
	"math"
	"strconv"
	"testing"
)

func TestSerdeFloat(t *testing.T) {
	tests := []struct {
		lit  string
		want float64
	}{
		{"0", 0},
		{"-0.0", math.Copysign(0, -1)},
		{"1.5", 1.5},
		{"-10.821784973144531", -10.821784973144531},
		{"12e-1", 1.2},
		{"1E2", 100},
		// 20 digits fill the u64 significand; the 4 past it only count in the exponent.
		{"123456789012345678901234", float64(uint64(12345678901234567890)) * 1e4},
		// 17 significant digits above 2^53: the significand rounds to float64
		// first, then divides.
		{"-9.0071992547409935", -(float64(uint64(90071992547409935)) / 1e16)},
		{"1e-400", 0},
	}
	for _, tt := range tests {
		got, err := serdeFloat(tt.lit)
		if err != nil || got != tt.want || math.Signbit(got) != math.Signbit(tt.want) {
			t.Errorf("serdeFloat(%q) = %v, %v; want %v", tt.lit, got, err, tt.want)
		}
	}
	for _, lit := range []string{"-9.0071992547409935", "123456789012345678901234"} {
		f, _ := serdeFloat(lit)
		if c, _ := strconv.ParseFloat(lit, 64); c == f {
			t.Errorf("%s: serde_json's and the correctly rounded value agree (%v); the case shows nothing", lit, c)
		}
	}
	for _, bad := range []string{"", "-", "1.", ".5", "1e", "1e+", "abc", "1.5x", "1e400"} {
		if _, err := serdeFloat(bad); err == nil {
			t.Errorf("serdeFloat(%q): no error", bad)
		}
	}
}
