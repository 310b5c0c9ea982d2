package modelgen

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/synapse-embed/synapse/model/gguf"
)

// TokenizerPrefix starts every tokenizer metadata key.
const TokenizerPrefix = "tokenizer.ggml."

// Vocab is a model's tokenizer: its tokenizer.ggml.* metadata entries, in order.
type Vocab struct {
	KV []gguf.KV
}

// VocabFromGGUF copies the tokenizer metadata of the GGUF file at path (for
// example the shared fixture vocab/ggml-vocab-bert-bge.gguf).
func VocabFromGGUF(path string) (Vocab, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return Vocab{}, fmt.Errorf("modelgen: vocabulary: %w", err)
	}
	v := VocabOf(f)
	if v.Size() == 0 {
		return Vocab{}, fmt.Errorf("%w: %s has no tokenizer.ggml.tokens", ErrConfig, path)
	}
	return v, nil
}

// VocabOf returns the tokenizer.ggml.* entries of f.
func VocabOf(f *gguf.File) Vocab {
	var v Vocab
	for _, kv := range f.KV {
		if strings.HasPrefix(kv.Key, TokenizerPrefix) {
			v.KV = append(v.KV, kv)
		}
	}
	return v
}

func (v Vocab) get(key string) (gguf.KV, bool) {
	for _, kv := range v.KV {
		if kv.Key == TokenizerPrefix+key {
			return kv, true
		}
	}
	return gguf.KV{}, false
}

// Size is the number of tokens.
func (v Vocab) Size() int {
	kv, _ := v.get("tokens")
	toks, _ := kv.Value.([]string)
	return len(toks)
}

// Model is tokenizer.ggml.model: "bert" (WordPiece), "llama" (SentencePiece BPE), ….
func (v Vocab) Model() string {
	kv, _ := v.get("model")
	s, _ := kv.Value.(string)
	return s
}

// set writes the vocabulary's entries to w, except the keys in skip.
func (v Vocab) set(w *gguf.Writer, skip ...string) error {
next:
	for _, kv := range v.KV {
		for _, s := range skip {
			if kv.Key == TokenizerPrefix+s {
				continue next
			}
		}
		if err := w.SetKV(kv); err != nil {
			return fmt.Errorf("modelgen: vocabulary: %w", err)
		}
	}
	return nil
}

// BERT special token ids, as in bert-base-uncased and its descendants.
const (
	BertPAD  = 0
	BertUNK  = 100
	BertCLS  = 101
	BertSEP  = 102
	BertMASK = 103
)

// Token types as tokenizer.ggml.token_type stores them (llama_token_type).
const (
	tokNormal  int32 = 1
	tokUnknown int32 = 2
	tokControl int32 = 3
	tokByte    int32 = 6
)

// WordPieceVocab builds a self-contained BERT (WordPiece, model "bert")
// vocabulary: [PAD] at 0, [unused0…98] up to 99, [UNK] [CLS] [SEP] [MASK] at
// 100–103, then every printable ASCII character and every character of words,
// each as a word start and again as a continuation, then the words
// themselves, lower-cased, without duplicates, in order. Words holding white
// space are skipped. Any ASCII text tokenizes without [UNK].
//
// Pieces are spelled as llama.cpp's converter writes BERT vocabularies into
// GGUF: a word-initial piece carries the phantom space "▁" (U+2581) and a
// continuation piece ("##ing" in the Hugging Face vocabulary) is bare
// ("ing"); bracketed special tokens are unchanged.
func WordPieceVocab(words []string) Vocab {
	toks := []string{"[PAD]"}
	for i := 0; len(toks) < BertUNK; i++ {
		toks = append(toks, fmt.Sprintf("[unused%d]", i))
	}
	toks = append(toks, "[UNK]", "[CLS]", "[SEP]", "[MASK]")
	seen := map[string]bool{}
	for _, t := range toks {
		seen[t] = true
	}
	add := func(t string) {
		if !seen[t] {
			seen[t] = true
			toks = append(toks, t)
		}
	}
	var chars []string
	for c := rune('!'); c <= '~'; c++ {
		if !unicode.IsUpper(c) {
			chars = append(chars, string(c))
		}
	}
	words = normalizeWords(words)
	for _, w := range words {
		for _, c := range w {
			chars = append(chars, string(c))
		}
	}
	for _, c := range chars {
		add(spmSpace + c)
	}
	for _, c := range chars {
		add(c)
	}
	for _, w := range words {
		add(spmSpace + w)
	}
	types := make([]int32, len(toks))
	for i := range types {
		types[i] = tokNormal
	}
	for _, id := range []int{BertPAD, BertUNK, BertCLS, BertSEP, BertMASK} {
		types[id] = tokControl
	}
	return Vocab{KV: []gguf.KV{
		kvString("model", "bert"),
		kvString("pre", "default"),
		{Key: TokenizerPrefix + "tokens", Type: gguf.TypeArray, Elem: gguf.TypeString, Value: toks},
		{Key: TokenizerPrefix + "token_type", Type: gguf.TypeArray, Elem: gguf.TypeInt32, Value: types},
		kvUint("unknown_token_id", BertUNK),
		kvUint("seperator_token_id", BertSEP), // sic: llama.cpp's key
		kvUint("padding_token_id", BertPAD),
		kvUint("cls_token_id", BertCLS),
		kvUint("mask_token_id", BertMASK),
	}}
}

// normalizeWords lower-cases words and drops empty ones and those with spaces.
func normalizeWords(words []string) []string {
	out := make([]string, 0, len(words))
	for _, w := range words {
		w = strings.ToLower(strings.TrimSpace(w))
		if w == "" || !utf8.ValidString(w) || strings.IndexFunc(w, unicode.IsSpace) >= 0 {
			continue
		}
		out = append(out, w)
	}
	return out
}

// SPM special token ids of a generated SentencePiece vocabulary.
const (
	SPMUnk = 0
	SPMBOS = 1
	SPMEOS = 2
)

// spmSpace is SentencePiece's visible space, U+2581, which GGUF vocabularies
// also use for BERT's word-initial pieces.
const spmSpace = "\u2581"

// SPMVocab builds a small self-contained SentencePiece BPE (model "llama")
// vocabulary: <unk> <s> </s>, the 256 byte-fallback tokens <0x00>…<0xFF>,
// "▁" and every printable ASCII character, then for each word (lower-cased)
// "▁word" and each of its prefixes, so that llama.cpp's merges reach whole
// words. Later pieces score lower, as in SentencePiece.
func SPMVocab(words []string) Vocab {
	toks := []string{"<unk>", "<s>", "</s>"}
	types := []int32{tokUnknown, tokControl, tokControl}
	for b := 0; b < 256; b++ {
		toks = append(toks, fmt.Sprintf("<0x%02X>", b))
		types = append(types, tokByte)
	}
	seen := map[string]bool{}
	add := func(t string) {
		if !seen[t] {
			seen[t] = true
			toks = append(toks, t)
			types = append(types, tokNormal)
		}
	}
	add(spmSpace)
	for c := rune('!'); c <= '~'; c++ {
		add(string(c))
	}
	for _, w := range normalizeWords(words) {
		for _, c := range w {
			add(string(c))
		}
		piece := spmSpace + w
		for i := range piece {
			if i > len(spmSpace) {
				add(piece[:i])
			}
		}
		add(piece)
	}
	scores := make([]float32, len(toks))
	for i := range scores {
		if types[i] == tokNormal {
			scores[i] = -float32(i)
		}
	}
	return Vocab{KV: []gguf.KV{
		kvString("model", "llama"),
		kvString("pre", "default"),
		{Key: TokenizerPrefix + "tokens", Type: gguf.TypeArray, Elem: gguf.TypeString, Value: toks},
		{Key: TokenizerPrefix + "scores", Type: gguf.TypeArray, Elem: gguf.TypeFloat32, Value: scores},
		{Key: TokenizerPrefix + "token_type", Type: gguf.TypeArray, Elem: gguf.TypeInt32, Value: types},
		kvUint("bos_token_id", SPMBOS),
		kvUint("eos_token_id", SPMEOS),
		kvUint("unknown_token_id", SPMUnk),
		{Key: TokenizerPrefix + "add_bos_token", Type: gguf.TypeBool, Value: true},
		{Key: TokenizerPrefix + "add_eos_token", Type: gguf.TypeBool, Value: false},
	}}
}

func kvString(key, v string) gguf.KV {
	return gguf.KV{Key: TokenizerPrefix + key, Type: gguf.TypeString, Value: v}
}

func kvUint(key string, v uint32) gguf.KV {
	return gguf.KV{Key: TokenizerPrefix + key, Type: gguf.TypeUint32, Value: v}
}
