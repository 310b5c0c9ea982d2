package convert

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
)

// qwen2Split is the pre-tokenizer regex of Qwen2 and Qwen3's tokenizer.json
// (a Split before ByteLevel), which llama.cpp's pre-tokenizer "qwen2"
// implements.
const qwen2Split = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// byteTokenizer is what byteLevelVocab reads of a tokenizer.json.
type byteTokenizer struct {
	Model struct {
		Type   string            `json:"type"`
		Vocab  map[string]int    `json:"vocab"`
		Merges []json.RawMessage `json:"merges"` // "a b", or ["a", "b"] (tokenizers ≥ 0.20)
	} `json:"model"`
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	PreTokenizer struct {
		Type          string `json:"type"`
		PreTokenizers []struct {
			Type    string `json:"type"`
			Pattern struct {
				Regex string `json:"Regex"`
			} `json:"pattern"`
			UseRegex *bool `json:"use_regex"`
		} `json:"pretokenizers"`
	} `json:"pre_tokenizer"`
	PostProcessor *struct {
		Type   string `json:"type"`
		Single []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
		} `json:"single"`
	} `json:"post_processor"`
}

// readTokenizerJSON reads the tokenizer.json at path (size-limited) into
// each of dst; JSON that does not decode is refused.
func readTokenizerJSON(path string, dst ...any) error {
	b, err := readlimit.ReadFile(path, readlimit.Tokenizer)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	for _, d := range dst {
		if err := json.Unmarshal(b, d); err != nil {
			return fmt.Errorf("convert: %s: %w: %v", path, ErrRefused, err)
		}
	}
	return nil
}

// vocabRefusal is a vocabulary conversion's refusal of the tokenizer.json
// at path, saying why.
func vocabRefusal(path string) func(format string, args ...any) (modelgen.Vocab, error) {
	return func(format string, args ...any) (modelgen.Vocab, error) {
		return modelgen.Vocab{}, fmt.Errorf("convert: %s: %w: %s", path, ErrRefused, fmt.Sprintf(format, args...))
	}
}

// byteLevelVocab converts a Qwen2/Qwen3 byte-level BPE tokenizer.json to
// llama.cpp's "gpt2" vocabulary with the "qwen2" pre-tokenizer: the tokens
// by id (padded with [PADn] to rows, the embedding's rows, as llama.cpp's
// converter pads), their types (a special added token is control, another
// added token user-defined), the merges, and the special tokens the
// post-processor adds (Qwen3-Embedding appends <|endoftext|>: an EOS added
// to every text). Another pre-tokenizer is refused: llama.cpp would split
// the text otherwise.
func byteLevelVocab(path string, rows int) (modelgen.Vocab, error) {
	var tj byteTokenizer
	if err := readTokenizerJSON(path, &tj); err != nil {
		return modelgen.Vocab{}, err
	}
	refuse := vocabRefusal(path)
	if tj.Model.Type != "BPE" || !isQwen2PreTokenizer(tj) {
		return refuse("a Qwen3 decoder needs Qwen2's byte-level BPE tokenizer (model BPE, a Split by Qwen2's regex, then ByteLevel); this one is model %q, pre-tokenizer %q", tj.Model.Type, tj.PreTokenizer.Type)
	}
	n := len(tj.Model.Vocab)
	for _, a := range tj.AddedTokens {
		n = max(n, a.ID+1)
	}
	if rows < n {
		rows = n
	}
	toks, types := make([]string, rows), make([]int32, rows)
	for t, id := range tj.Model.Vocab {
		if id < 0 || id >= rows || toks[id] != "" {
			return refuse("vocabulary ids are not distinct and below %d (%q is %d)", rows, t, id)
		}
		toks[id], types[id] = t, 1 // normal
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 || toks[a.ID] != "" && toks[a.ID] != a.Content {
			return refuse("added token %q has id %d, which is %q", a.Content, a.ID, toks[a.ID])
		}
		toks[a.ID], types[a.ID] = a.Content, 4 // user-defined
		if a.Special {
			types[a.ID] = 3 // control
		}
	}
	for id := range toks {
		if toks[id] == "" {
			toks[id], types[id] = fmt.Sprintf("[PAD%d]", id), 5 // unused
		}
	}
	merges, err := mergeList(tj)
	if err != nil {
		return refuse("%v", err)
	}
	kv := []gguf.KV{
		{Key: modelgen.TokenizerPrefix + "model", Type: gguf.TypeString, Value: "gpt2"},
		{Key: modelgen.TokenizerPrefix + "pre", Type: gguf.TypeString, Value: "qwen2"},
		{Key: modelgen.TokenizerPrefix + "tokens", Type: gguf.TypeArray, Elem: gguf.TypeString, Value: toks},
		{Key: modelgen.TokenizerPrefix + "token_type", Type: gguf.TypeArray, Elem: gguf.TypeInt32, Value: types},
		{Key: modelgen.TokenizerPrefix + "merges", Type: gguf.TypeArray, Elem: gguf.TypeString, Value: merges},
	}
	special, err := appended(tj, toks)
	if err != nil {
		return refuse("%v", err)
	}
	return modelgen.Vocab{KV: append(kv, special...)}, nil
}

// isQwen2PreTokenizer reports whether the pre-tokenizer is Qwen2's: a
// Sequence of a Split by qwen2Split and a ByteLevel without its own regex.
func isQwen2PreTokenizer(tj byteTokenizer) bool {
	p := tj.PreTokenizer
	return p.Type == "Sequence" && len(p.PreTokenizers) == 2 &&
		p.PreTokenizers[0].Type == "Split" && p.PreTokenizers[0].Pattern.Regex == qwen2Split &&
		p.PreTokenizers[1].Type == "ByteLevel" && p.PreTokenizers[1].UseRegex != nil && !*p.PreTokenizers[1].UseRegex
}

// mergeList spells the merges as llama.cpp stores them: "a b".
func mergeList(tj byteTokenizer) ([]string, error) {
	out := make([]string, len(tj.Model.Merges))
	for i, m := range tj.Model.Merges {
		var s string
		if json.Unmarshal(m, &s) == nil {
			out[i] = s
			continue
		}
		var pair []string
		if json.Unmarshal(m, &pair) != nil || len(pair) != 2 || strings.Contains(pair[0], " ") || strings.Contains(pair[1], " ") {
			return nil, fmt.Errorf("merge %d (%s) is neither \"a b\" nor a pair of tokens without spaces", i, m)
		}
		out[i] = pair[0] + " " + pair[1]
	}
	return out, nil
}

// appended are the GGUF keys for the special tokens the post-processor
// puts around a text: a TemplateProcessing whose single template starts or
// ends with a special token (add_bos_token, add_eos_token), or nothing
// added (ByteLevel, none). Any other post-processor is refused.
func appended(tj byteTokenizer, toks []string) ([]gguf.KV, error) {
	id := map[string]uint32{}
	for i, t := range toks {
		id[t] = uint32(i)
	}
	flag := func(k string, v bool) gguf.KV {
		return gguf.KV{Key: modelgen.TokenizerPrefix + k, Type: gguf.TypeBool, Value: v}
	}
	tok := func(k string, v uint32) gguf.KV {
		return gguf.KV{Key: modelgen.TokenizerPrefix + k, Type: gguf.TypeUint32, Value: v}
	}
	out := []gguf.KV{flag("add_bos_token", false), flag("add_eos_token", false)}
	pp := tj.PostProcessor
	if pp == nil || pp.Type == "ByteLevel" {
		return out, nil
	}
	if pp.Type != "TemplateProcessing" || len(pp.Single) == 0 {
		return nil, fmt.Errorf("post-processor %q: synapse converts a TemplateProcessing, ByteLevel or none", pp.Type)
	}
	if first := pp.Single[0].SpecialToken; first != nil {
		v, ok := id[first.ID]
		if !ok {
			return nil, fmt.Errorf("the post-processor adds %q, which is no token", first.ID)
		}
		out[0] = flag("add_bos_token", true)
		out = append(out, tok("bos_token_id", v))
	}
	if last := pp.Single[len(pp.Single)-1].SpecialToken; last != nil && len(pp.Single) > 1 {
		v, ok := id[last.ID]
		if !ok {
			return nil, fmt.Errorf("the post-processor adds %q, which is no token", last.ID)
		}
		out[1] = flag("add_eos_token", true)
		out = append(out, tok("eos_token_id", v), tok("padding_token_id", v))
	}
	return out, nil
}
