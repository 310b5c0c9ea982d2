package tokenize

import (
	"sort"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Code point properties as the Hugging Face tokenizers build synapse is
// checked against defines them (see gen_hfunicode.go for where they come
// from and why they are not Go's), and the Unicode normalization forms its
// normalizers apply.

// hfFlags holds a code point's properties.
type hfFlags uint8

// Properties, numbered as gen_hfunicode.go writes them.
const (
	hfOther   hfFlags = 1 << iota // Cc Cf Co Cs
	hfWhite                       // White_Space
	hfPunct                       // P*
	hfMn                          // Mn
	hfMark                        // M*
	hfWord                        // the regex \w
	hfNumeric                     // N*
)

type hfRange struct {
	start uint32
	flags uint8
}

// hfNoCanonical is the one code point whose canonical decomposition (Unicode
// 13) is newer than the normalization crate's: NFD and NFC leave it alone.
const hfNoCanonical = 0x11938

// hfTable is a two-stage lookup table of hfFlags.
type hfTable struct {
	stage1 [maxCodepoint >> 8]uint16
	stage2 []hfFlags
}

var (
	hfTableOnce sync.Once
	hfTablePtr  *hfTable
)

func hfFlagsTable() *hfTable {
	hfTableOnce.Do(func() {
		t := &hfTable{}
		index := map[[256]hfFlags]uint16{}
		ri := 0
		for blk := 0; blk < maxCodepoint>>8; blk++ {
			var b [256]hfFlags
			for i := range b {
				c := uint32(blk<<8 | i)
				for ri+1 < len(hfFlagRanges) && hfFlagRanges[ri+1].start <= c {
					ri++
				}
				b[i] = hfFlags(hfFlagRanges[ri].flags)
			}
			id, ok := index[b]
			if !ok {
				id = uint16(len(t.stage2) >> 8)
				index[b] = id
				t.stage2 = append(t.stage2, b[:]...)
			}
			t.stage1[blk] = id
		}
		hfTablePtr = t
	})
	return hfTablePtr
}

// hfOf returns the properties of code point c.
func hfOf(c rune) hfFlags {
	if uint32(c) >= maxCodepoint {
		return 0
	}
	t := hfFlagsTable()
	return t.stage2[int(t.stage1[c>>8])<<8|int(c&0xFF)]
}

// hfAppendLower appends c's lowercase (Rust's char::to_lowercase).
func hfAppendLower(dst []rune, c rune) []rune {
	if c < 0x80 {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		return append(dst, c)
	}
	if c == 0x130 {
		return append(dst, 'i', 0x307)
	}
	i := sort.Search(len(hfAddLower), func(i int) bool { return hfAddLower[i][0] >= uint32(c) })
	if i < len(hfAddLower) && hfAddLower[i][0] == uint32(c) {
		return append(dst, rune(hfAddLower[i][1]))
	}
	return append(dst, toLower(c))
}

// hfCompatExempt reports whether NFKD/NFKC leave c alone.
func hfCompatExempt(c rune) bool {
	i := sort.Search(len(hfNoCompat), func(i int) bool { return hfNoCompat[i][1] >= uint32(c) })
	return i < len(hfNoCompat) && hfNoCompat[i][0] <= uint32(c)
}

// Hangul syllable composition constants (Unicode 3.12).
const (
	hangulSBase  = 0xAC00
	hangulLBase  = 0x1100
	hangulVBase  = 0x1161
	hangulTBase  = 0x11A7
	hangulTCount = 28
	hangulNCount = 21 * 28
	hangulSCount = 19 * hangulNCount
)

// decompose appends the full decomposition of c (form NFD or NFKD) to dst.
func decompose(dst []rune, c rune, compat bool) []rune {
	if c < 0xC0 && !compat || c < 0xA0 {
		return append(dst, c)
	}
	if c >= hangulSBase && c < hangulSBase+hangulSCount {
		s := c - hangulSBase
		dst = append(dst, hangulLBase+s/hangulNCount, hangulVBase+(s%hangulNCount)/hangulTCount)
		if t := s % hangulTCount; t != 0 {
			dst = append(dst, hangulTBase+t)
		}
		return dst
	}
	if c == hfNoCanonical || compat && hfCompatExempt(c) {
		return append(dst, c)
	}
	form := norm.NFD
	if compat {
		form = norm.NFKD
	}
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], c)
	d := form.Properties(buf[:n]).Decomposition()
	if d == nil {
		return append(dst, c)
	}
	for len(d) > 0 {
		r, size := utf8.DecodeRune(d)
		dst = append(dst, r)
		d = d[size:]
	}
	return dst
}

// ccc returns c's canonical combining class.
func ccc(c rune) uint8 {
	if c < 0x300 {
		return 0
	}
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], c)
	return norm.NFD.Properties(buf[:n]).CCC()
}
