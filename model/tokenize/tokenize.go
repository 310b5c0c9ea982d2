// Package tokenize turns text into token ids exactly as llama.cpp does for a
// model's vocabulary, in the module process, with byte spans for every token.
//
// The vocabulary is a plain Vocab value; VocabFromGGUF fills it from a GGUF
// file's tokenizer.ggml.* metadata. Other sources (a Hugging Face
// tokenizer.json) can fill the same struct.
package tokenize

// TokenAttr is a token's type as GGUF stores it (tokenizer.ggml.token_type).
type TokenAttr int32

// Token types, numbered as llama.cpp's llama_token_type.
const (
	TokenUndefined   TokenAttr = 0
	TokenNormal      TokenAttr = 1
	TokenUnknown     TokenAttr = 2
	TokenControl     TokenAttr = 3
	TokenUserDefined TokenAttr = 4
	TokenUnused      TokenAttr = 5
	TokenByte        TokenAttr = 6
)

// Kind is the tokenizer algorithm.
type Kind string

// Tokenizer algorithms, named as llama.cpp names its vocabulary types.
const (
	KindWPM Kind = "wpm" // BERT WordPiece (GGUF model "bert")
	KindBPE Kind = "bpe" // byte-level BPE (GGUF model "gpt2")
	KindSPM Kind = "spm" // SentencePiece BPE (GGUF model "llama")
	KindUGM Kind = "ugm" // SentencePiece Unigram (GGUF model "t5")
)

// NoToken marks an absent special token id.
const NoToken int32 = -1

// Vocab is everything a tokenizer needs, independent of where it came from.
type Vocab struct {
	Kind   Kind
	Model  string // tokenizer.ggml.model as written in the file ("bert", "gpt2", "llama", "t5")
	Pre    string // tokenizer.ggml.pre, the BPE pre-tokenizer name ("" = default)
	Tokens []string
	Scores []float32   // nil when absent
	Attrs  []TokenAttr // nil when absent
	Merges []string    // BPE merges, "left right"

	// Special token ids, NoToken when the model has none.
	BOS, EOS, EOT, UNK, SEP, PAD, CLS, MASK int32

	AddBOS, AddEOS, AddSEP  bool // add the special tokens when asked (Options.AddSpecial)
	AddSpacePrefix          bool // SPM/UGM: prepend a space (llama.cpp's add_space_prefix)
	RemoveExtraWhitespaces  bool // UGM normalizer flags
	EscapeWhitespaces       bool
	TreatWhitespaceAsSuffix bool
	PrecompiledCharsmap     []byte // UGM normalizer (tokenizer.ggml.precompiled_charsmap)

	// WPM normalizer (llama.cpp's BertNormalizer options). WPM lowercases and
	// strips accents unless these are set.
	KeepCase    bool // tokenizer.ggml.normalizer.lowercase = false
	KeepAccents bool // tokenizer.ggml.normalizer.strip_accents = false (defaults to KeepCase)

	// Special tokens that swallow the ASCII whitespace before (LStrip) or
	// after (RStrip) them where they are matched in the text (llama.cpp's
	// LSTRIP/RSTRIP token attributes, which it sets from the model's name).
	LStrip, RStrip []int32

	// ForcedControl lists tokens that llama.cpp treats as control tokens on
	// top of their type: end-of-generation and FIM texts it recognises when
	// loading. Like control tokens they are matched in the text only with
	// Options.ParseSpecial.
	ForcedControl []int32
}

// Options control one tokenization.
type Options struct {
	// AddSpecial adds the model's BOS/CLS and EOS/SEP tokens as its GGUF flags say.
	AddSpecial bool
	// ParseSpecial treats control-token text in the input ("[CLS]", "<s>") as
	// those tokens; otherwise it is tokenized as ordinary text.
	ParseSpecial bool
}

// Token is one token id and the byte span [Start, End) of Result.Text it came
// from. Tokens added by AddSpecial have Start == End.
type Token struct {
	ID         int32
	Start, End int32 // byte offsets in Result.Text (documents are below 2 GiB)
}

// Result is the outcome of one tokenization.
type Result struct {
	Tokens []Token
	// Text is the text the spans index: the input itself, or the input with
	// each invalid UTF-8 byte replaced by U+FFFD when Replaced > 0.
	Text string
	// Replaced counts the invalid UTF-8 bytes that were replaced.
	Replaced int
}

// IDs returns the token ids of r.
func (r Result) IDs() []int32 {
	ids := make([]int32, len(r.Tokens))
	for i, t := range r.Tokens {
		ids[i] = t.ID
	}
	return ids
}

// Tokenizer tokenizes text for one vocabulary. Implementations are safe for
// concurrent use.
type Tokenizer interface {
	Tokenize(text string, opt Options) Result
	Vocab() *Vocab
	// Affixes are the special tokens AddSpecial puts before and after the
	// text (CLS/SEP, BOS/EOS); callers that cut text into windows wrap
	// each window in them.
	Affixes() (prefix, suffix []int32)
}

// fragmenter tokenizes one run of raw text lying between special tokens; the
// shared driver (New) handles UTF-8 repair, special-token partitioning and
// the added BOS/EOS/CLS/SEP, and calls one fragmenter per vocabulary kind.
type fragmenter interface {
	// appendTokens appends the tokens of frag, which starts at byte offset off
	// of the whole text, to out. Spans are offsets into the whole text.
	// first is true for the fragment that starts the input or directly follows
	// a special token (llama.cpp's is_prev_special, which gates SPM/UGM's space prefix).
	appendTokens(out []Token, frag string, off int, first bool) []Token
}
