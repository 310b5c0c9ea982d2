package tokenize

import (
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's added_tokens.
type addedToken struct {
	content                     string
	id                          int32
	singleWord, lstrip          bool
	rstrip, normalized, special bool
}

// addedVocab is the library's AddedVocabulary: the added tokens and the two
// matchers that split them out of the text, one over the raw text (tokens
// with normalized: false) and one over normalized text (the others, whose
// content is normalized first).
type addedVocab struct {
	tokens    []addedToken
	ids       map[string]int32
	raw, norm addedMatcher
}

// newAddedVocab resolves each added token's id as the library does: the
// model's id for a token the model has, else the next id past the model's
// vocabulary (the ids written in tokenizer.json are not used).
func newAddedVocab(js []hfAddedJSON, model hfModel, norm hfNormalizer) *addedVocab {
	a := &addedVocab{ids: map[string]int32{}}
	next := int32(len(model.tokens()))
	for _, j := range js {
		if j.Content == "" {
			continue
		}
		if _, dup := a.ids[j.Content]; dup {
			continue
		}
		id, ok := model.id(j.Content)
		if !ok {
			id = next
			next++
		}
		a.ids[j.Content] = id
		a.tokens = append(a.tokens, addedToken{content: j.Content, id: id, singleWord: j.SingleWord,
			lstrip: j.LStrip, rstrip: j.RStrip, normalized: j.Normalized, special: j.Special})
	}
	for i, t := range a.tokens {
		if !t.normalized {
			a.raw.add(t.content, int32(i))
			continue
		}
		pattern := t.content
		if norm != nil {
			pattern = nstring(norm.normalize(charsOf(t.content, 0, len(t.content))))
		}
		a.norm.add(pattern, int32(i))
	}
	return a
}

// piece is a span [start, end) of a text split by the added tokens: an added
// token (id ≥ 0) or text to tokenize (id -1).
type piece struct {
	start, end int
	id         int32
}

// split is the library's find_matches: every leftmost-longest match of m in
// s, in order (a match that is dropped still consumes its text), with the
// tokens' single_word, lstrip and rstrip rules; special tokens are matched
// only with parseSpecial.
func (a *addedVocab) split(s string, m addedMatcher, parseSpecial bool) []piece {
	var out []piece
	startOffset := 0
	for pos := 0; pos < len(s); {
		ms, me, ti := m.next(s, pos)
		if ti < 0 {
			break
		}
		pos = me
		tok := &a.tokens[ti]
		if tok.special && !parseSpecial {
			continue
		}
		if tok.singleWord && (ms > 0 && endsWithWord(s[:ms]) || me < len(s) && startsWithWord(s[me:])) {
			continue
		}
		start, stop := ms, me
		if tok.lstrip {
			start = max(trailingSpaceStart(s[:ms]), startOffset)
		}
		if tok.rstrip {
			stop += leadingSpaceEnd(s[me:])
		}
		if startOffset < start {
			out = append(out, piece{startOffset, start, -1})
		}
		out = append(out, piece{start, stop, tok.id})
		startOffset = stop
	}
	if startOffset < len(s) {
		out = append(out, piece{startOffset, len(s), -1})
	}
	return out
}

// splitChars splits normalized text by the normalized added tokens; the
// pieces' bounds are character indices of s.
func (a *addedVocab) splitChars(s []nchar, parseSpecial bool) []piece {
	if len(a.norm.nodes) == 0 {
		return []piece{{0, len(s), -1}}
	}
	str := nstring(s)
	ps := a.split(str, a.norm, parseSpecial)
	// byte offsets → character indices
	ci, b := 0, 0
	toChar := func(off int) int {
		for b < off {
			b += utf8.RuneLen(s[ci].r)
			ci++
		}
		return ci
	}
	for i := range ps {
		ps[i].start = toChar(ps[i].start)
		ps[i].end = toChar(ps[i].end)
	}
	return ps
}

// endsWithWord is the regex \w$; startsWithWord is ^\w.
func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return hfOf(r)&hfWord != 0
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return hfOf(r)&hfWord != 0
}

// trailingSpaceStart is where the whitespace that ends s begins (\s*$).
func trailingSpaceStart(s string) int {
	i := len(s)
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if hfOf(r)&hfWhite == 0 {
			break
		}
		i -= n
	}
	return i
}

// leadingSpaceEnd is where the whitespace that starts s ends (^\s*).
func leadingSpaceEnd(s string) int {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if hfOf(r)&hfWhite == 0 {
			break
		}
		i += n
	}
	return i
}

// addedMatcher finds the leftmost-longest occurrence of a set of strings
// (Aho-Corasick's LeftmostLongest match kind, by a trie walk from each
// position: there are few added tokens).
type addedMatcher struct {
	first [256]bool
	nodes []trieNode // trieNode.token: index into addedVocab.tokens
}

func (m *addedMatcher) add(text string, token int32) {
	if text == "" {
		return
	}
	if len(m.nodes) == 0 {
		m.nodes = append(m.nodes, trieNode{token: -1})
	}
	n := int32(0)
	for i := 0; i < len(text); i++ {
		nx, ok := m.nodes[n].next[text[i]]
		if !ok {
			nx = int32(len(m.nodes))
			m.nodes = append(m.nodes, trieNode{token: -1})
			if m.nodes[n].next == nil {
				m.nodes[n].next = map[byte]int32{}
			}
			m.nodes[n].next[text[i]] = nx
		}
		n = nx
	}
	m.nodes[n].token = token
	m.first[text[0]] = true
}

// next returns the leftmost-longest match at or after pos: its bounds and
// token, or token -1.
func (m addedMatcher) next(s string, pos int) (start, end int, token int32) {
	if len(m.nodes) == 0 {
		return 0, 0, -1
	}
	for i := pos; i < len(s); i++ {
		if !m.first[s[i]] {
			continue
		}
		n, best, bestEnd := int32(0), int32(-1), 0
		for j := i; j < len(s); j++ {
			nx, ok := m.nodes[n].next[s[j]]
			if !ok {
				break
			}
			n = nx
			if tok := m.nodes[n].token; tok >= 0 {
				best, bestEnd = tok, j+1
			}
		}
		if best >= 0 {
			return i, bestEnd, best
		}
	}
	return 0, 0, -1
}
