package tokenize

import (
	"fmt"
	"strings"
	"sync"
)

// Byte-level BPE (llama.cpp's LLAMA_VOCAB_TYPE_BPE, GGUF model "gpt2").
//
// llama.cpp's llm_tokenizer_bpe_session: the fragment is split into words by
// the pre-tokenizer, each word's bytes are mapped to GPT-2's printable
// byte-level alphabet, one symbol per byte, and adjacent symbols are merged
// by merge rank (lowest first, ties to the leftmost pair) until no ranked
// pair is left. A final symbol that is a token is emitted as that token; any
// other is emitted byte by byte of its encoded text, each byte that is itself
// a one-byte token kept and the rest dropped, as llama.cpp does.
//
// Here the vocabulary is decoded back to raw bytes once, so words are merged
// on their raw bytes: each distinct string that can be a symbol (tokens and
// the parts and results of merges) has a symbol id, equal to the token id
// for tokens, and merges are looked up by the pair of symbol ids.

// bpeFragmenter is the BPE tokenizer for one vocabulary. It is immutable
// after construction; per-call buffers come from a pool.
type bpeFragmenter struct {
	pre      bpePre
	table    *cptTable
	ids      map[string]int32 // raw bytes -> symbol id; ids below nVocab are tokens
	nVocab   int32
	byteSym  [256]int32
	merges   map[uint64]bpeMerge // left<<32 | right symbol id
	encoded  [256]string         // byte-level encoding of each byte
	fallback [256]int32          // token of each one-byte string, NoToken if none
	pool     sync.Pool           // *bpeScratch
	cache    wordCache
}

type bpeMerge struct {
	rank, result int32
}

type bpeScratch struct {
	split splitBuf
	syms  []bpeSym
	heap  []bpeCand
}

// bpeSym is one symbol of a word: bytes [start, end) of the word.
type bpeSym struct {
	id         int32
	start, end int32
	prev, next int32
}

// bpeCand is a candidate merge of the symbol at left with its right neighbour.
type bpeCand struct {
	rank, left, right int32
	lid, rid          int32 // the symbol ids when queued; stale if changed
}

// byteDecoder maps the runes of GPT-2's byte-level alphabet (all below
// U+0144) back to bytes; -1 marks runes outside the alphabet.
type byteDecoder [0x144]int16

// byteEncoding returns GPT-2's byte-to-rune map: printable Latin-1 bytes map
// to themselves, the others to U+0100 onwards in byte order.
func byteEncoding() (enc [256]rune, dec *byteDecoder) {
	dec = new(byteDecoder)
	for i := range dec {
		dec[i] = -1
	}
	n := rune(0)
	for b := 0; b < 256; b++ {
		if b >= 0x21 && b <= 0x7E || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			enc[b] = rune(b)
		} else {
			enc[b] = 256 + n
			n++
		}
		dec[enc[b]] = int16(b)
	}
	return enc, dec
}

// decodeByteLevel maps a byte-level encoded string back to raw bytes.
func decodeByteLevel(s string, dec *byteDecoder) (string, bool) {
	buf := make([]byte, 0, len(s))
	for _, r := range s {
		if r >= rune(len(dec)) || dec[r] < 0 {
			return "", false
		}
		buf = append(buf, byte(dec[r]))
	}
	return string(buf), true
}

// newBPEFragmenter builds the BPE tokenizer for v.
func newBPEFragmenter(v *Vocab) (fragmenter, error) {
	pre, ok := bpePres[v.Pre]
	if !ok {
		return nil, fmt.Errorf("bpe: pre-tokenizer %q: %w", v.Pre, ErrUnsupported)
	}
	f := &bpeFragmenter{pre: pre, table: unicodeFlags(), nVocab: int32(len(v.Tokens))}
	enc, dec := byteEncoding()
	f.ids = make(map[string]int32, len(v.Tokens)+len(v.Merges)/8)
	for i := range f.fallback {
		f.fallback[i] = NoToken
		f.encoded[i] = string(enc[i])
	}
	for id, t := range v.Tokens {
		if len(t) == 1 {
			f.fallback[t[0]] = int32(id)
		}
		if raw, ok := decodeByteLevel(t, dec); ok {
			f.ids[raw] = int32(id) // the encoding is a bijection: no collisions
		}
	}
	next := f.nVocab
	sym := func(raw string) int32 {
		if id, ok := f.ids[raw]; ok {
			return id
		}
		f.ids[raw] = next
		next++
		return next - 1
	}
	for b := 0; b < 256; b++ {
		f.byteSym[b] = sym(string([]byte{byte(b)}))
	}
	f.merges = make(map[uint64]bpeMerge, len(v.Merges))
	for rank, m := range v.Merges {
		sp := -1
		if len(m) > 1 {
			if i := strings.IndexByte(m[1:], ' '); i >= 0 {
				sp = i + 1 // llama.cpp: word.find(' ', 1)
			}
		}
		if sp < 0 {
			continue
		}
		a, okA := decodeByteLevel(m[:sp], dec)
		b, okB := decodeByteLevel(m[sp+1:], dec)
		if !okA || !okB || a == "" || b == "" {
			continue // can never match a symbol
		}
		key := uint64(sym(a))<<32 | uint64(uint32(sym(b)))
		if _, dup := f.merges[key]; !dup {
			f.merges[key] = bpeMerge{rank: int32(rank), result: sym(a + b)}
		}
	}
	f.pool.New = func() any { return &bpeScratch{} }
	return f, nil
}

func (f *bpeFragmenter) appendTokens(out []Token, frag string, off int, _ bool) []Token {
	sc := f.pool.Get().(*bpeScratch)
	b := &sc.split
	b.load(frag, f.table)
	start := 0
	for _, e := range b.split(f.pre.steps) {
		ws, we := int(b.offs[start]), int(b.offs[e])
		out = f.word(out, sc, frag[ws:we], off+ws)
		start = int(e)
	}
	f.pool.Put(sc)
	return out
}

// word appends the tokens of one pre-tokenized word starting at byte off,
// from the cache when the word is short and was seen before.
func (f *bpeFragmenter) word(out []Token, sc *bpeScratch, w string, off int) []Token {
	if len(w) > cacheMaxWord {
		return f.merge(out, sc, w, off)
	}
	if toks, ok := f.cache.get(w); ok {
		for _, t := range toks {
			out = append(out, Token{ID: t.id, Start: int32(off) + t.start, End: int32(off) + t.end})
		}
		return out
	}
	mark := len(out)
	out = f.merge(out, sc, w, off)
	toks := make([]cachedTok, len(out)-mark)
	for i, t := range out[mark:] {
		toks[i] = cachedTok{id: t.ID, start: t.Start - int32(off), end: t.End - int32(off)}
	}
	f.cache.put(w, toks)
	return out
}

// merge tokenizes one word: llama.cpp's merge loop.
func (f *bpeFragmenter) merge(out []Token, sc *bpeScratch, w string, off int) []Token {
	if f.pre.ignoreMerges {
		if id, ok := f.ids[w]; ok && id < f.nVocab {
			return append(out, Token{ID: id, Start: int32(off), End: int32(off + len(w))})
		}
	}
	if len(w) == 1 {
		return f.emit(out, f.byteSym[w[0]], w, off)
	}
	syms := sc.syms[:0]
	for i := 0; i < len(w); i++ {
		syms = append(syms, bpeSym{id: f.byteSym[w[i]], start: int32(i), end: int32(i + 1), prev: int32(i - 1), next: int32(i + 1)})
	}
	syms[len(syms)-1].next = -1
	h := sc.heap[:0]
	for i := 1; i < len(syms); i++ {
		h = f.push(h, syms, int32(i-1), int32(i))
	}
	for len(h) > 0 {
		var c bpeCand
		c, h = bpePop(h)
		l, r := &syms[c.left], &syms[c.right]
		if l.id != c.lid || r.id != c.rid || l.end == l.start || r.end == r.start {
			continue // stale
		}
		l.id = f.merges[uint64(c.lid)<<32|uint64(uint32(c.rid))].result
		l.end = r.end
		r.start = r.end // merged away
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		if l.prev >= 0 {
			h = f.push(h, syms, l.prev, c.left)
		}
		if l.next >= 0 {
			h = f.push(h, syms, c.left, l.next)
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		s := syms[i]
		out = f.emit(out, s.id, w[s.start:s.end], off+int(s.start))
	}
	sc.syms, sc.heap = syms, h
	return out
}

// push queues the merge of symbols left and right if their pair has a rank.
func (f *bpeFragmenter) push(h []bpeCand, syms []bpeSym, left, right int32) []bpeCand {
	lid, rid := syms[left].id, syms[right].id
	m, ok := f.merges[uint64(lid)<<32|uint64(uint32(rid))]
	if !ok {
		return h
	}
	return bpePush(h, bpeCand{rank: m.rank, left: left, right: right, lid: lid, rid: rid})
}

// emit appends the token for symbol id covering raw bytes s at off, or its
// byte fallback.
func (f *bpeFragmenter) emit(out []Token, id int32, s string, off int) []Token {
	if id < f.nVocab {
		return append(out, Token{ID: id, Start: int32(off), End: int32(off + len(s))})
	}
	for i := 0; i < len(s); i++ {
		e := f.encoded[s[i]]
		for j := 0; j < len(e); j++ {
			if t := f.fallback[e[j]]; t != NoToken {
				out = append(out, Token{ID: t, Start: int32(off + i), End: int32(off + i + 1)})
			}
		}
	}
	return out
}

// bpeLess orders candidates by rank, then leftmost (llm_bigram_bpe::comparator).
func bpeLess(a, b bpeCand) bool {
	return a.rank < b.rank || a.rank == b.rank && a.left < b.left
}

func bpePush(h []bpeCand, c bpeCand) []bpeCand {
	h = append(h, c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !bpeLess(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func bpePop(h []bpeCand) (bpeCand, []bpeCand) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && bpeLess(h[l], h[m]) {
			m = l
		}
		if r < n && bpeLess(h[r], h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top, h
}

// Word cache: natural text repeats its words, so the tokens of short words
// are kept, up to a fixed number of words (first come, first kept; no
// eviction). The shards keep concurrent Tokenize calls from contending.
const (
	cacheMaxWord   = 64 // bytes
	cacheShards    = 32
	cacheShardSize = 1 << 12 // words per shard
)

// cachedTok is a token of a word; its span is in byte offsets of the word.
type cachedTok struct {
	id, start, end int32
}

type wordCache struct {
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]cachedTok
	_  [32]byte // keep shards on separate cache lines
}

func cacheShardOf(w string) int {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(w); i++ {
		h = (h ^ uint32(w[i])) * 16777619
	}
	return int(h % cacheShards)
}

func (c *wordCache) get(w string) ([]cachedTok, bool) {
	s := &c.shards[cacheShardOf(w)]
	s.mu.RLock()
	toks, ok := s.m[w]
	s.mu.RUnlock()
	return toks, ok
}

func (c *wordCache) put(w string, toks []cachedTok) {
	s := &c.shards[cacheShardOf(w)]
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[string][]cachedTok)
	}
	if len(s.m) < cacheShardSize {
		s.m[strings.Clone(w)] = toks
	}
	s.mu.Unlock()
}
