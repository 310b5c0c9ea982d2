package tokenize

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// New returns the tokenizer for v: the shared driver (UTF-8 repair,
// special-token partition, added BOS/CLS/EOS/SEP) around the algorithm of
// v.Kind. v must not be modified afterwards.
func New(v *Vocab) (Tokenizer, error) {
	if len(v.Tokens) == 0 {
		return nil, errors.New("tokenize: empty vocabulary")
	}
	if v.Attrs != nil && len(v.Attrs) != len(v.Tokens) {
		return nil, fmt.Errorf("tokenize: %d token types for %d tokens", len(v.Attrs), len(v.Tokens))
	}
	var (
		frag fragmenter
		err  error
	)
	switch v.Kind {
	case KindWPM:
		frag, err = newWPMFragmenter(v)
	case KindBPE:
		frag, err = newBPEFragmenter(v)
	case KindSPM:
		frag, err = newSPMFragmenter(v)
	case KindUGM:
		frag, err = newUGMFragmenter(v)
	default:
		return nil, fmt.Errorf("tokenize: vocabulary kind %q: %w", v.Kind, ErrUnsupported)
	}
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	t := &tokenizer{v: v, frag: frag}
	if err := t.setSpecialAdds(); err != nil {
		return nil, err
	}
	t.buildSpecials()
	return t, nil
}

// tokenizer is the driver shared by all kinds.
type tokenizer struct {
	v    *Vocab
	frag fragmenter

	first, last int32 // added by AddSpecial, NoToken for none

	specials []special   // llama.cpp's cache_special_tokens order
	matchAll specialTrie // every special token (ParseSpecial)
	matchUD  specialTrie // user-defined tokens only (always matched)
}

// special is one token of the special-token cache.
type special struct {
	text           string
	id             int32
	control        bool // control or unknown: matched only with ParseSpecial
	lstrip, rstrip bool
}

func (t *tokenizer) Vocab() *Vocab { return t.v }

func (t *tokenizer) Affixes() (prefix, suffix []int32) {
	if t.first != NoToken {
		prefix = []int32{t.first}
	}
	if t.last != NoToken {
		suffix = []int32{t.last}
	}
	return prefix, suffix
}

// setSpecialAdds resolves what AddSpecial adds, as llama_vocab::impl::tokenize
// does per kind: WPM always brackets with BOS (CLS) and SEP; the others add
// BOS and EOS as their flags say.
func (t *tokenizer) setSpecialAdds() error {
	v := t.v
	t.first, t.last = NoToken, NoToken
	if v.Kind == KindWPM {
		t.first, t.last = v.BOS, v.SEP
		if !t.valid(t.first) || !t.valid(t.last) {
			return fmt.Errorf("tokenize: wpm vocabulary needs CLS (BOS) and SEP tokens; have %d and %d", v.BOS, v.SEP)
		}
		return nil
	}
	if v.AddBOS {
		if !t.valid(v.BOS) {
			return fmt.Errorf("tokenize: add_bos is set but BOS token %d is not in the vocabulary", v.BOS)
		}
		t.first = v.BOS
	}
	if v.AddEOS {
		if !t.valid(v.EOS) {
			return fmt.Errorf("tokenize: add_eos is set but EOS token %d is not in the vocabulary", v.EOS)
		}
		t.last = v.EOS
	}
	return nil
}

func (t *tokenizer) valid(id int32) bool { return id >= 0 && int(id) < len(t.v.Tokens) }

// buildSpecials builds the special-token cache: control, user-defined and
// unknown tokens, longest text first (ties by id, where llama.cpp's unstable
// sort leaves the order unspecified).
func (t *tokenizer) buildSpecials() {
	v := t.v
	forced := map[int32]bool{}
	for _, id := range v.ForcedControl {
		forced[id] = true
	}
	lstrip, rstrip := map[int32]bool{}, map[int32]bool{}
	for _, id := range v.LStrip {
		lstrip[id] = true
	}
	for _, id := range v.RStrip {
		rstrip[id] = true
	}
	for i, text := range v.Tokens {
		id := int32(i)
		var a TokenAttr = TokenNormal
		if v.Attrs != nil {
			a = v.Attrs[i]
		}
		if !isSpecialAttr(a) && !forced[id] || text == "" {
			continue
		}
		control := a == TokenControl || a == TokenUnknown || forced[id]
		t.specials = append(t.specials, special{text: text, id: id, control: control, lstrip: lstrip[id], rstrip: rstrip[id]})
	}
	sort.SliceStable(t.specials, func(i, j int) bool { return len(t.specials[i].text) > len(t.specials[j].text) })
	for i, s := range t.specials {
		t.matchAll.add(s.text, int32(i))
		if !s.control {
			t.matchUD.add(s.text, int32(i))
		}
	}
}

// Tokenize implements Tokenizer.
func (t *tokenizer) Tokenize(text string, opt Options) Result {
	text, replaced := repairUTF8(text)
	res := Result{Text: text, Replaced: replaced}
	out := make([]Token, 0, len(text)/3+4)
	if opt.AddSpecial && t.first != NoToken {
		out = append(out, Token{ID: t.first})
	}
	prevSpecial := true
	for _, fr := range t.partition(text, opt.ParseSpecial) {
		if fr.special >= 0 {
			out = append(out, Token{ID: t.specials[fr.special].id, Start: int32(fr.start), End: int32(fr.end)})
			prevSpecial = true
			continue
		}
		out = t.frag.appendTokens(out, text[fr.start:fr.end], fr.start, prevSpecial)
		prevSpecial = false
	}
	if opt.AddSpecial && t.last != NoToken {
		out = append(out, Token{ID: t.last, Start: int32(len(text)), End: int32(len(text))})
	}
	res.Tokens = out
	return res
}

// fragment is a run of raw text [start, end) or, with special >= 0, the
// special token t.specials[special] matched there.
type fragment struct {
	start, end int
	special    int32
}

// partition is llama.cpp's tokenizer_st_partition: for each special token in
// cache order, every raw fragment is split at each (non-overlapping,
// leftmost-first) occurrence of its text; LSTRIP/RSTRIP tokens drop the ASCII
// whitespace next to them. Only tokens that occur in the text are tried.
func (t *tokenizer) partition(text string, parseSpecial bool) []fragment {
	if text == "" {
		return nil
	}
	frags := []fragment{{start: 0, end: len(text), special: -1}}
	trie := &t.matchUD
	if parseSpecial {
		trie = &t.matchAll
	}
	found := trie.occurring(text)
	if len(found) == 0 {
		return frags
	}
	var next []fragment
	for _, si := range found {
		s := &t.specials[si]
		next = next[:0]
		for _, fr := range frags {
			if fr.special >= 0 {
				next = append(next, fr)
				continue
			}
			next = splitFragment(next, text, fr, s, si)
		}
		frags, next = next, frags
	}
	return frags
}

// splitFragment appends the pieces of raw fragment fr split at the
// occurrences of special token s.
func splitFragment(out []fragment, text string, fr fragment, s *special, si int32) []fragment {
	base, end := fr.start, fr.end
	for {
		m := strings.Index(text[base:end], s.text)
		if m < 0 {
			break
		}
		m += base
		left := m
		if s.lstrip {
			for left > base && isCSpace(text[left-1]) {
				left--
			}
		}
		if left > base {
			out = append(out, fragment{start: base, end: left, special: -1})
		}
		out = append(out, fragment{start: m, end: m + len(s.text), special: si})
		base = m + len(s.text)
		if s.rstrip {
			for base < end && isCSpace(text[base]) {
				base++
			}
		}
	}
	if base < end {
		out = append(out, fragment{start: base, end: end, special: -1})
	}
	return out
}

// isCSpace is C's isspace in the "C" locale, which llama.cpp's strip uses.
func isCSpace(b byte) bool { return b == ' ' || b >= '\t' && b <= '\r' }

// specialTrie finds which special tokens occur anywhere in a text.
type specialTrie struct {
	first [256]bool
	nodes []trieNode
}

type trieNode struct {
	next  map[byte]int32
	token int32 // index into tokenizer.specials, -1 for none
}

func (tr *specialTrie) add(text string, token int32) {
	if len(tr.nodes) == 0 {
		tr.nodes = append(tr.nodes, trieNode{token: -1})
	}
	n := int32(0)
	for i := 0; i < len(text); i++ {
		c := text[i]
		nx, ok := tr.nodes[n].next[c]
		if !ok {
			nx = int32(len(tr.nodes))
			tr.nodes = append(tr.nodes, trieNode{token: -1})
			if tr.nodes[n].next == nil {
				tr.nodes[n].next = map[byte]int32{}
			}
			tr.nodes[n].next[c] = nx
		}
		n = nx
	}
	tr.nodes[n].token = token
	tr.first[text[0]] = true
}

// occurring returns the sorted indices of the tokens whose text occurs in s.
func (tr *specialTrie) occurring(s string) []int32 {
	if len(tr.nodes) == 0 {
		return nil
	}
	var found []int32
	for i := 0; i < len(s); i++ {
		if !tr.first[s[i]] {
			continue
		}
		n := int32(0)
		for j := i; j < len(s); j++ {
			nx, ok := tr.nodes[n].next[s[j]]
			if !ok {
				break
			}
			n = nx
			if tok := tr.nodes[n].token; tok >= 0 {
				found = appendUnique(found, tok)
			}
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i] < found[j] })
	return found
}

func appendUnique(s []int32, x int32) []int32 {
	for _, y := range s {
		if y == x {
			return s
		}
	}
	return append(s, x)
}
