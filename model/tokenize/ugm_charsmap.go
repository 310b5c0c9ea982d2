package tokenize

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// ugmCharsmap is SentencePiece's precompiled normalization map
// (tokenizer.ggml.precompiled_charsmap), read as llama.cpp's
// llm_tokenizer_ugm does:
//
//	u32 xcda_blob_size (little-endian)
//	xcda_blob_size bytes: XOR-compressed compact double array (XCDA), u32 entries
//	the rest: NUL-terminated replacement strings
//
// Each XCDA entry packs BASE in bits 10-30 (shifted left 8 more when bit 9 is
// set), LCHECK in bits 0-7 (plus bit 31), LEAF in bit 8, and, in a leaf's
// value node, the replacement's offset in bits 0-30. The child of node s over
// byte c is s ^ c, valid when its LCHECK is c.
type ugmCharsmap struct {
	xcda []uint32
	repl string
}

var errCharsmap = errors.New("precompiled charsmap")

func newUGMCharsmap(b []byte) (*ugmCharsmap, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, too small for the header", errCharsmap, len(b))
	}
	size := uint64(binary.LittleEndian.Uint32(b))
	if size+4 >= uint64(len(b)) {
		return nil, fmt.Errorf("%w: XCDA size %d out of bounds (%d bytes)", errCharsmap, size, len(b))
	}
	m := &ugmCharsmap{xcda: make([]uint32, size/4), repl: string(b[4+size:])}
	for i := range m.xcda {
		m.xcda[i] = binary.LittleEndian.Uint32(b[4+4*i:])
	}
	return m, nil
}

func xcdaBase(n uint32) uint32   { return (n >> 10) << ((n & (1 << 9)) >> 6) }
func xcdaLCheck(n uint32) uint32 { return n & ((1 << 31) | 0xff) }
func xcdaLeaf(n uint32) bool     { return (n>>8)&1 == 1 }
func xcdaValue(n uint32) uint32  { return n & ((1 << 31) - 1) }

// match returns the replacement for the longest prefix of s the map knows,
// and that prefix's length; n == 0 when there is none.
//
// llama.cpp throws when the walk leaves the array or a replacement is not
// terminated; here such a map entry is treated as no match.
func (m *ugmCharsmap) match(s string) (repl string, n int) {
	if m == nil || len(m.xcda) == 0 {
		return "", 0
	}
	x := m.xcda
	node := xcdaBase(x[0])
	var off uint32
	for i := 0; i < len(s); i++ {
		c := uint32(s[i])
		if c == 0 {
			break
		}
		node ^= c
		if int(node) >= len(x) || xcdaLCheck(x[node]) != c {
			break
		}
		leaf := xcdaLeaf(x[node])
		node ^= xcdaBase(x[node])
		if leaf {
			if int(node) >= len(x) {
				break
			}
			n = i + 1
			off = xcdaValue(x[node])
		}
	}
	if n == 0 || int(off) >= len(m.repl) {
		return "", 0
	}
	r := m.repl[off:]
	if j := strings.IndexByte(r, 0); j >= 0 {
		return r[:j], n
	}
	return "", 0
}
