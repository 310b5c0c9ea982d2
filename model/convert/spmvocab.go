package convert

import (
	"fmt"
	"strings"

	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
)

// spmSpace is SentencePiece's visible space, U+2581.
const spmSpace = "\u2581"

// spmTokenizer is what spmVocab reads of a tokenizer.json beyond
// byteTokenizer's fields.
type spmTokenizer struct {
	Model struct {
		ByteFallback bool   `json:"byte_fallback"`
		UnkToken     string `json:"unk_token"`
	} `json:"model"`
	Normalizer *struct {
		Type    string `json:"type"`
		Pattern struct {
			String string `json:"String"`
		} `json:"pattern"`
		Content string `json:"content"`
	} `json:"normalizer"`
	PreTokenizer *struct {
		Type    string `json:"type"`
		Pattern struct {
			String string `json:"String"`
		} `json:"pattern"`
		Behavior string `json:"behavior"`
	} `json:"pre_tokenizer"`
}

// spmVocab converts Gemma's tokenizer.json (a BPE over the text with
// spaces replaced by U+2581, byte fallback, no prefix space) to llama.cpp's
// SentencePiece vocabulary (model "llama"): the tokens by id (padded with
// [PADn] to rows), their types (<0xXX> byte, the unknown token, a special
// added token control, another added token user-defined), scores that rank
// a token by the first merge that makes it (llama.cpp merges the pair whose
// join scores highest, transformers the pair merged first), and the special
// tokens the post-processor adds (EmbeddingGemma: <bos> … <eos>).
// llama.cpp merges any two pieces whose join is a token; a merge list that
// lacks such a pair would tokenize otherwise, and is refused, as is any
// other normalizer or pre-tokenizer.
func spmVocab(path string, rows int) (modelgen.Vocab, error) {
	var tj byteTokenizer
	var st spmTokenizer
	if err := readTokenizerJSON(path, &tj, &st); err != nil {
		return modelgen.Vocab{}, err
	}
	refuse := vocabRefusal(path)
	if msg := spmShape(tj, st); msg != "" {
		return refuse("%s", msg)
	}
	toks, types, err := spmTokens(tj, st, rows)
	if err != nil {
		return refuse("%v", err)
	}
	merges, err := mergeList(tj)
	if err != nil {
		return refuse("%v", err)
	}
	scores, err := spmScores(toks, types, merges)
	if err != nil {
		return refuse("%v", err)
	}
	kv := []gguf.KV{
		{Key: modelgen.TokenizerPrefix + "model", Type: gguf.TypeString, Value: "llama"},
		{Key: modelgen.TokenizerPrefix + "pre", Type: gguf.TypeString, Value: "default"},
		{Key: modelgen.TokenizerPrefix + "tokens", Type: gguf.TypeArray, Elem: gguf.TypeString, Value: toks},
		{Key: modelgen.TokenizerPrefix + "scores", Type: gguf.TypeArray, Elem: gguf.TypeFloat32, Value: scores},
		{Key: modelgen.TokenizerPrefix + "token_type", Type: gguf.TypeArray, Elem: gguf.TypeInt32, Value: types},
		{Key: modelgen.TokenizerPrefix + "add_space_prefix", Type: gguf.TypeBool, Value: false},
	}
	for id, t := range toks {
		if t == st.Model.UnkToken {
			kv = append(kv, gguf.KV{Key: modelgen.TokenizerPrefix + "unknown_token_id", Type: gguf.TypeUint32, Value: uint32(id)})
		}
	}
	special, err := appended(tj, toks)
	if err != nil {
		return refuse("%v", err)
	}
	return modelgen.Vocab{KV: append(kv, special...)}, nil
}

// spmShape says what of the tokenizer llama.cpp's SentencePiece tokenizer
// would not reproduce ("" if nothing): Gemma's is a BPE with byte fallback,
// spaces replaced by U+2581, no pre-tokenizer (or a split at spaces, which
// are gone by then).
func spmShape(tj byteTokenizer, st spmTokenizer) string {
	n, p := st.Normalizer, st.PreTokenizer
	switch {
	case tj.Model.Type != "BPE" || !st.Model.ByteFallback:
		return fmt.Sprintf("a Gemma tokenizer is a BPE with byte fallback; this one is model %q, byte_fallback %v", tj.Model.Type, st.Model.ByteFallback)
	case n == nil || n.Type != "Replace" || n.Pattern.String != " " || n.Content != spmSpace:
		return "a Gemma tokenizer's normalizer replaces spaces by U+2581 and does nothing else; this one's differs (llama.cpp would tokenize otherwise)"
	case p != nil && (p.Type != "Split" || p.Pattern.String != " " || p.Behavior != "MergedWithPrevious"):
		return fmt.Sprintf("pre-tokenizer %q; a Gemma tokenizer has none (llama.cpp would split the text otherwise)", p.Type)
	}
	return ""
}

// spmTokens are the tokens by id, padded to rows, and their llama.cpp types.
func spmTokens(tj byteTokenizer, st spmTokenizer, rows int) ([]string, []int32, error) {
	const normal, unknown, control, user, unused, byteTok = 1, 2, 3, 4, 5, 6
	n := len(tj.Model.Vocab)
	for _, a := range tj.AddedTokens {
		n = max(n, a.ID+1)
	}
	rows = max(rows, n)
	toks, types := make([]string, rows), make([]int32, rows)
	for t, id := range tj.Model.Vocab {
		if id < 0 || id >= rows || toks[id] != "" {
			return nil, nil, fmt.Errorf("vocabulary ids are not distinct and below %d (%q is %d)", rows, t, id)
		}
		toks[id], types[id] = t, normal
		var x byte
		if len(t) == 6 && strings.HasPrefix(t, "<0x") && t[5] == '>' {
			if _, err := fmt.Sscanf(t, "<0x%02X>", &x); err == nil {
				types[id] = byteTok
			}
		}
		if t == st.Model.UnkToken {
			types[id] = unknown
		}
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 || toks[a.ID] != "" && toks[a.ID] != a.Content {
			return nil, nil, fmt.Errorf("added token %q has id %d, which is %q", a.Content, a.ID, toks[a.ID])
		}
		toks[a.ID], types[a.ID] = a.Content, user
		switch {
		case a.Content == st.Model.UnkToken:
			types[a.ID] = unknown
		case a.Special:
			types[a.ID] = control
		}
	}
	for id := range toks {
		if toks[id] == "" {
			toks[id], types[id] = fmt.Sprintf("[PAD%d]", id), unused
		}
	}
	return toks, types, nil
}

// spmScores ranks each normal token by the first merge that makes it
// (-rank), the others below every merge, after checking that every pair of
// normal tokens whose join is a normal token is a merge — llama.cpp would
// merge it, transformers would not.
func spmScores(toks []string, types []int32, merges []string) ([]float32, error) {
	id, all := make(map[string]int, len(toks)), make(map[string]bool, len(toks))
	for i, t := range toks {
		all[t] = true
		if types[i] == 1 {
			id[t] = i
		}
	}
	rank := make(map[string]int, len(merges))
	pairs := make(map[string]bool, len(merges))
	for r, m := range merges {
		a, b, _ := strings.Cut(m, " ")
		if !all[a+b] { // transformers' merges may make a byte or special token
			return nil, fmt.Errorf("merge %d (%q) makes %q, which is no token", r, m, a+b)
		}
		pairs[m] = true
		if _, ok := rank[a+b]; !ok {
			rank[a+b] = r
		}
	}
	scores := make([]float32, len(toks))
	for i, t := range toks {
		r, ok := rank[t]
		if !ok {
			r = len(merges) + i
		}
		scores[i] = -float32(r)
		if types[i] != 1 {
			continue
		}
		for k := 1; k < len(t); k++ {
			if !utf8Start(t[k]) {
				continue
			}
			_, okA := id[t[:k]]
			_, okB := id[t[k:]]
			if okA && okB && !pairs[t[:k]+" "+t[k:]] {
				return nil, fmt.Errorf("%q and %q join to the token %q, but the merges lack that pair (llama.cpp would merge it)", t[:k], t[k:], t)
			}
		}
	}
	return scores, nil
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
