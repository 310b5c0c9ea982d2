package tokenize

import (
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
)

// SentencePiece BPE (llama.cpp's LLAMA_VOCAB_TYPE_SPM, GGUF model "llama").
//
// llama.cpp's llm_tokenizer_spm_session: the fragment, with a space prepended
// when add_space_prefix is set and the fragment starts the input or follows a
// special token, has every ' ' replaced by U+2581 ("▁"). It is split into
// UTF-8 characters (the length taken from the lead byte alone), and adjacent
// symbols are merged greedily: the pair whose concatenation is a vocabulary
// token with the highest score first, ties going to the leftmost pair. A final
// symbol that is a token is emitted as that token; any other is emitted byte
// by byte as the <0xXX> byte tokens (byte fallback).
//
// llama.cpp also keeps a rev_merge map to split such a symbol back into its
// parts, but a merged symbol is always a token, so only unmerged single
// characters ever reach the byte fallback and the map is never consulted.

// spKeepScratch is the largest text, in bytes, whose scratch buffers go
// back to the pool; those of longer texts are left to the GC.
const spKeepScratch = 1 << 20

// spmSpace is U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's escaped space.
const spmSpace = "\u2581"

// spmFragmenter is the SPM tokenizer for one vocabulary. It is immutable after
// construction; per-call buffers come from a pool.
type spmFragmenter struct {
	trie           *spTrie // llama.cpp's token_to_id, over every token
	scores         []float32
	byteTok        [256]int32 // llama.cpp's byte_to_token; NoToken when absent
	unk            int32
	addSpacePrefix bool
	wordSafe       bool // spmWordSafe: words can be merged one at a time
	seed           maphash.Seed
	pool           sync.Pool // *spmScratch
}

type spmSymbol struct {
	start, n   int32 // byte range in the escaped text; n == 0 once merged away
	prev, next int32
	node       int32 // the trie node of the symbol's text, or -1
}

type spmBigram struct {
	left, right int32
	score       float32
	size        int32
	node        int32 // the trie node of the merged text
}

// spmPiece is an output token and its byte range in the escaped text.
type spmPiece struct{ id, start, end int32 }

type spmScratch struct {
	text    []byte
	symbols []spmSymbol
	heap    []spmBigram
	pieces  []spmPiece
	// A word cache, private to the scratch so it needs no lock.
	cache []spmCacheSlot
}

// newSPMFragmenter builds the SPM tokenizer for v.
func newSPMFragmenter(v *Vocab) (fragmenter, error) {
	ids, err := spTokenIndex(v)
	if err != nil {
		return nil, fmt.Errorf("spm: %w", err)
	}
	keys := make([]spTrieKey, len(v.Tokens))
	for i, t := range v.Tokens {
		if t == "" {
			t = spEmptyName(i)
		}
		keys[i] = spTrieKey{t, int32(i)}
	}
	f := &spmFragmenter{
		trie:           newSPTrie(keys),
		scores:         v.Scores,
		unk:            v.UNK,
		addSpacePrefix: v.AddSpacePrefix,
		wordSafe:       spmWordSafe(v.Tokens),
		seed:           maphash.MakeSeed(),
	}
	if f.unk < 0 || int(f.unk) >= len(v.Tokens) {
		f.unk = NoToken
	}
	for b := 0; b < 256; b++ {
		f.byteTok[b] = spByteToken(ids, byte(b))
	}
	f.pool.New = func() any { return new(spmScratch) }
	return f, nil
}

// spTokenIndex maps each token's text to its id, as llama.cpp's token_to_id:
// an empty token is named "[EMPTY_<id>]", and a duplicate is an error.
func spTokenIndex(v *Vocab) (map[string]int32, error) {
	ids := make(map[string]int32, len(v.Tokens))
	for i, t := range v.Tokens {
		if t == "" {
			t = spEmptyName(i)
		}
		if j, dup := ids[t]; dup {
			return nil, fmt.Errorf("duplicate token %q has ids %d and %d", t, j, i)
		}
		ids[t] = int32(i)
	}
	return ids, nil
}

// spEmptyName is what llama.cpp calls an empty token.
func spEmptyName(id int) string { return "[EMPTY_" + strconv.Itoa(id) + "]" }

// spByteToken is llama.cpp's byte_to_token for SPM and UGM vocabularies: the
// "<0xXX>" token, else the token whose text is the byte itself.
func spByteToken(ids map[string]int32, b byte) int32 {
	const hex = "0123456789ABCDEF"
	if id, ok := ids[string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})]; ok {
		return id
	}
	if id, ok := ids[string([]byte{b})]; ok {
		return id
	}
	return NoToken
}

// spUTF8Len is llama.cpp's unicode_len_utf8: a character's length from its
// lead byte alone (1 for ASCII and stray continuation bytes).
func spUTF8Len(b byte) int {
	switch {
	case b < 0xC0:
		return 1
	case b < 0xE0:
		return 2
	case b < 0xF0:
		return 3
	}
	return 4
}

func (f *spmFragmenter) appendTokens(out []Token, frag string, off int, first bool) []Token {
	if frag == "" {
		return out
	}
	s := f.pool.Get().(*spmScratch)
	defer func() {
		if cap(s.text) <= spKeepScratch {
			f.pool.Put(s)
		}
	}()

	prefix := 0
	s.text = s.text[:0]
	if f.addSpacePrefix && first {
		s.text = append(s.text, spmSpace...)
		prefix = len(spmSpace)
	}
	for i := 0; i < len(frag); i++ {
		if frag[i] == ' ' {
			s.text = append(s.text, spmSpace...)
		} else {
			s.text = append(s.text, frag[i])
		}
	}
	f.merge(s)
	return f.emit(out, s, frag, off, prefix)
}

// merge splits s.text into words and appends each word's pieces to
// s.pieces.
//
// When no token can span the start of a word (see spmWordSafe), each word
// (a run of "▁" and the characters up to the next "▁" after them) is merged
// on its own: pairs never straddle words, and within a word the merges
// happen in the same order as in one queue over the whole text, since the
// order (score, then position) compares pairs of one word alike either way.
// A word's pieces then depend on the word alone, so they are cached.
func (f *spmFragmenter) merge(s *spmScratch) {
	text := s.text
	s.pieces = s.pieces[:0]
	if !f.wordSafe {
		f.mergeWord(s, 0, len(text))
		return
	}
	from, prevSpace := 0, false
	for offs := 0; offs < len(text); {
		n := min(spUTF8Len(text[offs]), len(text)-offs)
		space := n == len(spmSpace) && string(text[offs:offs+n]) == spmSpace
		if space && !prevSpace && offs > from {
			f.cachedWord(s, from, offs)
			from = offs
		}
		prevSpace = space
		offs += n
	}
	f.cachedWord(s, from, len(text))
}

// The word cache is direct-mapped: spmCacheSlots slots, each holding one
// word of up to spmCacheWordLen bytes and its up to spmCachePieces pieces.
// It allocates nothing once built, so it does not churn the GC.
const (
	spmCacheSlots   = 1 << 14
	spmCacheWordLen = 32
	spmCachePieces  = 12
)

type spmCacheSlot struct {
	word   [spmCacheWordLen]byte
	wlen   uint8 // 0: empty
	npiece uint8
	n      [spmCachePieces]uint8 // piece lengths in bytes
	id     [spmCachePieces]int32
}

// cachedWord appends the pieces of text[from:to] from the cache, or merges
// the word and caches its pieces.
func (f *spmFragmenter) cachedWord(s *spmScratch, from, to int) {
	word := s.text[from:to]
	if len(word) > spmCacheWordLen {
		f.mergeWord(s, from, to)
		return
	}
	if s.cache == nil {
		s.cache = make([]spmCacheSlot, spmCacheSlots)
	}
	slot := &s.cache[maphash.Bytes(f.seed, word)&(spmCacheSlots-1)]
	if int(slot.wlen) == len(word) && string(slot.word[:slot.wlen]) == string(word) {
		pos := int32(from)
		for i := range int(slot.npiece) {
			n := int32(slot.n[i])
			s.pieces = append(s.pieces, spmPiece{id: slot.id[i], start: pos, end: pos + n})
			pos += n
		}
		return
	}
	first := len(s.pieces)
	f.mergeWord(s, from, to)
	pieces := s.pieces[first:]
	if len(pieces) > spmCachePieces {
		return
	}
	slot.wlen = uint8(copy(slot.word[:], word))
	slot.npiece = uint8(len(pieces))
	for i, p := range pieces {
		slot.n[i], slot.id[i] = uint8(p.end-p.start), p.id
	}
}

// mergeWord splits text[from:to] into characters, applies the bigram
// merges and appends the resulting pieces.
func (f *spmFragmenter) mergeWord(s *spmScratch, from, to int) {
	text := s.text
	s.symbols = s.symbols[:0]
	for offs := from; offs < to; {
		n := min(spUTF8Len(text[offs]), to-offs)
		idx := int32(len(s.symbols))
		next := idx + 1
		if offs+n == to {
			next = -1
		}
		s.symbols = append(s.symbols, spmSymbol{start: int32(offs), n: int32(n), prev: idx - 1, next: next,
			node: f.trie.walk(0, text[offs:offs+n])})
		offs += n
	}
	s.heap = s.heap[:0]
	for i := 1; i < len(s.symbols); i++ {
		f.tryAddBigram(s, int32(i-1), int32(i))
	}
	syms := s.symbols
	for len(s.heap) > 0 {
		bg := spmHeapPop(&s.heap)
		l, r := &syms[bg.left], &syms[bg.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != bg.size {
			continue // stale: one side was merged since
		}
		l.n += r.n
		l.node = bg.node
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bg.left
		}
		f.tryAddBigram(s, l.prev, bg.left)
		f.tryAddBigram(s, bg.left, l.next)
	}
	f.resegment(s)
}

// resegment appends the final symbols as pieces: the symbol's token, or its
// bytes' tokens. Merges fold a symbol into its left neighbour, so the
// survivors in index order are the final chain.
func (f *spmFragmenter) resegment(s *spmScratch) {
	for _, sym := range s.symbols {
		if sym.n == 0 {
			continue
		}
		if id := f.trie.valueAt(sym.node); id != NoToken {
			s.pieces = append(s.pieces, spmPiece{id: id, start: sym.start, end: sym.start + sym.n})
			continue
		}
		for j := sym.start; j < sym.start+sym.n; j++ {
			id := f.byteTok[s.text[j]]
			if id == NoToken {
				// llama.cpp throws (std::out_of_range) here; we emit UNK,
				// as SentencePiece does without byte fallback.
				id = f.unk
				if id == NoToken {
					continue
				}
			}
			s.pieces = append(s.pieces, spmPiece{id: id, start: j, end: j + 1})
		}
	}
}

// spmWordSafe reports whether no token has a "▁" after a character other
// than "▁": then no token can contain the start of a word, a "▁" that
// follows some other character.
func spmWordSafe(tokens []string) bool {
	for _, t := range tokens {
		for k := 1; k < len(t); k++ {
			if strings.HasPrefix(t[k:], spmSpace) && strings.Trim(t[:k], spmSpace) != "" {
				return false
			}
		}
	}
	return true
}

// tryAddBigram queues the merge of two adjacent symbols if their
// concatenation is a token.
func (f *spmFragmenter) tryAddBigram(s *spmScratch, left, right int32) {
	if left < 0 || right < 0 {
		return
	}
	l, r := s.symbols[left], s.symbols[right]
	if l.node < 0 {
		return
	}
	// The left symbol's trie node continued by the right symbol's bytes.
	node := f.trie.walk(l.node, s.text[r.start:r.start+r.n])
	if node < 0 {
		return
	}
	id := f.trie.value[node]
	if id == NoToken {
		return
	}
	var score float32
	if int(id) < len(f.scores) {
		score = f.scores[id]
	}
	spmHeapPush(&s.heap, spmBigram{left: left, right: right, score: score, size: l.n + r.n, node: node})
}

// emit appends the pieces with their spans in the whole text.
func (f *spmFragmenter) emit(out []Token, s *spmScratch, frag string, off, prefix int) []Token {
	m := spmSpanMap{frag: frag, prefix: prefix, e: prefix}
	for _, p := range s.pieces {
		start := m.pos(int(p.start))
		out = append(out, Token{ID: p.id, Start: int32(off + start), End: int32(off + m.pos(int(p.end)))})
	}
	return out
}

// spmSpanMap maps offsets in the escaped text to offsets in the fragment,
// walking both forward. Each fragment byte is a chunk of one escaped byte,
// or three for a space; the prepended space is a chunk of zero width at 0.
// A chunk boundary maps to the chunk's start; an offset inside a chunk (a
// byte token splitting "▁") maps to the chunk's end, so spans never overlap.
type spmSpanMap struct {
	frag   string
	prefix int
	e, o   int // escaped offset and fragment offset of the current chunk
}

func (m *spmSpanMap) pos(b int) int {
	if b < m.prefix {
		return 0
	}
	for m.o < len(m.frag) {
		n := 1
		if m.frag[m.o] == ' ' {
			n = len(spmSpace)
		}
		if m.e+n > b {
			break
		}
		m.e += n
		m.o++
	}
	if b == m.e {
		return m.o
	}
	return m.o + 1
}

// spmHeapPush and spmHeapPop keep a binary max-heap ordered as llama.cpp's
// llm_bigram_spm comparator: higher score first, then the leftmost pair.
func spmHeapPush(h *[]spmBigram, b spmBigram) {
	q := append(*h, b)
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !spmBefore(q[i], q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
	*h = q
}

func spmHeapPop(h *[]spmBigram) spmBigram {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		c := l
		if r := l + 1; r < len(q) && spmBefore(q[r], q[l]) {
			c = r
		}
		if !spmBefore(q[c], q[i]) {
			break
		}
		q[i], q[c] = q[c], q[i]
		i = c
	}
	*h = q
	return top
}

// spmBefore reports whether a is merged before b.
func spmBefore(a, b spmBigram) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}
