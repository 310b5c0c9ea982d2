package tokenize

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestUnicodeTablesMatchLlamaCpp compares the generated tables with
// llama.cpp's src/unicode-data.cpp, code point by code point. It needs a
// llama.cpp checkout: set SYNAPSE_LLAMA_SRC to its root (the git bundle in the
// node-llama-cpp npm package that `make setup` pins is the matching release).
func TestUnicodeTablesMatchLlamaCpp(t *testing.T) {
	root := os.Getenv("SYNAPSE_LLAMA_SRC")
	if root == "" {
		t.Skip("SYNAPSE_LLAMA_SRC not set")
	}
	flags, lower, nfd := parseLlamaUnicodeData(t, filepath.Join(root, "src", "unicode-data.cpp"))
	tab := unicodeFlags()
	bad := 0
	for c := rune(0); c < maxCodepoint; c++ {
		want := flags(c)
		if ws := isWhitespaceListed(c); ws {
			want |= flagWhitespace
		}
		if got := tab.of(c); got != want && bad < 20 {
			t.Errorf("flags(U+%04X) = %#x; want %#x", c, got, want)
			bad++
		}
		wl := c
		if l, ok := lower[c]; ok {
			wl = l
		}
		if got := toLower(c); got != wl && bad < 20 {
			t.Errorf("toLower(U+%04X) = U+%04X; want U+%04X", c, got, wl)
			bad++
		}
		if got, want := nfdFirst(c), nfd(c); got != want && bad < 20 {
			t.Errorf("nfdFirst(U+%04X) = U+%04X; want U+%04X", c, got, want)
			bad++
		}
	}
}

func isWhitespaceListed(c rune) bool {
	for _, w := range whitespaceCpts {
		if w == c {
			return true
		}
	}
	return false
}

// parseLlamaUnicodeData reads the four tables of llama.cpp's unicode-data.cpp.
func parseLlamaUnicodeData(t *testing.T, path string) (flags func(rune) cptFlags, lower map[rune]rune, nfd func(rune) rune) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	num := regexp.MustCompile(`0x[0-9A-Fa-f]+`)
	var section string
	var ranges [][2]uint32
	var nfds [][3]uint32
	lower = map[rune]rune{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "unicode_ranges_flags"):
			section = "flags"
			continue
		case strings.Contains(line, "unicode_map_lowercase"):
			section = "lower"
			continue
		case strings.Contains(line, "unicode_ranges_nfd"):
			section = "nfd"
			continue
		case strings.Contains(line, "= {"):
			section = ""
			continue
		}
		var v []uint32
		for _, m := range num.FindAllString(line, -1) {
			x, _ := strconv.ParseUint(m[2:], 16, 32)
			v = append(v, uint32(x))
		}
		switch {
		case section == "flags" && len(v) == 2:
			ranges = append(ranges, [2]uint32{v[0], v[1]})
		case section == "lower" && len(v) == 2:
			lower[rune(v[0])] = rune(v[1])
		case section == "nfd" && len(v) == 3:
			nfds = append(nfds, [3]uint32{v[0], v[1], v[2]})
		}
	}
	if len(ranges) == 0 || len(lower) == 0 || len(nfds) == 0 {
		t.Fatalf("%s: tables not found (%d flag ranges, %d lowercase, %d nfd)", path, len(ranges), len(lower), len(nfds))
	}
	flags = func(c rune) cptFlags {
		var fl uint32
		for _, r := range ranges {
			if r[0] > uint32(c) {
				break
			}
			fl = r[1]
		}
		return cptFlags(fl)
	}
	nfd = func(c rune) rune {
		for _, r := range nfds {
			if r[0] <= uint32(c) && uint32(c) <= r[1] {
				return rune(r[2])
			}
		}
		return c
	}
	return flags, lower, nfd
}

func TestDecodeRuneMatchesStdlibOnValid(t *testing.T) {
	for _, s := range []string{"a", "é", "€", "𝄞", "\u07FF", "\uFFFD", "\U0010FFFF"} {
		r, n := decodeRune(s, 0)
		wr, wn := utf8.DecodeRuneInString(s)
		if r != wr || n != wn {
			t.Errorf("decodeRune(%q) = %U,%d; want %U,%d", s, r, n, wr, wn)
		}
	}
}
