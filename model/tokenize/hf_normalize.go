package tokenize

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/rivo/uniseg"
	"golang.org/x/text/unicode/norm"
)

// hfNormalizer is a tokenizer.json normalizer. normalize may change s in
// place: callers pass characters they own.
type hfNormalizer interface {
	normalize(s []nchar) []nchar
}

func parseHFNormalizer(raw json.RawMessage) (hfNormalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "BertNormalizer":
		var j struct {
			CleanText          bool  `json:"clean_text"`
			HandleChineseChars bool  `json:"handle_chinese_chars"`
			StripAccents       *bool `json:"strip_accents"`
			Lowercase          bool  `json:"lowercase"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		strip := j.Lowercase
		if j.StripAccents != nil {
			strip = *j.StripAccents
		}
		return bertNormalizer{clean: j.CleanText, chinese: j.HandleChineseChars, strip: strip, lower: j.Lowercase}, nil
	case "Lowercase":
		return normFunc(lowercase), nil
	case "NFD":
		return normFunc(func(s []nchar) []nchar { return decomposeAll(s, false) }), nil
	case "NFKD":
		return normFunc(func(s []nchar) []nchar { return decomposeAll(s, true) }), nil
	case "NFC":
		return normFunc(func(s []nchar) []nchar { return composeAll(s, norm.NFC) }), nil
	case "NFKC":
		return normFunc(func(s []nchar) []nchar { return composeAll(s, norm.NFKC) }), nil
	case "StripAccents":
		return normFunc(func(s []nchar) []nchar { return filterChars(s, hfMark) }), nil
	case "Nmt":
		return normFunc(nmt), nil
	case "Strip":
		var j struct {
			Left  bool `json:"strip_left"`
			Right bool `json:"strip_right"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		return normFunc(func(s []nchar) []nchar { return strip(s, j.Left, j.Right) }), nil
	case "Prepend":
		var j struct {
			Prepend string `json:"prepend"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		return normFunc(func(s []nchar) []nchar { return prepend(s, j.Prepend) }), nil
	case "Replace":
		return parseReplace(raw)
	case "Precompiled":
		return parsePrecompiled(raw)
	case "Sequence":
		var j struct {
			Normalizers []json.RawMessage `json:"normalizers"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		var seq normSequence
		for _, r := range j.Normalizers {
			n, err := parseHFNormalizer(r)
			if err != nil {
				return nil, err
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		return seq, nil
	}
	return nil, unsupported("normalizer", typ)
}

type normFunc func(s []nchar) []nchar

func (f normFunc) normalize(s []nchar) []nchar { return f(s) }

type normSequence []hfNormalizer

func (q normSequence) normalize(s []nchar) []nchar {
	for _, n := range q {
		s = n.normalize(s)
	}
	return s
}

// bertNormalizer is BertNormalizer: clean_text drops NUL, U+FFFD and control
// characters and turns whitespace into spaces; handle_chinese_chars puts
// spaces around CJK ideographs; strip_accents decomposes (NFD) and drops
// nonspacing marks; lowercase lowercases.
type bertNormalizer struct{ clean, chinese, strip, lower bool }

func (n bertNormalizer) normalize(s []nchar) []nchar {
	out := make([]nchar, 0, len(s)+len(s)/8)
	for _, c := range s {
		r := c.r
		if n.clean {
			isWS := r == '\t' || r == '\n' || r == '\r'
			if r == 0 || r == 0xFFFD || !isWS && hfOf(r)&hfOther != 0 {
				continue
			}
			if isWS || hfOf(r)&hfWhite != 0 {
				r = ' '
			}
		}
		if n.chinese && isChineseChar(r) {
			out = append(out, nchar{' ', c.start, c.end}, nchar{r, c.start, c.end}, nchar{' ', c.start, c.end})
			continue
		}
		out = append(out, nchar{r, c.start, c.end})
	}
	if n.strip {
		out = filterChars(decomposeAll(out, false), hfMn)
	}
	if n.lower {
		out = lowercase(out)
	}
	return out
}

// filterChars drops the characters with any of flags.
func filterChars(s []nchar, flags hfFlags) []nchar {
	out := s[:0:0]
	for _, c := range s {
		if hfOf(c.r)&flags == 0 {
			out = append(out, c)
		}
	}
	return out
}

func lowercase(s []nchar) []nchar {
	simple := true
	for _, c := range s {
		simple = simple && c.r != 0x130
	}
	if simple { // one character each: in place
		var buf [3]rune
		for i := range s {
			s[i].r = hfAppendLower(buf[:0], s[i].r)[0]
		}
		return s
	}
	out := make([]nchar, 0, len(s)+1)
	var buf [3]rune
	for _, c := range s {
		for _, r := range hfAppendLower(buf[:0], c.r) {
			out = append(out, nchar{r, c.start, c.end})
		}
	}
	return out
}

// decomposeAll is NFD (or NFKD with compat): every character decomposed,
// then each run of combining characters put in canonical order.
func decomposeAll(s []nchar, compat bool) []nchar {
	plain := true // nothing below U+00A0 decomposes, and nothing below U+0300 combines
	for _, c := range s {
		plain = plain && c.r < 0xA0
	}
	if plain {
		return s
	}
	out := make([]nchar, 0, len(s)+len(s)/4)
	var buf [32]rune
	for _, c := range s {
		for _, r := range decompose(buf[:0], c.r, compat) {
			out = append(out, nchar{r, c.start, c.end})
		}
	}
	for i := 0; i < len(out); {
		if ccc(out[i].r) == 0 {
			i++
			continue
		}
		j := i + 1
		for j < len(out) && ccc(out[j].r) != 0 {
			j++
		}
		run := out[i:j]
		sort.SliceStable(run, func(a, b int) bool { return ccc(run[a].r) < ccc(run[b].r) })
		i = j
	}
	return out
}

// composeAll is NFC or NFKC: the string is cut where the form allows a
// boundary and each segment normalized; a segment's characters share its
// span. Code points the reference's Unicode cannot normalize are left alone.
func composeAll(s []nchar, form norm.Form) []nchar {
	out := make([]nchar, 0, len(s))
	compat := form == norm.NFKC
	for i := 0; i < len(s); {
		j := i + 1
		exempt := func(r rune) bool { return r == hfNoCanonical || compat && hfCompatExempt(r) }
		if !exempt(s[i].r) {
			for j < len(s) && !exempt(s[j].r) && !form.PropertiesString(string(s[j].r)).BoundaryBefore() {
				j++
			}
		}
		seg := nstring(s[i:j])
		if !exempt(s[i].r) {
			seg = form.String(seg)
		}
		for _, r := range seg {
			out = append(out, nchar{r, s[i].start, s[j-1].end})
		}
		i = j
	}
	return out
}

// nmt is the Nmt normalizer: some control characters dropped, some spaces unified.
func nmt(s []nchar) []nchar {
	out := s[:0:0]
	for _, c := range s {
		switch r := c.r; {
		case r >= 0x1 && r <= 0x8, r == 0xB, r >= 0xE && r <= 0x1F, r == 0x7F, r == 0x8F, r == 0x9F:
			continue
		case r == 0x9, r == 0xA, r == 0xC, r == 0xD, r == 0x1680, r >= 0x200B && r <= 0x200F,
			r == 0x2028, r == 0x2029, r == 0x2581, r == 0xFEFF, r == 0xFFFD:
			c.r = ' '
		}
		out = append(out, c)
	}
	return out
}

// strip drops leading and/or trailing whitespace.
func strip(s []nchar, left, right bool) []nchar {
	i, j := 0, len(s)
	for left && i < j && hfOf(s[i].r)&hfWhite != 0 {
		i++
	}
	for right && j > i && hfOf(s[j-1].r)&hfWhite != 0 {
		j--
	}
	return s[i:j]
}

// prepend puts p before a non-empty string, with its first character's span.
func prepend(s []nchar, p string) []nchar {
	if len(s) == 0 {
		return s
	}
	out := make([]nchar, 0, len(s)+len(p))
	for _, r := range p {
		out = append(out, nchar{r, s[0].start, s[0].start})
	}
	return append(out, s...)
}

// replaceNormalizer replaces every (non-overlapping, leftmost) match of a
// string or a regular expression.
type replaceNormalizer struct {
	lit     string
	re      *regexp.Regexp
	content string
}

func parseReplace(raw json.RawMessage) (hfNormalizer, error) {
	var j struct {
		Pattern struct {
			String *string `json:"String"`
			Regex  *string `json:"Regex"`
		} `json:"pattern"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("Replace: %w", err)
	}
	r := replaceNormalizer{content: j.Content}
	switch {
	case j.Pattern.String != nil:
		if *j.Pattern.String == "" {
			return nil, fmt.Errorf("Replace: empty pattern: %w", ErrUnsupported)
		}
		r.lit = *j.Pattern.String
	case j.Pattern.Regex != nil:
		re, err := simpleRegexp(*j.Pattern.Regex)
		if err != nil {
			return nil, fmt.Errorf("Replace: %w", err)
		}
		r.re = re
	default:
		return nil, fmt.Errorf("Replace: no String or Regex pattern: %w", ErrUnsupported)
	}
	return r, nil
}

// simpleRegexp compiles a regular expression of tokenizer.json (Oniguruma
// syntax) when Go's regexp matches it the same way: no escapes whose
// meaning differs (Go's \s, \w, \d and \b are ASCII; Oniguruma's Unicode)
// and nothing RE2 lacks (lookaround, backreferences).
func simpleRegexp(pattern string) (*regexp.Regexp, error) {
	for _, esc := range []string{`\s`, `\S`, `\w`, `\W`, `\d`, `\D`, `\b`, `\B`, `\p`, `\P`, `\h`, `\R`, `\X`} {
		if strings.Contains(pattern, esc) {
			return nil, fmt.Errorf("regex %q (%s): %w", pattern, esc, ErrUnsupported)
		}
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %v: %w", pattern, err, ErrUnsupported)
	}
	return re, nil
}

func (r replaceNormalizer) normalize(s []nchar) []nchar {
	str := nstring(s)
	var locs [][]int
	if r.re != nil {
		locs = r.re.FindAllStringIndex(str, -1)
	} else {
		for off := 0; ; {
			k := strings.Index(str[off:], r.lit)
			if k < 0 {
				break
			}
			locs = append(locs, []int{off + k, off + k + len(r.lit)})
			off += k + len(r.lit)
		}
	}
	if len(locs) == 0 {
		return s
	}
	out := make([]nchar, 0, len(s))
	ci, b := 0, 0 // character index and its byte offset in str
	for _, loc := range locs {
		for b < loc[0] {
			out = append(out, s[ci])
			b += utf8.RuneLen(s[ci].r)
			ci++
		}
		first := ci
		for b < loc[1] {
			b += utf8.RuneLen(s[ci].r)
			ci++
		}
		span := nchar{start: s[min(first, len(s)-1)].start, end: s[max(ci-1, 0)].end}
		for _, c := range r.content {
			out = append(out, nchar{c, span.start, span.end})
		}
	}
	return append(out, s[ci:]...)
}

// precompiled is the Precompiled normalizer (a SentencePiece charsmap) as the
// library applies it: per extended grapheme cluster, a cluster shorter than 6
// bytes is replaced whole when the map has an entry for a prefix of it (the
// shortest such prefix's replacement); otherwise each character is looked
// up alone.
type precompiled struct{ m *ugmCharsmap }

func parsePrecompiled(raw json.RawMessage) (hfNormalizer, error) {
	var j struct {
		Charsmap string `json:"precompiled_charsmap"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("Precompiled: %w", err)
	}
	b, err := base64.StdEncoding.DecodeString(j.Charsmap)
	if err != nil {
		return nil, fmt.Errorf("Precompiled: precompiled_charsmap: %w", err)
	}
	m, err := newUGMCharsmap(b)
	if err != nil || m == nil {
		return nil, fmt.Errorf("Precompiled: %d-byte charsmap cannot be read: %v", len(b), err)
	}
	return precompiled{m}, nil
}

func (p precompiled) normalize(s []nchar) []nchar {
	str := nstring(s)
	out := make([]nchar, 0, len(s))
	ci := 0
	state := -1
	for rest := str; rest != ""; {
		var g string
		g, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		n := utf8.RuneCountInString(g)
		chars := s[ci : ci+n]
		ci += n
		if len(g) < 6 {
			if repl, ok := p.m.firstMatch(g); ok {
				out = appendReplacement(out, repl, chars[0].start, chars[n-1].end)
				continue
			}
		}
		for k, r := range []rune(g) {
			if repl, ok := p.m.firstMatch(string(r)); ok {
				out = appendReplacement(out, repl, chars[k].start, chars[k].end)
				continue
			}
			out = append(out, chars[k])
		}
	}
	return out
}

func appendReplacement(out []nchar, repl string, start, end int32) []nchar {
	for _, r := range repl {
		out = append(out, nchar{r, start, end})
	}
	return out
}

// firstMatch returns the replacement of the shortest prefix of s the map
// knows (spm_precompiled's transform: the first result of a common-prefix
// search), and whether there is one.
func (m *ugmCharsmap) firstMatch(s string) (string, bool) {
	if m == nil || len(m.xcda) == 0 {
		return "", false
	}
	x := m.xcda
	node := xcdaBase(x[0])
	for i := 0; i < len(s); i++ {
		c := uint32(s[i])
		if c == 0 {
			break
		}
		node ^= c
		if int(node) >= len(x) || xcdaLCheck(x[node]) != c {
			return "", false
		}
		leaf := xcdaLeaf(x[node])
		node ^= xcdaBase(x[node])
		if leaf {
			if int(node) >= len(x) {
				return "", false
			}
			off := xcdaValue(x[node])
			if int(off) > len(m.repl) {
				return "", false
			}
			repl := m.repl[off:]
			if k := strings.IndexByte(repl, 0); k >= 0 {
				repl = repl[:k]
			}
			return repl, true
		}
	}
	return "", false
}
