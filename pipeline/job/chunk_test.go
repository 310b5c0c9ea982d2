package job

import (
	"reflect"
	"testing"

	"github.com/synapse-embed/synapse/model/tokenize"
)

func toks(n int) []tokenize.Token {
	out := make([]tokenize.Token, n)
	for i := range out {
		out[i] = tokenize.Token{ID: int32(1000 + i), Start: int32(2 * i), End: int32(2*i + 1)}
	}
	return out
}

func TestChunkingCut(t *testing.T) {
	c := Chunking{Window: 4, Overlap: 1, Prefix: []int32{101}, Suffix: []int32{102}}
	tc := Chunking{Window: 4, Prefix: []int32{101}, Suffix: []int32{102}, Truncate: true}
	tests := []struct {
		name   string
		c      Chunking
		n      int
		ranges [][2]int32
	}{
		{"empty", c, 0, [][2]int32{{0, 0}}},
		{"fits", c, 3, [][2]int32{{0, 3}}},
		{"exact", c, 4, [][2]int32{{0, 4}}},
		{"two", c, 5, [][2]int32{{0, 4}, {3, 5}}},
		{"three", c, 10, [][2]int32{{0, 4}, {3, 7}, {6, 10}}},
		{"truncate empty", tc, 0, [][2]int32{{0, 0}}},
		{"truncate fits", tc, 4, [][2]int32{{0, 4}}},
		{"truncate long", tc, 10, [][2]int32{{0, 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.c.Cut(toks(tt.n))
			var ranges [][2]int32
			for i, ch := range got {
				ranges = append(ranges, [2]int32{ch.TokenStart, ch.TokenEnd})
				if ch.Index != int32(i) {
					t.Errorf("chunk %d: index %d; want %d", i, ch.Index, i)
				}
				n := int(ch.TokenEnd - ch.TokenStart)
				if len(ch.IDs) != n+2 || ch.IDs[0] != 101 || ch.IDs[len(ch.IDs)-1] != 102 {
					t.Errorf("chunk %d ids = %v; want [101] + %d tokens + [102]", i, ch.IDs, n)
				}
				if n > 0 && (ch.IDs[1] != 1000+ch.TokenStart || ch.ByteStart != 2*ch.TokenStart || ch.ByteEnd != 2*ch.TokenEnd-1) {
					t.Errorf("chunk %d: ids %v chars [%d,%d) do not match tokens [%d,%d)", i, ch.IDs, ch.ByteStart, ch.ByteEnd, ch.TokenStart, ch.TokenEnd)
				}
			}
			if !reflect.DeepEqual(ranges, tt.ranges) {
				t.Errorf("got ranges %v; want %v", ranges, tt.ranges)
			}
		})
	}
}

func TestChunkingValidate(t *testing.T) {
	for _, c := range []Chunking{{Window: 0}, {Window: 4, Overlap: 4}, {Window: 4, Overlap: -1}} {
		if c.Validate() == nil {
			t.Errorf("Validate(%+v) = nil; want an error", c)
		}
	}
	if err := (Chunking{Window: 4, Overlap: 3}).Validate(); err != nil {
		t.Errorf("Validate = %v; want nil", err)
	}
}
