package tokenize

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"golang.org/x/text/unicode/norm"
)

// TestHFUnicodeTables checks, code point by code point, the properties the
// tokenizer.json components use against the reference build of Hugging Face
// tokenizers (testdata/hf_unicode.js).
func TestHFUnicodeTables(t *testing.T) {
	dir, node := testenv.HFTokenizers(t)
	cmd := exec.Command(node, "testdata/hf_unicode.js")
	cmd.Env = append(os.Environ(), "SYNAPSE_HF_TOKENIZERS="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference: %v\n%s", err, stderr.String())
	}
	columns := []string{"clean_text", "NFD", "strip_accents", "lowercase", "BertPreTokenizer", "StripAccents",
		"Whitespace", "Digits", "NFKD", "NFC", "NFKC"}
	bad := map[string][]string{}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		cp, err := strconv.ParseUint(f[0], 16, 32)
		if err != nil || len(f) != len(columns)+1 {
			t.Fatalf("reference line %q", sc.Text())
		}
		n++
		for i, got := range hfProperties(rune(cp)) {
			if got != f[i+1] {
				bad[columns[i]] = append(bad[columns[i]], f[0]+": got "+got+", want "+f[i+1])
			}
		}
	}
	if n != 0x110000-0x800 {
		t.Fatalf("reference gave %d code points; want %d", n, 0x110000-0x800)
	}
	for col, b := range bad {
		t.Errorf("%s: %d code points differ, e.g. %s", col, len(b), strings.Join(b[:min(5, len(b))], "; "))
	}
}

// hfProperties computes the reference's columns for one code point.
func hfProperties(r rune) []string {
	one := func() []nchar { return []nchar{{r, 0, 1}} } // normalizers may work in place
	hex := func(s []nchar) string {
		p := make([]string, len(s))
		for i, c := range s {
			p[i] = strconv.FormatInt(int64(c.r), 16)
		}
		return strings.Join(p, " ")
	}
	word := func() []nchar { return []nchar{{'a', 0, 1}, {r, 1, 2}, {'a', 2, 3}} }
	pre, mark, ws, dg := "o", "o", "o", "o"
	switch {
	case isHFSpace(r):
		pre = "w"
	case isBertPunct(r):
		pre = "p"
	}
	if len(filterChars(one(), hfMark)) == 0 {
		mark = "m"
	}
	switch len(splitWhitespace(word(), nil)) {
	case 1:
		ws = "w"
	case 2:
		ws = "s"
	}
	if len(splitChars(word(), func(r rune) bool { return hfOf(r)&hfNumeric != 0 }, splitIsolated, nil)) == 3 {
		dg = "n"
	}
	return []string{
		hex(bertNormalizer{clean: true}.normalize(one())), hex(decomposeAll(one(), false)),
		hex(bertNormalizer{strip: true}.normalize(one())), hex(lowercase(one())), pre, mark, ws, dg,
		hex(decomposeAll(one(), true)), hex(composeAll(one(), norm.NFC)), hex(composeAll(one(), norm.NFKC)),
	}
}
