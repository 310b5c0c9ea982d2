package tokenize

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// Hugging Face tokenizers (tokenizer.json), as the Rust library `tokenizers`
// encodes: the model's added tokens are split out of the raw text (and, for
// those marked normalized, out of the normalized text), each remaining
// piece is normalized, pre-tokenized into words and each word is tokenized
// by the model; AddSpecial adds the post-processor's special tokens.
//
// Supported components (others are an ErrUnsupported error naming them):
//
//	normalizer     BertNormalizer, Lowercase, NFD, NFKD, NFC, NFKC, StripAccents, Strip,
//	               Replace (string patterns), Prepend, Nmt, Precompiled, Sequence
//	pre_tokenizer  BertPreTokenizer, Whitespace, WhitespaceSplit, Metaspace, ByteLevel,
//	               Punctuation, Digits, Sequence
//	model          WordPiece, Unigram, BPE
//	post_processor TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence
//
// Options.ParseSpecial maps to the library's default (special-token text in
// the input is those tokens); without it special tokens are not matched, as
// with its encode_special_tokens. Added tokens that are not special are
// always matched, as llama.cpp matches user-defined tokens. Truncation and
// padding are not applied: the module chunks documents itself.

// LoadHF reads a Hugging Face tokenizer.json and returns its tokenizer.
func LoadHF(path string) (Tokenizer, error) {
	b, err := readlimit.ReadFile(path, readlimit.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	t, err := NewHF(b)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %s: %w", path, err)
	}
	return t, nil
}

// hfJSON is the part of tokenizer.json the tokenizer reads.
type hfJSON struct {
	Version       string          `json:"version"`
	AddedTokens   []hfAddedJSON   `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	Model         json.RawMessage `json:"model"`
	PostProcessor json.RawMessage `json:"post_processor"`
}

type hfAddedJSON struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// hfTokenizer is a tokenizer.json pipeline. It is immutable after NewHF.
type hfTokenizer struct {
	vocab *Vocab
	added *addedVocab
	norm  hfNormalizer   // nil: none
	pre   hfPreTokenizer // nil: none
	model hfModel
	post  hfTemplate
}

// hfModel tokenizes one pre-tokenized word.
type hfModel interface {
	// tokenize appends the tokens of word to out.
	tokenize(out []Token, word []nchar) []Token
	// id returns the id of a vocabulary token.
	id(tok string) (int32, bool)
	// tokens returns the vocabulary, indexed by id.
	tokens() []string
	kind() Kind
	unk() int32
}

// NewHF parses the contents of a tokenizer.json.
func NewHF(data []byte) (Tokenizer, error) {
	var j hfJSON
	if err := readlimit.UnmarshalJSON(data, &j); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if j.Version != "" && j.Version != "1.0" {
		return nil, fmt.Errorf("tokenizer.json version %q: %w (want 1.0)", j.Version, ErrUnsupported)
	}
	model, err := parseHFModel(j.Model)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	t := &hfTokenizer{model: model}
	if t.norm, err = parseHFNormalizer(j.Normalizer); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	if t.pre, err = parseHFPreTokenizer(j.PreTokenizer); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	t.added = newAddedVocab(j.AddedTokens, model, t.norm)
	if t.post, err = parseHFPost(j.PostProcessor); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	t.vocab = t.buildVocab()
	return t, nil
}

// tokenID is the library's token_to_id: an added token, else the model's.
func (t *hfTokenizer) tokenID(s string) (int32, bool) {
	if id, ok := t.added.ids[s]; ok {
		return id, true
	}
	return t.model.id(s)
}

// typeOf reads the "type" of a component; "" when absent.
func typeOf(raw json.RawMessage) (string, error) {
	var tagged struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &tagged); err != nil {
		return "", err
	}
	return tagged.Type, nil
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

func unsupported(component, typ string) error {
	return fmt.Errorf("%s %q: %w", component, typ, ErrUnsupported)
}

// buildVocab describes the tokenizer as a Vocab: the model's tokens and the
// added ones, special tokens as control tokens, the others user-defined.
func (t *hfTokenizer) buildVocab() *Vocab {
	toks := append([]string(nil), t.model.tokens()...)
	for _, a := range t.added.tokens {
		for int(a.id) >= len(toks) {
			toks = append(toks, "")
		}
		toks[a.id] = a.content
	}
	v := &Vocab{Kind: t.model.kind(), Model: "huggingface", Tokens: toks, Attrs: make([]TokenAttr, len(toks)),
		BOS: NoToken, EOS: NoToken, EOT: NoToken, UNK: t.model.unk(), SEP: NoToken, PAD: NoToken, CLS: NoToken, MASK: NoToken}
	for i := range v.Attrs {
		v.Attrs[i] = TokenNormal
	}
	for _, a := range t.added.tokens {
		v.Attrs[a.id] = TokenUserDefined
		if a.special {
			v.Attrs[a.id] = TokenControl
		}
	}
	pre, suf := t.post.single.prefix, t.post.single.suffix
	if len(pre) > 0 {
		v.BOS, v.CLS, v.AddBOS = pre[0], pre[0], true
	}
	if len(suf) > 0 {
		v.EOS, v.SEP, v.AddEOS = suf[len(suf)-1], suf[len(suf)-1], true
	}
	for _, name := range []string{"[PAD]", "<pad>"} {
		if id, ok := t.tokenID(name); ok {
			v.PAD = id
		}
	}
	for _, name := range []string{"[MASK]", "<mask>"} {
		if id, ok := t.tokenID(name); ok {
			v.MASK = id
		}
	}
	return v
}

func (t *hfTokenizer) Vocab() *Vocab { return t.vocab }

// Affixes are the special tokens the post-processor puts around a single sequence.
func (t *hfTokenizer) Affixes() (prefix, suffix []int32) {
	return t.post.single.prefix, t.post.single.suffix
}

// Pair returns the post-processor's pair encoding of two token sequences:
// the ids and each id's type (token_type_ids), e.g. [CLS] a [SEP] b [SEP]
// with types 0…0 1…1.
func (t *hfTokenizer) Pair(a, b []int32) (ids, types []int32) {
	return t.post.pair.apply(a, b)
}

// Tokenize implements Tokenizer.
func (t *hfTokenizer) Tokenize(text string, opt Options) Result {
	text, replaced := repairUTF8(text)
	res := Result{Text: text, Replaced: replaced}
	out := make([]Token, 0, len(text)/4+4)
	if opt.AddSpecial {
		for _, id := range t.post.single.prefix {
			out = append(out, Token{ID: id})
		}
	}
	for _, p := range t.added.split(text, t.added.raw, opt.ParseSpecial) {
		if p.id >= 0 {
			out = append(out, Token{ID: p.id, Start: int32(p.start), End: int32(p.end)})
			continue
		}
		out = t.tokenizePiece(out, charsOf(text, p.start, p.end), opt.ParseSpecial)
	}
	if opt.AddSpecial {
		for _, id := range t.post.single.suffix {
			out = append(out, Token{ID: id, Start: int32(len(text)), End: int32(len(text))})
		}
	}
	res.Tokens = monotone(out)
	return res
}

// monotone makes the spans ordered and disjoint: a normalizer can turn one
// character into several that end up in different tokens (NFD, Hangul);
// the later tokens get an empty span at the end of the earlier one.
func monotone(toks []Token) []Token {
	prev := int32(0)
	for i := range toks {
		t := &toks[i]
		if t.Start < prev {
			t.Start = prev
		}
		if t.End < t.Start {
			t.End = t.Start
		}
		prev = t.End
	}
	return toks
}

// tokenizePiece normalizes a piece of raw text, splits out the normalized
// added tokens, pre-tokenizes and runs the model.
func (t *hfTokenizer) tokenizePiece(out []Token, s []nchar, parseSpecial bool) []Token {
	if t.norm != nil {
		s = t.norm.normalize(s)
	}
	for _, p := range t.added.splitChars(s, parseSpecial) {
		if p.id >= 0 {
			out = append(out, Token{ID: p.id, Start: s[p.start].start, End: s[p.end-1].end})
			continue
		}
		words := [][]nchar{s[p.start:p.end]}
		if t.pre != nil {
			words = t.pre.split(words)
		}
		for _, w := range words {
			if len(w) > 0 {
				out = t.model.tokenize(out, w)
			}
		}
	}
	return out
}

// nchar is one character of a normalized string and the byte span of the
// original text it came from (characters a normalizer inserts share the
// span of the character they came with).
type nchar struct {
	r          rune
	start, end int32
}

// charsOf decodes text[start:end] (valid UTF-8) into characters.
func charsOf(text string, start, end int) []nchar {
	out := make([]nchar, 0, end-start)
	for i := start; i < end; {
		r, n := decodeRune(text, i)
		out = append(out, nchar{r: r, start: int32(i), end: int32(i + n)})
		i += n
	}
	return out
}

// nstring returns the text of s.
func nstring(s []nchar) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, c := range s {
		b.WriteRune(c.r)
	}
	return b.String()
}

var errNoModel = errors.New("no model")
