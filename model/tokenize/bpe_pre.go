package tokenize

// BPE pre-tokenizers: llama.cpp splits each raw fragment into words with a
// list of regular expressions per LLAMA_VOCAB_PRE_TYPE (llm_tokenizer_bpe),
// applied one after another, each splitting every current word into its
// matches and the runs between them (unicode_regex_split). The common ones
// have hand-written splitters in unicode.cpp (gpt2, llama3, qwen2, qwen35);
// the others run std::regex over a "collapsed" text where each code point
// becomes one byte standing for its category. Go's regexp lacks lookahead, so
// each expression is reproduced here by hand: the unicode.cpp splitters are
// ported, and the simple expressions become a classStep (an optional prefix
// class followed by a run, one or three of a body class), which matches what
// std::regex finds with leftmost-first semantics.

// bpePre describes one llama.cpp pre-tokenizer type.
type bpePre struct {
	steps        []splitStep
	ignoreMerges bool // a word that is a token is emitted as is
	addBOS       bool // llama.cpp's default add_bos for this pre-tokenizer
	addSEP       bool
	noBOS        bool // the default BOS id is disabled
}

// Expressions shared by several pre-tokenizers.
var (
	stepGPT2    = splitFunc(splitGPT2)
	stepLlama3  = llama3Step(3, false)
	stepQwen2   = llama3Step(1, false)
	stepQwen35  = llama3Step(1, true)
	stepNumRun  = classStep{body: isNumber}                      // \p{N}+
	stepNumOne  = classStep{body: isNumber, exact: 1}            // \p{N}
	stepDigits3 = classStep{body: isASCIIDigit, exact: 3}        // [0-9][0-9][0-9]
	stepNewline = classStep{body: isCRLF, exact: 1}              // [\r\n]
	stepCJK     = classStep{body: bracketClass("一-龥ࠀ-一가-퟿")}     // [一-龥ࠀ-一가-퟿]+
	stepPoro    = classStep{prefix: isBlank, body: notPoroPunct} //  ?[^(\s|.,!?…。，、।۔،)]+
)

func presOf(names []string, p bpePre, m map[string]bpePre) {
	for _, n := range names {
		m[n] = p
	}
}

// bpePres maps tokenizer.ggml.pre to its pre-tokenizer, as
// llama_vocab::impl::load and llm_tokenizer_bpe do.
var bpePres = func() map[string]bpePre {
	m := map[string]bpePre{}
	gpt2 := bpePre{steps: []splitStep{stepGPT2}}
	starcoder := bpePre{steps: []splitStep{stepNumOne, stepGPT2}}
	qwen2 := bpePre{steps: []splitStep{stepQwen2}}
	presOf([]string{"", "default"}, bpePre{steps: []splitStep{
		classStep{body: isDefaultPunct}, // [\p{P}\$\+<=>\^~\|]+
		stepGPT2, stepNumRun, stepDigits3}}, m)
	presOf([]string{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
		bpePre{steps: []splitStep{stepLlama3}, ignoreMerges: true, addBOS: true}, m)
	presOf([]string{"dbrx", "smaug-bpe"}, bpePre{steps: []splitStep{stepLlama3}}, m)
	presOf([]string{"glm4", "chatglm-bpe"}, bpePre{steps: []splitStep{stepLlama3}, noBOS: true}, m)
	m["deepseek-llm"] = bpePre{steps: []splitStep{
		stepNewline,
		classStep{prefix: isSpace, body: deepseekLetter},
		classStep{prefix: isSpace, body: deepseekPunct},
		trailingSpaceStep{},
		stepCJK,
		stepNumRun}}
	m["deepseek-coder"] = bpePre{steps: []splitStep{
		stepNewline,
		classStep{prefix: isSpace, body: isLetter}, // \s?\p{L}+
		classStep{prefix: isSpace, body: isPunct},  // \s?\p{P}+
		stepCJK,
		stepNumOne}}
	m["falcon"] = bpePre{steps: []splitStep{
		classStep{body: isFalconPunct}, // [\p{P}\$\+<=>\^~\|`]+
		stepGPT2, stepDigits3}}
	presOf([]string{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"}, starcoder, m)
	presOf([]string{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
		"modern-bert", "exaone4", "mpt", "olmo", "jais", "trillion", "granite-docling"}, gpt2, m)
	presOf([]string{"jina-v1-en", "jina-v2-code", "roberta-bpe"}, bpePre{steps: []splitStep{stepGPT2}, addSEP: true}, m)
	presOf([]string{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"}, qwen2, m)
	m["qwen35"] = bpePre{steps: []splitStep{stepQwen35}}
	presOf([]string{"poro-chat", "bloom", "gpt3-finnish"}, bpePre{steps: []splitStep{stepPoro}}, m)
	m["viking"] = bpePre{steps: []splitStep{stepPoro, stepNumOne}}
	return m
}()

// splitBuf holds one fragment decoded into code points.
type splitBuf struct {
	cpts  []rune
	flags []cptFlags
	offs  []int32 // byte offset of each code point in the fragment, then its length
	ends  []int32 // current word ends (code point indices)
	tmp   []int32
}

// load decodes frag as llama.cpp's unicode_cpts_from_utf8 does.
func (b *splitBuf) load(frag string, tab *cptTable) {
	b.cpts, b.flags, b.offs = b.cpts[:0], b.flags[:0], b.offs[:0]
	for i := 0; i < len(frag); {
		c, n := rune(frag[i]), 1
		if c >= 0x80 {
			c, n = decodeRune(frag, i)
		}
		b.cpts = append(b.cpts, c)
		b.flags = append(b.flags, tab.of(c))
		b.offs = append(b.offs, int32(i))
		i += n
	}
	b.offs = append(b.offs, int32(len(frag)))
}

// split runs the steps and returns the word ends.
func (b *splitBuf) split(steps []splitStep) []int32 {
	b.ends = append(b.ends[:0], int32(len(b.cpts)))
	if len(b.cpts) == 0 {
		return b.ends[:0]
	}
	for _, st := range steps {
		b.tmp = b.tmp[:0]
		s := 0
		for _, e := range b.ends {
			b.tmp = st.split(b, s, int(e), b.tmp)
			s = int(e)
		}
		b.ends, b.tmp = b.tmp, b.ends
	}
	return b.ends
}

// splitStep splits the word [s, e) of b and appends the ends of its parts.
type splitStep interface {
	split(b *splitBuf, s, e int, out []int32) []int32
}

type splitFunc func(b *splitBuf, s, e int, out []int32) []int32

func (f splitFunc) split(b *splitBuf, s, e int, out []int32) []int32 { return f(b, s, e, out) }

// wordCursor is the bookkeeping the unicode.cpp splitters share.
type wordCursor struct {
	b    *splitBuf
	s, e int
	prev int
	out  []int32
}

const outOfRange = -1

func (w *wordCursor) cpt(p int) rune {
	if p >= w.s && p < w.e {
		return w.b.cpts[p]
	}
	return outOfRange
}

func (w *wordCursor) fl(p int) cptFlags {
	if p >= w.s && p < w.e {
		return w.b.flags[p]
	}
	return 0
}

// add ends a word at end (if non-empty) and returns its length.
func (w *wordCursor) add(end int) int {
	n := end - w.prev
	if n > 0 {
		w.out = append(w.out, int32(end))
	}
	w.prev = end
	return n
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at pos (case-insensitively
// when fold) and returns its length, or 0.
func (w *wordCursor) contraction(pos int, fold bool) int {
	if w.cpt(pos) != '\'' || pos+1 >= w.e {
		return 0
	}
	low := func(c rune) rune {
		if fold {
			return toLower(c)
		}
		return c
	}
	n := low(w.cpt(pos + 1))
	if n == 's' || n == 't' || n == 'm' || n == 'd' {
		return 2
	}
	if pos+2 < w.e {
		nn := low(w.cpt(pos + 2))
		if n == 'r' && nn == 'e' || n == 'v' && nn == 'e' || n == 'l' && nn == 'l' {
			return 3
		}
	}
	return 0
}

// whitespace handles the trailing alternatives \s+(?!\S)|\s+ (and, with
// newlines, \s*[\r\n]+ before them); it returns the new position.
func (w *wordCursor) whitespace(pos int, newlines bool) int {
	n, lastRN := 0, 0
	for w.fl(pos+n)&flagWhitespace != 0 {
		if c := w.cpt(pos + n); newlines && (c == '\r' || c == '\n') {
			lastRN = pos + n + 1
		}
		n++
	}
	switch {
	case lastRN > 0:
		pos = lastRN
	case n > 1 && w.cpt(pos+n) != outOfRange:
		pos += n - 1
	case n > 0:
		pos += n
	default:
		pos++ // no match: one code point on its own
	}
	w.add(pos)
	return pos
}

// splitGPT2 is unicode_regex_split_custom_gpt2:
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(b *splitBuf, s, e int, out []int32) []int32 {
	w := wordCursor{b: b, s: s, e: e, prev: s, out: out}
	for pos := s; pos < e; {
		if n := w.contraction(pos, false); n > 0 {
			pos += w.add(pos + n)
			continue
		}
		c, f := w.cpt(pos), w.fl(pos)
		f2 := f
		if c == ' ' {
			f2 = w.fl(pos + 1)
		}
		var class cptFlags
		switch {
		case f2&flagLetter != 0:
			class = flagLetter
		case f2&flagNumber != 0:
			class = flagNumber
		case f2&(flagWhitespace|flagLetter|flagNumber) == 0 && f2 != 0:
			class = 0
		default:
			pos = w.whitespace(pos, false)
			continue
		}
		if c == ' ' {
			pos++
		}
		for {
			g := w.fl(pos)
			if class != 0 && g&class == 0 || class == 0 && (g&(flagWhitespace|flagLetter|flagNumber) != 0 || g == 0) {
				break
			}
			pos++
		}
		w.add(pos)
	}
	return w.out
}

// llama3Step is unicode_regex_split_custom_llama3 (maxDigits 3), _qwen2
// (maxDigits 1) and _qwen35 (maxDigits 1, marks count as letters):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func llama3Step(maxDigits int, marks bool) splitStep {
	letter := flagLetter
	if marks {
		letter |= flagMark
	}
	return splitFunc(func(b *splitBuf, s, e int, out []int32) []int32 {
		w := wordCursor{b: b, s: s, e: e, prev: s, out: out}
		for pos := s; pos < e; {
			if n := w.contraction(pos, true); n > 0 {
				pos += w.add(pos + n)
				continue
			}
			c, f := w.cpt(pos), w.fl(pos)
			if !(c == '\r' || c == '\n' || f&flagNumber != 0) && (f|w.fl(pos+1))&letter != 0 {
				pos++
				for w.fl(pos)&letter != 0 {
					pos++
				}
				w.add(pos)
				continue
			}
			if f&flagNumber != 0 {
				ini := pos
				for w.fl(pos)&flagNumber != 0 {
					pos++
					if pos-ini >= maxDigits {
						w.add(pos)
						ini = pos
					}
				}
				w.add(pos)
				continue
			}
			f2 := f
			if c == ' ' {
				f2 = w.fl(pos + 1)
			}
			if f2&(flagWhitespace|letter|flagNumber) == 0 && f != 0 {
				if c == ' ' {
					pos++
				}
				for g := f2; g&(flagWhitespace|letter|flagNumber) == 0 && g != 0; g = w.fl(pos) {
					pos++
				}
				for c2 := w.cpt(pos); c2 == '\r' || c2 == '\n'; c2 = w.cpt(pos) {
					pos++
				}
				w.add(pos)
				continue
			}
			pos = w.whitespace(pos, true)
		}
		return w.out
	})
}

// classStep is the expression prefix?body+ (exact == 0), prefix?body or
// body{3} (exact == 1 or 3), found leftmost-first; the text between matches
// becomes words too.
type classStep struct {
	prefix func(rune, cptFlags) bool // optional single code point; nil for none
	body   func(rune, cptFlags) bool
	exact  int
}

func (st classStep) split(b *splitBuf, s, e int, out []int32) []int32 {
	gap := s
	for i := s; i < e; {
		start, end := st.match(b, i, e)
		if end < 0 {
			i++
			continue
		}
		if start > gap {
			out = append(out, int32(start))
		}
		out = append(out, int32(end))
		gap, i = end, end
	}
	if gap < e {
		out = append(out, int32(e))
	}
	return out
}

// match tries the expression at i and returns the match [i, end), or end -1.
func (st classStep) match(b *splitBuf, i, e int) (int, int) {
	body := func(p int) bool { return p < e && st.body(b.cpts[p], b.flags[p]) }
	run := func(p int) int {
		if st.exact == 0 {
			for body(p) {
				p++
			}
			return p
		}
		for k := 0; k < st.exact; k++ {
			if !body(p + k) {
				return -1
			}
		}
		return p + st.exact
	}
	if st.prefix != nil && st.prefix(b.cpts[i], b.flags[i]) && body(i+1) {
		if end := run(i + 1); end > 0 {
			return i, end
		}
	}
	if body(i) {
		if end := run(i); end > 0 {
			return i, end
		}
	}
	return i, -1
}

// trailingSpaceStep is \s+$: the whitespace that ends a word.
type trailingSpaceStep struct{}

func (trailingSpaceStep) split(b *splitBuf, s, e int, out []int32) []int32 {
	i := e
	for i > s && b.flags[i-1]&flagWhitespace != 0 {
		i--
	}
	if i > s && i < e {
		out = append(out, int32(i))
	}
	return append(out, int32(e))
}

// Character classes. In llama.cpp's collapsed text, \s is the White_Space
// list and \p{X} the category flag, for ASCII and beyond alike.
func isSpace(_ rune, f cptFlags) bool      { return f&flagWhitespace != 0 }
func isBlank(c rune, _ cptFlags) bool      { return c == ' ' }
func isLetter(_ rune, f cptFlags) bool     { return f&flagLetter != 0 }
func isNumber(_ rune, f cptFlags) bool     { return f&flagNumber != 0 }
func isPunct(_ rune, f cptFlags) bool      { return f&flagPunctuation != 0 }
func isASCIIDigit(c rune, _ cptFlags) bool { return c >= '0' && c <= '9' }
func isCRLF(c rune, _ cptFlags) bool       { return c == '\r' || c == '\n' }

func isDefaultPunct(c rune, f cptFlags) bool {
	return f&flagPunctuation != 0 || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~' || c == '|'
}

func isFalconPunct(c rune, f cptFlags) bool { return isDefaultPunct(c, f) || c == '`' }

func notPoroPunct(c rune, f cptFlags) bool {
	switch c {
	case '(', '|', '.', ',', '!', '?', '…', '。', '，', '、', '।', '۔', '،', ')':
		return false
	}
	return f&flagWhitespace == 0
}

// deepseek-llm's explicit classes, from its tokenizer.json.
var (
	deepseekLetter = bracketClass("A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃")
	deepseekPunct  = bracketClass("!-/:-~！-／：-～‘-‟　-。")
)

// bracketClass returns the class of a regex bracket expression's contents
// made only of literal code points and first-last ranges. Expressions with
// such classes have no \p{...}, so llama.cpp runs them with std::wregex
// over the code points after replacing every non-ASCII White_Space code
// point by U+000B (for \s): no bracket class ever matches one, even where
// a range spans it (ࠀ-一 holds U+2000-U+200A and U+3000).
func bracketClass(expr string) func(rune, cptFlags) bool {
	rs := []rune(expr)
	var pairs []rune
	for i := 0; i < len(rs); i++ {
		if i+2 < len(rs) && rs[i+1] == '-' {
			pairs = append(pairs, rs[i], rs[i+2])
			i += 2
			continue
		}
		pairs = append(pairs, rs[i], rs[i])
	}
	return func(c rune, f cptFlags) bool {
		if c > 0x7f && f&flagWhitespace != 0 {
			return false
		}
		for i := 0; i < len(pairs); i += 2 {
			if pairs[i] <= c && c <= pairs[i+1] {
				return true
			}
		}
		return false
	}
}
