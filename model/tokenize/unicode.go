package tokenize

import (
	"sort"
	"sync"
	"unicode/utf8"
)

//go:generate go run gen_unicode.go
//go:generate go run gen_hfunicode.go

// Code point properties as llama.cpp's unicode.cpp defines them. The tables
// (unicode_tables.go) are generated from Go's Unicode 15.0.0 data plus the
// Unicode 15.1 additions, the version llama.cpp's unicode-data.cpp holds;
// TestUnicodeTablesMatchLlamaCpp checks them against that file, code point by
// code point, when a llama.cpp checkout is at hand.

// cptFlags holds a code point's llama.cpp flags: exactly one category bit
// (the General_Category group) plus flagWhitespace.
type cptFlags uint16

// Flags, numbered as llama.cpp's unicode_cpt_flags.
const (
	flagUndefined   cptFlags = 0x0001 // Cn, and everything past U+10FFFF
	flagNumber      cptFlags = 0x0002 // \p{N}
	flagLetter      cptFlags = 0x0004 // \p{L}
	flagSeparator   cptFlags = 0x0008 // \p{Z}
	flagMark        cptFlags = 0x0010 // \p{M}
	flagPunctuation cptFlags = 0x0020 // \p{P}
	flagSymbol      cptFlags = 0x0040 // \p{S}
	flagControl     cptFlags = 0x0080 // \p{C}
	flagWhitespace  cptFlags = 0x0100 // llama.cpp's \s: the White_Space list below
)

// whitespaceCpts is llama.cpp's unicode_set_whitespace (Unicode White_Space).
var whitespaceCpts = [...]rune{
	0x0009, 0x000A, 0x000B, 0x000C, 0x000D, 0x0020, 0x0085, 0x00A0, 0x1680,
	0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008,
	0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
}

type cptRange struct {
	start uint32
	flags uint16
}

type nfdRange struct {
	first, last, nfd uint32
}

const maxCodepoint = 0x110000

// cptTable is a two-stage lookup table of cptFlags: block index, then the
// 256 flags of that block. Identical blocks are stored once.
type cptTable struct {
	stage1 [maxCodepoint >> 8]uint16
	stage2 []cptFlags
}

var (
	cptTableOnce sync.Once
	cptTablePtr  *cptTable
)

// unicodeFlags returns the shared flags table, building it on first use.
func unicodeFlags() *cptTable {
	cptTableOnce.Do(func() { cptTablePtr = buildCptTable() })
	return cptTablePtr
}

func buildCptTable() *cptTable {
	t := &cptTable{}
	index := map[[256]cptFlags]uint16{}
	ws := map[rune]bool{}
	for _, c := range whitespaceCpts {
		ws[c] = true
	}
	ri := 0
	for blk := 0; blk < maxCodepoint>>8; blk++ {
		var b [256]cptFlags
		for i := range b {
			c := uint32(blk<<8 | i)
			for ri+1 < len(cptCategoryRanges) && cptCategoryRanges[ri+1].start <= c {
				ri++
			}
			b[i] = cptFlags(cptCategoryRanges[ri].flags)
			if ws[rune(c)] {
				b[i] |= flagWhitespace
			}
		}
		id, ok := index[b]
		if !ok {
			id = uint16(len(t.stage2) >> 8)
			index[b] = id
			t.stage2 = append(t.stage2, b[:]...)
		}
		t.stage1[blk] = id
	}
	return t
}

// of returns the flags of code point c; past U+10FFFF it is flagUndefined,
// as in llama.cpp.
func (t *cptTable) of(c rune) cptFlags {
	if uint32(c) >= maxCodepoint {
		return flagUndefined
	}
	return t.stage2[int(t.stage1[c>>8])<<8|int(c&0xFF)]
}

// toLower is llama.cpp's unicode_tolower: the simple lowercase mapping.
func toLower(c rune) rune {
	if c < 0x80 {
		if 'A' <= c && c <= 'Z' {
			return c + ('a' - 'A')
		}
		return c
	}
	i := sort.Search(len(lowerPairs), func(i int) bool { return lowerPairs[i][0] >= uint32(c) })
	if i < len(lowerPairs) && lowerPairs[i][0] == uint32(c) {
		return rune(lowerPairs[i][1])
	}
	return c
}

// nfdFirst is llama.cpp's unicode_cpts_normalize_nfd for one code point: the
// first code point of its canonical decomposition.
func nfdFirst(c rune) rune {
	if c < 0xC0 {
		return c
	}
	i := sort.Search(len(nfdRanges), func(i int) bool { return nfdRanges[i].last >= uint32(c) })
	if i < len(nfdRanges) && nfdRanges[i].first <= uint32(c) {
		return rune(nfdRanges[i].nfd)
	}
	return c
}

// decodeRune decodes one code point at s[i:] as llama.cpp's
// unicode_cpt_from_utf8 does: the sequence length comes from the lead byte,
// the continuation bytes must be 10xxxxxx, and anything else is one invalid
// byte, returned as U+FFFD with size 1. Unlike utf8.DecodeRuneInString it
// accepts overlong forms, surrogates and values past U+10FFFF; on valid UTF-8
// the two agree.
func decodeRune(s string, i int) (rune, int) {
	b := s[i]
	if b < 0x80 {
		return rune(b), 1
	}
	if b < 0xE0 && b >= 0xC0 && i+1 < len(s) && s[i+1]&0xC0 == 0x80 {
		return rune(b&0x1F)<<6 | rune(s[i+1]&0x3F), 2
	}
	if b&0xF0 == 0xE0 && i+2 < len(s) && s[i+1]&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80 {
		return rune(b&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
	}
	if b&0xF8 == 0xF0 && i+3 < len(s) && s[i+1]&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80 && s[i+3]&0xC0 == 0x80 {
		return rune(b&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F), 4
	}
	return utf8.RuneError, 1
}

// repairUTF8 returns s with every byte that is not part of a valid UTF-8
// sequence (utf8.DecodeRuneInString's definition) replaced by U+FFFD, and the
// number of bytes replaced. Valid input is returned as is, without copying.
func repairUTF8(s string) (string, int) {
	if utf8.ValidString(s) {
		return s, 0
	}
	out := make([]byte, 0, len(s)+len(s)/2)
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			out = append(out, "\uFFFD"...)
			n++
			i++
			continue
		}
		out = append(out, s[i:i+size]...)
		i += size
	}
	return string(out), n
}
