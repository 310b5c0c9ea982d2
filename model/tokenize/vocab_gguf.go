package tokenize

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/synapse-embed/synapse/model/gguf"
)

// ErrUnsupported marks a vocabulary this package cannot tokenize exactly as
// llama.cpp does: an unknown tokenizer model or BPE pre-tokenizer.
var ErrUnsupported = errors.New("unsupported")

// Load reads the vocabulary of the GGUF file at path (metadata only, no
// tensor data) and returns its tokenizer.
func Load(path string) (Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	v, err := VocabFromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %s: %w", path, err)
	}
	return New(v)
}

// modelKinds maps tokenizer.ggml.model to the algorithm.
var modelKinds = map[string]Kind{
	"bert":  KindWPM,
	"gpt2":  KindBPE,
	"llama": KindSPM,
	"t5":    KindUGM,
}

// VocabFromGGUF fills a Vocab from a GGUF file's tokenizer.ggml.* metadata
// the way llama.cpp's llama_vocab::impl::load does: the same per-model
// defaults for special tokens and flags, the same keys overriding them, and
// the same load-time fixes of token types (end-of-generation and FIM tokens
// forced to control, the gpt-oss and gemma4 exceptions) and LSTRIP/RSTRIP
// attributes. An unknown model or BPE pre-tokenizer is an ErrUnsupported
// error naming it.
func VocabFromGGUF(f *gguf.File) (*Vocab, error) {
	model, ok := f.String("tokenizer.ggml.model")
	if !ok {
		return nil, errors.New("vocab: tokenizer.ggml.model missing")
	}
	kind, ok := modelKinds[model]
	if !ok {
		return nil, fmt.Errorf("vocab: tokenizer model %q: %w", model, ErrUnsupported)
	}
	v := &Vocab{Kind: kind, Model: model}
	v.Pre, _ = f.String("tokenizer.ggml.pre")
	if err := readTokens(f, v); err != nil {
		return nil, err
	}
	if err := setModelDefaults(f, v); err != nil {
		return nil, err
	}
	if err := readSpecialIDs(f, v); err != nil {
		return nil, err
	}
	if err := readFlags(f, v); err != nil {
		return nil, err
	}
	fixTokenAttrs(f, v)
	setStripAttrs(f, v)
	return v, nil
}

func readTokens(f *gguf.File, v *Vocab) error {
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok {
		return errors.New("vocab: tokenizer.ggml.tokens missing or not a string array")
	}
	v.Tokens = make([]string, len(tokens))
	seen := make(map[string]int, len(tokens))
	for i, t := range tokens {
		if t == "" {
			t = "[EMPTY_" + strconv.Itoa(i) + "]" // as llama.cpp renames empty tokens
		}
		if j, dup := seen[t]; dup {
			return fmt.Errorf("vocab: duplicate token %q has ids %d and %d", t, j, i)
		}
		seen[t] = i
		v.Tokens[i] = t
	}
	if kv, ok := f.Get("tokenizer.ggml.scores"); ok {
		switch s := kv.Value.(type) {
		case []float32:
			v.Scores = s
		case []int32:
			v.Scores = make([]float32, len(s))
			for i, x := range s {
				v.Scores[i] = float32(x)
			}
		default:
			return fmt.Errorf("vocab: tokenizer.ggml.scores has type %v", kv.Type)
		}
		if len(v.Scores) < len(tokens) {
			return fmt.Errorf("vocab: %d scores for %d tokens", len(v.Scores), len(tokens))
		}
		v.Scores = v.Scores[:len(tokens)]
	}
	v.Attrs = make([]TokenAttr, len(tokens))
	for i := range v.Attrs {
		v.Attrs[i] = TokenNormal
	}
	if _, present := f.Get("tokenizer.ggml.token_type"); present {
		types, ok := f.Int32s("tokenizer.ggml.token_type")
		if !ok || len(types) < len(tokens) {
			return fmt.Errorf("vocab: tokenizer.ggml.token_type: need %d int32 values", len(tokens))
		}
		for i := range v.Attrs {
			v.Attrs[i] = TokenAttr(types[i])
			if types[i] < 0 || types[i] > int32(TokenByte) {
				v.Attrs[i] = TokenUndefined
			}
		}
	}
	if v.Kind == KindBPE {
		merges, ok := f.Strings("tokenizer.ggml.merges")
		if !ok {
			return errors.New("vocab: tokenizer.ggml.merges missing or not a string array")
		}
		v.Merges = merges
	}
	if b, ok := f.Bytes("tokenizer.ggml.precompiled_charsmap"); ok && v.Kind == KindUGM {
		v.PrecompiledCharsmap = b
	}
	return nil
}

// setModelDefaults sets the special tokens and flags llama.cpp assumes for
// each model before reading the keys.
func setModelDefaults(f *gguf.File, v *Vocab) error {
	v.BOS, v.EOS, v.EOT, v.UNK, v.SEP, v.PAD, v.CLS, v.MASK = NoToken, NoToken, NoToken, NoToken, NoToken, NoToken, NoToken, NoToken
	v.EscapeWhitespaces = true
	switch v.Kind {
	case KindSPM:
		v.BOS, v.EOS, v.UNK = 1, 2, 0
		v.AddSpacePrefix, v.AddBOS = true, true
	case KindWPM:
		v.BOS, v.UNK, v.SEP, v.PAD, v.MASK = 101, 100, 102, 0, 103
		v.AddBOS, v.AddSEP = true, true
	case KindUGM:
		v.EOS, v.UNK, v.PAD = 1, 2, 0
		v.AddEOS = true
	case KindBPE:
		v.BOS, v.EOS = 11, 11
		v.EscapeWhitespaces = false
		pre, ok := bpePres[v.Pre]
		if !ok {
			return fmt.Errorf("vocab: BPE pre-tokenizer %q: %w", v.Pre, ErrUnsupported)
		}
		v.AddBOS = pre.addBOS
		v.AddSEP = pre.addSEP
		if pre.noBOS {
			v.BOS = NoToken
		}
	}
	// A default id outside the vocabulary is disabled, as in llama.cpp.
	for _, id := range []*int32{&v.BOS, &v.EOS, &v.UNK, &v.SEP, &v.PAD, &v.MASK} {
		if *id >= int32(len(v.Tokens)) {
			*id = NoToken
		}
	}
	return nil
}

// readSpecialIDs applies the tokenizer.ggml.*_token_id keys. As in llama.cpp,
// an id outside the vocabulary keeps the default. The CLS key is recorded but
// llama.cpp's WPM uses the BOS id as CLS.
func readSpecialIDs(f *gguf.File, v *Vocab) error {
	keys := []struct {
		key string
		id  *int32
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS},
		{"tokenizer.ggml.eos_token_id", &v.EOS},
		{"tokenizer.ggml.eot_token_id", &v.EOT},
		{"tokenizer.ggml.unknown_token_id", &v.UNK},
		{"tokenizer.ggml.seperator_token_id", &v.SEP}, // sic: llama.cpp's spelling
		{"tokenizer.ggml.padding_token_id", &v.PAD},
		{"tokenizer.ggml.cls_token_id", &v.CLS},
		{"tokenizer.ggml.mask_token_id", &v.MASK},
	}
	for _, k := range keys {
		if _, present := f.Get(k.key); !present {
			continue
		}
		id, ok := f.Int(k.key)
		if !ok {
			return fmt.Errorf("vocab: %s is not an integer", k.key)
		}
		if id >= 0 && id < int64(len(v.Tokens)) {
			*k.id = int32(id)
		}
	}
	return nil
}

func readFlags(f *gguf.File, v *Vocab) error {
	flags := []struct {
		key string
		val *bool
	}{
		{"tokenizer.ggml.add_space_prefix", &v.AddSpacePrefix},
		{"tokenizer.ggml.remove_extra_whitespaces", &v.RemoveExtraWhitespaces},
		{"tokenizer.ggml.add_bos_token", &v.AddBOS},
		{"tokenizer.ggml.add_eos_token", &v.AddEOS},
		{"tokenizer.ggml.add_sep_token", &v.AddSEP},
	}
	for _, fl := range flags {
		if err := readBool(f, fl.key, fl.val); err != nil {
			return err
		}
	}
	lower := true
	if err := readBool(f, "tokenizer.ggml.normalizer.lowercase", &lower); err != nil {
		return err
	}
	strip := lower
	if err := readBool(f, "tokenizer.ggml.normalizer.strip_accents", &strip); err != nil {
		return err
	}
	v.KeepCase, v.KeepAccents = !lower, !strip
	for _, c := range []struct {
		add  bool
		id   int32
		what string
	}{{v.AddBOS, v.BOS, "add_bos_token is set but there is no BOS token"},
		{v.AddEOS, v.EOS, "add_eos_token is set but there is no EOS token"},
		{v.AddSEP, v.SEP, "add_sep_token is set but there is no SEP token"}} {
		if c.add && c.id == NoToken {
			return errors.New("vocab: " + c.what)
		}
	}
	return nil
}

func readBool(f *gguf.File, key string, dst *bool) error {
	if _, present := f.Get(key); !present {
		return nil
	}
	b, ok := f.Bool(key)
	if !ok {
		return fmt.Errorf("vocab: %s is not a bool", key)
	}
	*dst = b
	return nil
}

// Token texts llama.cpp recognises at load time.
var (
	eotTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	eogTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
		"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
		"[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~["}
	fimTexts = []struct {
		key   string
		texts []string
	}{
		{"tokenizer.ggml.fim_pre_token_id", []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}},
		{"tokenizer.ggml.fim_suf_token_id", []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}},
		{"tokenizer.ggml.fim_mid_token_id", []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}},
		{"tokenizer.ggml.fim_pad_token_id", []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
		{"tokenizer.ggml.fim_rep_token_id", []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
		{"tokenizer.ggml.fim_sep_token_id", []string{"<|file_sep|>"}},
	}
	alwaysUserDefined = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}
)

// fixTokenAttrs applies llama.cpp's load-time token type fixes, which decide
// which tokens the special-token partition matches: end-of-generation texts
// (and FIM texts without an id key) become control tokens in addition to
// their type (recorded in ForcedControl, since a TokenAttr holds one type),
// and a few texts get a new type outright.
func fixTokenAttrs(f *gguf.File, v *Vocab) {
	want := map[string]bool{}
	for _, t := range append(append(append([]string{}, eotTexts...), eogTexts...), alwaysUserDefined...) {
		want[t] = true
	}
	for _, fim := range fimTexts {
		for _, t := range fim.texts {
			want[t] = true
		}
	}
	ids := make(map[string]int32, 16)
	for i, t := range v.Tokens {
		if want[t] {
			ids[t] = int32(i)
		}
	}
	forced := map[int32]bool{}
	control := func(t string) {
		if id, ok := ids[t]; ok && v.Attrs[id] != TokenControl {
			forced[id] = true
		}
	}
	if v.EOT == NoToken {
		for _, t := range eotTexts { // llama.cpp takes the first it meets; take the lowest id
			if id, ok := ids[t]; ok && (v.EOT == NoToken || id < v.EOT) {
				v.EOT = id
			}
		}
	}
	for _, fim := range fimTexts {
		if _, set := f.Get(fim.key); !set {
			for _, t := range fim.texts {
				control(t)
			}
		}
	}
	for _, t := range eogTexts {
		control(t)
	}
	setType := func(id int32, a TokenAttr) {
		v.Attrs[id] = a
		delete(forced, id)
	}
	for _, t := range alwaysUserDefined {
		if id, ok := ids[t]; ok {
			setType(id, TokenUserDefined)
		}
	}
	_, hasReturn := ids["<|return|>"]
	_, hasCall := ids["<|call|>"]
	_, hasCalls := ids["<|calls|>"]
	_, hasFlush := ids["<|flush|>"]
	if end, hasEnd := ids["<|end|>"]; hasEnd && (hasReturn && (hasCall || hasCalls) || (hasCall || hasCalls) && hasFlush) {
		setType(end, TokenUserDefined)
	}
	if s, hasS := ids["</s>"]; hasS {
		if _, ok := ids["<|tool_response>"]; ok {
			setType(s, TokenNormal)
		}
	}
	for id := range forced {
		v.ForcedControl = append(v.ForcedControl, id)
	}
	sort.Slice(v.ForcedControl, func(i, j int) bool { return v.ForcedControl[i] < v.ForcedControl[j] })
}

// isSpecialAttr reports whether llama.cpp's special-token cache holds tokens
// of this type (control, user-defined or unknown).
func isSpecialAttr(a TokenAttr) bool {
	return a == TokenControl || a == TokenUserDefined || a == TokenUnknown
}

// setStripAttrs sets LSTRIP/RSTRIP as llama.cpp does from the pre-tokenizer,
// architecture and model names.
func setStripAttrs(f *gguf.File, v *Vocab) {
	name, _ := f.String("general.name")
	name = strings.ToLower(name)
	arch, _ := f.String("general.architecture")
	id := func(text string) (int32, bool) {
		for i, t := range v.Tokens {
			if t == text {
				return int32(i), true
			}
		}
		return 0, false
	}
	containsAny := func(s string, subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case containsAny(v.Pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") || containsAny(arch, "nomic-bert-moe", "jina-bert-v3"):
		if m, ok := id("<mask>"); ok {
			v.LStrip = append(v.LStrip, m)
		}
	case containsAny(name, "phi-3", "phi3"):
		keep := map[string]bool{"<unk>": true, "<s>": true, "<|endoftext|>": true}
		forced := map[int32]bool{}
		for _, id := range v.ForcedControl {
			forced[id] = true
		}
		for i, a := range v.Attrs {
			if (isSpecialAttr(a) || forced[int32(i)] || v.Tokens[i] == "</s>") && !keep[v.Tokens[i]] {
				v.RStrip = append(v.RStrip, int32(i))
			}
		}
	case containsAny(name, "modern-bert"):
		if m, ok := id("[MASK]"); ok {
			v.LStrip = append(v.LStrip, m)
		}
	}
	sort.Slice(v.RStrip, func(i, j int) bool { return v.RStrip[i] < v.RStrip[j] })
}
