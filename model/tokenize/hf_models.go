package tokenize

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

func parseHFModel(raw json.RawMessage) (hfModel, error) {
	if isNull(raw) {
		return nil, errNoModel
	}
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	if typ == "" { // files older than the "type" field: tell the models apart by their fields
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, err
		}
		_, merges := probe["merges"]
		_, maxChars := probe["max_input_chars_per_word"]
		vocab := strings.TrimSpace(string(probe["vocab"]))
		switch {
		case merges:
			typ = "BPE"
		case strings.HasPrefix(vocab, "["):
			typ = "Unigram"
		case maxChars:
			typ = "WordPiece"
		}
	}
	switch typ {
	case "WordPiece":
		return parseWordPiece(raw)
	case "Unigram":
		return parseUnigram(raw)
	case "BPE":
		return parseBPE(raw)
	}
	return nil, unsupported("model", typ)
}

// vocabTable turns a token → id map into the id-indexed token list.
func vocabTable(vocab map[string]int32) ([]string, error) {
	n := 0
	for _, id := range vocab {
		if id < 0 {
			return nil, fmt.Errorf("vocabulary id %d: want ≥ 0", id)
		}
		n = max(n, int(id)+1)
	}
	if n > 16<<20 {
		return nil, fmt.Errorf("vocabulary ids up to %d: too many", n-1)
	}
	toks := make([]string, n)
	for t, id := range vocab {
		toks[id] = t
	}
	return toks, nil
}

// wordPiece is the WordPiece model: greedy longest-match-first, pieces after
// the first carrying the continuing-subword prefix ("##"); a word with a
// position no piece matches, or longer than max_input_chars_per_word
// characters, is the unknown token.
type wordPiece struct {
	vocab    map[string]int32
	toks     []string
	unkID    int32
	prefix   string
	maxChars int
	maxLen   int // longest token in bytes
}

func parseWordPiece(raw json.RawMessage) (hfModel, error) {
	var j struct {
		UnkToken string           `json:"unk_token"`
		Prefix   *string          `json:"continuing_subword_prefix"`
		MaxChars *int             `json:"max_input_chars_per_word"`
		Vocab    map[string]int32 `json:"vocab"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("WordPiece: %w", err)
	}
	m := &wordPiece{vocab: j.Vocab, prefix: "##", maxChars: 100}
	if j.Prefix != nil {
		m.prefix = *j.Prefix
	}
	if j.MaxChars != nil {
		m.maxChars = *j.MaxChars
	}
	var err error
	if m.toks, err = vocabTable(j.Vocab); err != nil {
		return nil, fmt.Errorf("WordPiece: %w", err)
	}
	unk, ok := j.Vocab[j.UnkToken]
	if !ok {
		return nil, fmt.Errorf("WordPiece: unk_token %q is not in the vocabulary", j.UnkToken)
	}
	m.unkID = unk
	for t := range j.Vocab {
		m.maxLen = max(m.maxLen, len(t))
	}
	return m, nil
}

func (m *wordPiece) id(t string) (int32, bool) { id, ok := m.vocab[t]; return id, ok }
func (m *wordPiece) tokens() []string          { return m.toks }
func (m *wordPiece) kind() Kind                { return KindWPM }
func (m *wordPiece) unk() int32                { return m.unkID }

// wpScratch holds a word's bytes, each byte's character and the lookup key.
type wpScratch struct {
	s, key []byte
	charAt []int32
}

var wpPool = sync.Pool{New: func() any { return &wpScratch{} }}

func (m *wordPiece) tokenize(out []Token, word []nchar) []Token {
	whole := Token{ID: m.unkID, Start: word[0].start, End: word[len(word)-1].end}
	if len(word) > m.maxChars {
		return append(out, whole)
	}
	sc := wpPool.Get().(*wpScratch)
	defer wpPool.Put(sc)
	s, charAt := sc.s[:0], sc.charAt[:0]
	for i, c := range word {
		n := len(s)
		s = utf8.AppendRune(s, c.r)
		for ; n < len(s); n++ {
			charAt = append(charAt, int32(i))
		}
	}
	sc.s, sc.charAt = s, charAt
	mark := len(out)
	for start := 0; start < len(s); {
		end := min(len(s), start+m.maxLen)
		found := false
		for ; end > start; end-- {
			if end < len(s) && !utf8.RuneStart(s[end]) {
				continue
			}
			key := sc.key[:0]
			if start > 0 {
				key = append(key, m.prefix...)
			}
			key = append(key, s[start:end]...)
			sc.key = key
			if id, ok := m.vocab[string(key)]; ok {
				out = append(out, Token{ID: id, Start: word[charAt[start]].start, End: word[charAt[end-1]].end})
				found = true
				break
			}
		}
		if !found {
			return append(out[:mark], whole)
		}
		start = end
	}
	return out
}

// unigram is the Unigram model: the Viterbi segmentation maximizing the sum
// of piece scores, where a character no piece starts with is the unknown
// token (scored min_score - 10) and consecutive unknowns are fused.
type unigram struct {
	pieces       []string
	scores       []float64
	ids          map[string]int32 // the last id of each piece
	trie         addedMatcher     // all pieces; used for its prefix walk
	unkID        int32
	minScore     float64
	byteFallback bool
}

func parseUnigram(raw json.RawMessage) (hfModel, error) {
	var j struct {
		UnkID        *int32               `json:"unk_id"`
		Vocab        [][2]json.RawMessage `json:"vocab"`
		ByteFallback bool                 `json:"byte_fallback"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("Unigram: %w", err)
	}
	m := &unigram{ids: map[string]int32{}, unkID: NoToken, byteFallback: j.ByteFallback, minScore: math.Inf(1)}
	for i, e := range j.Vocab {
		var p string
		err := json.Unmarshal(e[0], &p)
		var s float64
		if err == nil {
			s, err = serdeFloat(strings.TrimSpace(string(e[1])))
		}
		if err != nil {
			return nil, fmt.Errorf("Unigram: vocab entry %d: want [piece, score]: %w", i, err)
		}
		m.pieces, m.scores = append(m.pieces, p), append(m.scores, s)
		m.ids[p] = int32(i)
		m.trie.add(p, int32(i))
		m.minScore = min(m.minScore, s)
	}
	if j.UnkID == nil {
		return nil, fmt.Errorf("Unigram without unk_id: %w", ErrUnsupported)
	}
	if *j.UnkID < 0 || int(*j.UnkID) >= len(m.pieces) {
		return nil, fmt.Errorf("Unigram: unk_id %d outside the vocabulary", *j.UnkID)
	}
	m.unkID = *j.UnkID
	return m, nil
}

func (m *unigram) id(t string) (int32, bool) { id, ok := m.ids[t]; return id, ok }
func (m *unigram) tokens() []string          { return m.pieces }
func (m *unigram) kind() Kind                { return KindUGM }
func (m *unigram) unk() int32                { return m.unkID }

const unkPenalty = 10.0

func (m *unigram) tokenize(out []Token, word []nchar) []Token {
	s := nstring(word)
	type node struct {
		id    int32
		score float64
		from  int // -1: unreached
	}
	best := make([]node, len(s)+1)
	for i := range best {
		best[i].from = -1
	}
	unkScore := m.minScore - unkPenalty
	for at := 0; at < len(s); {
		base := best[at].score
		_, mblen := utf8.DecodeRuneInString(s[at:])
		single := false
		m.trie.prefixes(s[at:], func(n int, id int32) {
			t := &best[at+n]
			if sc := m.scores[id] + base; t.from < 0 || sc > t.score {
				t.score, t.from, t.id = sc, at, id
			}
			single = single || n == mblen
		})
		if !single {
			t := &best[at+mblen]
			if sc := unkScore + base; t.from < 0 || sc > t.score {
				t.score, t.from, t.id = sc, at, m.unkID
			}
		}
		at += mblen
	}
	// Back from the end: pieces, with consecutive unknowns fused.
	type seg struct{ start, end int }
	var segs []seg
	unkRun := -1
	for end := len(s); end > 0; {
		n := best[end]
		if n.id == m.unkID {
			if unkRun < 0 {
				unkRun = end
			}
		} else {
			if unkRun >= 0 {
				segs = append(segs, seg{end, unkRun})
				unkRun = -1
			}
			segs = append(segs, seg{n.from, end})
		}
		end = n.from
	}
	if unkRun >= 0 {
		segs = append(segs, seg{0, unkRun})
	}
	offs := byteToChar(word, s)
	for i := len(segs) - 1; i >= 0; i-- {
		g := segs[i]
		start, end := word[offs[g.start]].start, word[offs[g.end]-1].end
		out = m.emit(out, s[g.start:g.end], start, end)
	}
	return out
}

// emit appends a piece's token: its id (the last of that text), else its
// bytes as <0xXX> pieces with byte_fallback, else the unknown token.
func (m *unigram) emit(out []Token, piece string, start, end int32) []Token {
	if id, ok := m.ids[piece]; ok {
		return append(out, Token{ID: id, Start: start, End: end})
	}
	if m.byteFallback {
		mark := len(out)
		for i := 0; i < len(piece); i++ {
			id, ok := m.ids[fmt.Sprintf("<0x%02X>", piece[i])]
			if !ok {
				out = out[:mark]
				break
			}
			out = append(out, Token{ID: id, Start: start, End: end})
		}
		if len(out) > mark {
			return out
		}
	}
	return append(out, Token{ID: m.unkID, Start: start, End: end})
}

// byteToChar maps each byte offset of s (the text of word) to the index of
// the character there; offset len(s) maps to len(word).
func byteToChar(word []nchar, s string) []int {
	at := make([]int, len(s)+1)
	b := 0
	for i, c := range word {
		n := utf8.RuneLen(c.r)
		for k := 0; k < n; k++ {
			at[b+k] = i
		}
		b += n
	}
	at[len(s)] = len(word)
	return at
}

// prefixes calls fn for every entry that is a prefix of s, shortest first,
// with its length and value.
func (m addedMatcher) prefixes(s string, fn func(n int, id int32)) {
	if len(m.nodes) == 0 {
		return
	}
	n := int32(0)
	for j := 0; j < len(s); j++ {
		nx, ok := m.nodes[n].next[s[j]]
		if !ok {
			return
		}
		n = nx
		if id := m.nodes[n].token; id >= 0 {
			fn(j+1, id)
		}
	}
}

// bpeModel is the BPE model: each character of the word (with the
// continuing prefix after the first and the end-of-word suffix on the last)
// is a symbol, unknown characters become the unknown token (fused when
// fuse_unk) or <0xXX> bytes (byte_fallback); then the pair of adjacent
// symbols with the lowest merge rank, leftmost first, is merged until none
// has a merge.
type bpeModel struct {
	vocab        map[string]int32
	toks         []string
	merges       map[[2]int32]hfMerge
	unkID        int32
	prefix       string
	suffix       string
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
}

type hfMerge struct{ rank, id int32 }

func parseBPE(raw json.RawMessage) (hfModel, error) {
	var j struct {
		Dropout      *float64          `json:"dropout"`
		UnkToken     *string           `json:"unk_token"`
		Prefix       *string           `json:"continuing_subword_prefix"`
		Suffix       *string           `json:"end_of_word_suffix"`
		FuseUnk      bool              `json:"fuse_unk"`
		ByteFallback bool              `json:"byte_fallback"`
		IgnoreMerges bool              `json:"ignore_merges"`
		Vocab        map[string]int32  `json:"vocab"`
		Merges       []json.RawMessage `json:"merges"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("BPE: %w", err)
	}
	if j.Dropout != nil && *j.Dropout > 0 {
		return nil, fmt.Errorf("BPE with dropout %g: %w (it is random)", *j.Dropout, ErrUnsupported)
	}
	m := &bpeModel{vocab: j.Vocab, merges: map[[2]int32]hfMerge{}, unkID: NoToken, fuseUnk: j.FuseUnk,
		byteFallback: j.ByteFallback, ignoreMerges: j.IgnoreMerges}
	if j.Prefix != nil {
		m.prefix = *j.Prefix
	}
	if j.Suffix != nil {
		m.suffix = *j.Suffix
	}
	var err error
	if m.toks, err = vocabTable(j.Vocab); err != nil {
		return nil, fmt.Errorf("BPE: %w", err)
	}
	if j.UnkToken != nil {
		id, ok := j.Vocab[*j.UnkToken]
		if !ok {
			return nil, fmt.Errorf("BPE: unk_token %q is not in the vocabulary", *j.UnkToken)
		}
		m.unkID = id
	}
	rank := 0
	for _, r := range j.Merges {
		a, b, err := parseMerge(r)
		if err == errMergeVersion {
			continue // a "#version" line of a merges.txt
		}
		if err != nil {
			return nil, fmt.Errorf("BPE: merge %d: %w", rank, err)
		}
		ia, ok1 := j.Vocab[a]
		ib, ok2 := j.Vocab[b]
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("BPE: merge %d (%q %q): a part is not in the vocabulary", rank, a, b)
		}
		if len(b) < len(m.prefix) {
			return nil, fmt.Errorf("BPE: merge %d (%q %q): the second part is shorter than the prefix %q", rank, a, b, m.prefix)
		}
		merged := a + b[len(m.prefix):]
		id, ok := j.Vocab[merged]
		if !ok {
			return nil, fmt.Errorf("BPE: merge %d: %q is not in the vocabulary", rank, merged)
		}
		m.merges[[2]int32{ia, ib}] = hfMerge{int32(rank), id} // a repeated pair keeps its last rank, as in the library
		rank++
	}
	return m, nil
}

var errMergeVersion = errors.New("#version line")

// parseMerge reads a merge, "a b" or ["a", "b"].
func parseMerge(r json.RawMessage) (string, string, error) {
	var s string
	if err := json.Unmarshal(r, &s); err == nil {
		if strings.HasPrefix(s, "#version") {
			return "", "", errMergeVersion
		}
		parts := strings.Split(s, " ")
		if len(parts) != 2 {
			return "", "", fmt.Errorf("%q: want two parts separated by a space", s)
		}
		return parts[0], parts[1], nil
	}
	var pair []string
	if err := json.Unmarshal(r, &pair); err != nil || len(pair) != 2 {
		return "", "", fmt.Errorf("%s: want \"a b\" or [a, b]", r)
	}
	return pair[0], pair[1], nil
}

func (m *bpeModel) id(t string) (int32, bool) { id, ok := m.vocab[t]; return id, ok }
func (m *bpeModel) tokens() []string          { return m.toks }
func (m *bpeModel) kind() Kind                { return KindBPE }
func (m *bpeModel) unk() int32                { return m.unkID }

// bpeSymbol is a symbol of a word being merged: a token and its characters.
type bpeSymbol struct {
	id         int32
	start, end int // character indices in the word
}

func (m *bpeModel) tokenize(out []Token, word []nchar) []Token {
	s := nstring(word)
	if m.ignoreMerges {
		if id, ok := m.vocab[s]; ok {
			return append(out, Token{ID: id, Start: word[0].start, End: word[len(word)-1].end})
		}
	}
	syms := m.symbols(word)
	for {
		best, bestAt := hfMerge{rank: -1}, -1
		for i := 0; i+1 < len(syms); i++ {
			if mg, ok := m.merges[[2]int32{syms[i].id, syms[i+1].id}]; ok && (best.rank < 0 || mg.rank < best.rank) {
				best, bestAt = mg, i
			}
		}
		if bestAt < 0 {
			break
		}
		syms[bestAt] = bpeSymbol{best.id, syms[bestAt].start, syms[bestAt+1].end}
		syms = append(syms[:bestAt+1], syms[bestAt+2:]...)
	}
	for _, y := range syms {
		out = append(out, Token{ID: y.id, Start: word[y.start].start, End: word[y.end-1].end})
	}
	return out
}

// symbols is the word's initial symbols (the library's merge_word before merging).
func (m *bpeModel) symbols(word []nchar) []bpeSymbol {
	var syms []bpeSymbol
	unk := bpeSymbol{id: NoToken}
	flushUnk := func() {
		if unk.id != NoToken {
			syms = append(syms, unk)
			unk.id = NoToken
		}
	}
	for i, c := range word {
		piece := string(c.r)
		if i > 0 {
			piece = m.prefix + piece
		}
		if i == len(word)-1 {
			piece += m.suffix
		}
		if id, ok := m.vocab[piece]; ok {
			flushUnk()
			syms = append(syms, bpeSymbol{id, i, i + 1})
			continue
		}
		if m.byteFallback {
			var ids []int32
			for k := 0; k < len(piece); k++ {
				id, ok := m.vocab[fmt.Sprintf("<0x%02X>", piece[k])]
				if !ok {
					ids = nil
					break
				}
				ids = append(ids, id)
			}
			if ids != nil {
				for _, id := range ids {
					syms = append(syms, bpeSymbol{id, i, i + 1})
				}
				continue
			}
		}
		if m.unkID == NoToken {
			continue // no unknown token: the character is dropped
		}
		switch {
		case unk.id != NoToken && m.fuseUnk:
			unk.end = i + 1
		default:
			flushUnk()
			unk = bpeSymbol{m.unkID, i, i + 1}
		}
	}
	flushUnk()
	return syms
}

// sortedKeys is for deterministic iteration in error messages and tests.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
