package tokenize

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// hfPreTokenizer is a tokenizer.json pre-tokenizer: it splits each word
// into smaller words (empty words are dropped).
type hfPreTokenizer interface {
	split(words [][]nchar) [][]nchar
}

// splitBehavior is the library's SplitDelimiterBehavior: what becomes of
// the delimiters a split finds.
type splitBehavior int

const (
	splitRemoved splitBehavior = iota
	splitIsolated
	splitMergedWithPrevious
	splitMergedWithNext
	splitContiguous
)

func parseBehavior(s string) (splitBehavior, error) {
	switch s {
	case "Removed":
		return splitRemoved, nil
	case "Isolated", "":
		return splitIsolated, nil
	case "MergedWithPrevious":
		return splitMergedWithPrevious, nil
	case "MergedWithNext":
		return splitMergedWithNext, nil
	case "Contiguous":
		return splitContiguous, nil
	}
	return 0, fmt.Errorf("split behavior %q: %w", s, ErrUnsupported)
}

func parseHFPreTokenizer(raw json.RawMessage) (hfPreTokenizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "BertPreTokenizer":
		return preFunc(bertPreTokenize), nil
	case "WhitespaceSplit":
		return preFunc(func(w []nchar, out [][]nchar) [][]nchar { return splitChars(w, isHFSpace, splitRemoved, out) }), nil
	case "Whitespace":
		return preFunc(splitWhitespace), nil
	case "Punctuation":
		var j struct {
			Behavior string `json:"behavior"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		b, err := parseBehavior(j.Behavior)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		return preFunc(func(w []nchar, out [][]nchar) [][]nchar { return splitChars(w, isBertPunct, b, out) }), nil
	case "Digits":
		var j struct {
			Individual bool `json:"individual_digits"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		b := splitContiguous
		if j.Individual {
			b = splitIsolated
		}
		isNum := func(r rune) bool { return hfOf(r)&hfNumeric != 0 }
		return preFunc(func(w []nchar, out [][]nchar) [][]nchar { return splitChars(w, isNum, b, out) }), nil
	case "Metaspace":
		return parseMetaspace(raw)
	case "ByteLevel":
		var j struct {
			AddPrefixSpace bool  `json:"add_prefix_space"`
			UseRegex       *bool `json:"use_regex"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		return byteLevelPre{prefixSpace: j.AddPrefixSpace, regex: j.UseRegex == nil || *j.UseRegex}, nil
	case "Sequence":
		var j struct {
			PreTokenizers []json.RawMessage `json:"pretokenizers"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		var seq preSequence
		for _, r := range j.PreTokenizers {
			p, err := parseHFPreTokenizer(r)
			if err != nil {
				return nil, err
			}
			if p != nil {
				seq = append(seq, p)
			}
		}
		return seq, nil
	}
	return nil, unsupported("pre-tokenizer", typ)
}

// preFunc splits each word with a function.
type preFunc func(w []nchar, out [][]nchar) [][]nchar

func (f preFunc) split(words [][]nchar) [][]nchar {
	var out [][]nchar
	for _, w := range words {
		out = f(w, out)
	}
	return out
}

type preSequence []hfPreTokenizer

func (q preSequence) split(words [][]nchar) [][]nchar {
	for _, p := range q {
		words = p.split(words)
	}
	return words
}

// bertPreTokenize is BertPreTokenizer in one pass: whitespace splits words
// and is dropped; each punctuation character is a word of its own.
func bertPreTokenize(w []nchar, out [][]nchar) [][]nchar {
	start := -1
	for i, c := range w {
		space, punct := isHFSpace(c.r), !isHFSpace(c.r) && isBertPunct(c.r)
		if (space || punct) && start >= 0 {
			out = append(out, w[start:i:i])
			start = -1
		}
		switch {
		case punct:
			out = append(out, w[i:i+1:i+1])
		case !space && start < 0:
			start = i
		}
	}
	if start >= 0 {
		out = append(out, w[start:len(w):len(w)])
	}
	return out
}

func isHFSpace(r rune) bool { return hfOf(r)&hfWhite != 0 }

// isBertPunct is ASCII punctuation (char::is_ascii_punctuation, which counts
// the ASCII symbols) or a Unicode punctuation character.
func isBertPunct(r rune) bool {
	if r < 0x80 {
		return r >= '!' && r <= '/' || r >= ':' && r <= '@' || r >= '[' && r <= '`' || r >= '{' && r <= '~'
	}
	return hfOf(r)&hfPunct != 0
}

// charSpan is a run [start, end) of a word's characters; match says whether it
// is a delimiter.
type charSpan struct {
	start, end int
	match      bool
}

// splitChars splits w where is says (each matching character is one
// delimiter) with behavior b, appending the non-empty parts to out.
func splitChars(w []nchar, is func(rune) bool, b splitBehavior, out [][]nchar) [][]nchar {
	var spans []charSpan
	last := 0
	for i, c := range w {
		if is(c.r) {
			if last < i {
				spans = append(spans, charSpan{last, i, false})
			}
			spans = append(spans, charSpan{i, i + 1, true})
			last = i + 1
		}
	}
	if last < len(w) {
		spans = append(spans, charSpan{last, len(w), false})
	}
	return appendSpans(out, w, applyBehavior(spans, b))
}

// applyBehavior is NormalizedString::split's handling of the delimiters.
func applyBehavior(spans []charSpan, b splitBehavior) []charSpan {
	var acc []charSpan
	switch b {
	case splitRemoved:
		for _, s := range spans {
			if !s.match {
				acc = append(acc, s)
			}
		}
	case splitIsolated:
		acc = spans
	case splitContiguous:
		prev := false
		for _, s := range spans {
			if s.match == prev && len(acc) > 0 {
				acc[len(acc)-1].end = s.end
			} else {
				acc = append(acc, charSpan{s.start, s.end, false})
			}
			prev = s.match
		}
	case splitMergedWithPrevious:
		prev := false
		for _, s := range spans {
			if s.match && !prev && len(acc) > 0 {
				acc[len(acc)-1].end = s.end
			} else {
				acc = append(acc, charSpan{s.start, s.end, false})
			}
			prev = s.match
		}
	case splitMergedWithNext:
		prev := false
		for i := len(spans) - 1; i >= 0; i-- {
			s := spans[i]
			if s.match && !prev && len(acc) > 0 {
				acc[len(acc)-1].start = s.start
			} else {
				acc = append(acc, charSpan{s.start, s.end, false})
			}
			prev = s.match
		}
		for i, j := 0, len(acc)-1; i < j; i, j = i+1, j-1 {
			acc[i], acc[j] = acc[j], acc[i]
		}
	}
	return acc
}

func appendSpans(out [][]nchar, w []nchar, spans []charSpan) [][]nchar {
	for _, s := range spans {
		if s.end > s.start {
			out = append(out, w[s.start:s.end:s.end])
		}
	}
	return out
}

// splitWhitespace is the Whitespace pre-tokenizer, the regex \w+|[^\w\s]+:
// maximal runs of word characters and of characters that are neither word
// characters nor whitespace; whitespace is dropped.
func splitWhitespace(w []nchar, out [][]nchar) [][]nchar {
	class := func(r rune) int {
		f := hfOf(r)
		switch {
		case f&hfWord != 0:
			return 1
		case f&hfWhite != 0:
			return 0
		}
		return 2
	}
	for i := 0; i < len(w); {
		c := class(w[i].r)
		j := i + 1
		for j < len(w) && class(w[j].r) == c {
			j++
		}
		if c != 0 {
			out = append(out, w[i:j:j])
		}
		i = j
	}
	return out
}

// metaspace is the Metaspace pre-tokenizer: spaces become the replacement
// character, which is prepended as the scheme says (always; first: only to
// the piece that starts the text; never), and each word starts at a
// replacement character.
type metaspace struct {
	repl    rune
	scheme  string
	splitOn bool // split at each replacement character
}

func parseMetaspace(raw json.RawMessage) (hfPreTokenizer, error) {
	var j struct {
		Replacement    string `json:"replacement"`
		AddPrefixSpace *bool  `json:"add_prefix_space"`
		PrependScheme  string `json:"prepend_scheme"`
		Split          *bool  `json:"split"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("Metaspace: %w", err)
	}
	r, n := utf8.DecodeRuneInString(j.Replacement)
	if n == 0 || n != len(j.Replacement) {
		return nil, fmt.Errorf("Metaspace: replacement %q: want one character", j.Replacement)
	}
	m := metaspace{repl: r, scheme: j.PrependScheme, splitOn: j.Split == nil || *j.Split}
	if m.scheme == "" {
		m.scheme = "always"
	}
	if j.AddPrefixSpace != nil && !*j.AddPrefixSpace {
		m.scheme = "never"
	}
	switch m.scheme {
	case "always", "first", "never":
	default:
		return nil, fmt.Errorf("Metaspace: prepend_scheme %q: %w", m.scheme, ErrUnsupported)
	}
	return m, nil
}

func (m metaspace) split(words [][]nchar) [][]nchar {
	var out [][]nchar
	for _, w := range words {
		v := make([]nchar, 0, len(w)+1)
		for _, c := range w {
			if c.r == ' ' {
				c.r = m.repl
			}
			v = append(v, c)
		}
		if len(v) > 0 && v[0].r != m.repl && (m.scheme == "always" || m.scheme == "first" && v[0].start == 0) {
			v = append([]nchar{{m.repl, v[0].start, v[0].start}}, v...)
		}
		if !m.splitOn {
			out = append(out, v)
			continue
		}
		out = splitChars(v, func(r rune) bool { return r == m.repl }, splitMergedWithNext, out)
	}
	return out
}

// byteLevelPre is the ByteLevel pre-tokenizer: a space prepended to a word
// that does not start with one (add_prefix_space), the GPT-2 expression's
// matches as words (use_regex), and every byte of the word's UTF-8 mapped to
// its printable character.
type byteLevelPre struct{ prefixSpace, regex bool }

func (p byteLevelPre) split(words [][]nchar) [][]nchar {
	var out [][]nchar
	enc, _ := byteEncoding()
	var buf splitBuf
	for _, w := range words {
		if p.prefixSpace && len(w) > 0 && w[0].r != ' ' {
			w = append([]nchar{{' ', w[0].start, w[0].start}}, w...)
		}
		parts := [][]nchar{w}
		if p.regex && len(w) > 0 {
			buf.load(nstring(w), unicodeFlags())
			parts = parts[:0]
			s := 0
			for _, e := range buf.split([]splitStep{stepGPT2}) {
				parts = append(parts, w[s:e])
				s = int(e)
			}
		}
		for _, part := range parts {
			var v []nchar
			var b [utf8.UTFMax]byte
			for _, c := range part {
				n := utf8.EncodeRune(b[:], c.r)
				for _, x := range b[:n] {
					v = append(v, nchar{enc[x], c.start, c.end})
				}
			}
			if len(v) > 0 {
				out = append(out, v)
			}
		}
	}
	return out
}
