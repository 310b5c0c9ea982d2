package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// unusedToken is model2vec's default token_remove_pattern, matched at the
// start of a token as Python's re.match does: BERT's [unused0] … [unused993].
var unusedToken = regexp.MustCompile(`^\[unused\d+\]`)

// distillVocab is the vocabulary a distilled model keeps, as model2vec
// 0.10's distill rebuilds it: the model's vocabulary in id order less the
// tokens matching unusedToken and the added tokens other than the unknown
// and padding tokens ([CLS], [SEP], [MASK]: text never yields them, as the
// static model tokenizes without special tokens).
type distillVocab struct {
	IDs     []int32 // the kept tokens' ids in the model, ascending: row i is token IDs[i]
	Removed int     // the model's tokens left out
	JSON    []byte  // tokenizer.json over the kept tokens, renumbered 0…len(IDs)-1
}

// tokenizerDoc is a tokenizer.json: its sections, kept as they are except
// those rebuildVocab changes.
type tokenizerDoc map[string]json.RawMessage

// rebuildVocab makes the distilled model's vocabulary and tokenizer.json
// from the model's tokenizer.json b: the kept tokens renumbered in their
// order, the added tokens and (BPE) merges of the removed ones dropped, and
// the post-processor, padding and truncation removed, as model2vec writes
// them (a static model adds no special tokens, pads nothing, and truncates
// at its config's max_length).
// pad is the padding token the model's tokenizer_config.json names ("":
// none), kept when tokenizer.json's padding names none, as model2vec takes
// the Hugging Face tokenizer's pad_token then.
func rebuildVocab(b []byte, pad string) (distillVocab, error) {
	var doc tokenizerDoc
	var model map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return distillVocab{}, fmt.Errorf("tokenizer.json: %w", err)
	}
	if err := json.Unmarshal(doc["model"], &model); err != nil || model == nil {
		return distillVocab{}, fmt.Errorf("tokenizer.json: no model section")
	}
	var typ string
	_ = json.Unmarshal(model["type"], &typ)
	tokens, err := vocabTokens(typ, model)
	if err != nil {
		return distillVocab{}, err
	}
	added, err := addedTokens(doc)
	if err != nil {
		return distillVocab{}, err
	}
	keepAdded := specialKept(doc, model, typ, tokens, pad)
	removed := map[string]bool{}
	for _, a := range added {
		if !keepAdded[a.Content] {
			removed[a.Content] = true
		}
	}
	var v distillVocab
	newID := map[string]int{}
	for id, t := range tokens {
		if t == "" || removed[t] || unusedToken.MatchString(t) {
			if t != "" {
				removed[t] = true
				v.Removed++
			}
			continue
		}
		newID[t] = len(v.IDs)
		v.IDs = append(v.IDs, int32(id))
	}
	if len(v.IDs) == 0 {
		return distillVocab{}, fmt.Errorf("tokenizer.json: no token left after removing the unused and special ones")
	}
	if err := rewriteModel(model, typ, tokens, v.IDs, removed, newID); err != nil {
		return distillVocab{}, err
	}
	if doc["model"], err = marshal(model); err != nil {
		return distillVocab{}, err
	}
	if doc["added_tokens"], err = keptAddedTokens(added, newID); err != nil {
		return distillVocab{}, err
	}
	doc["post_processor"], doc["padding"], doc["truncation"] = json.RawMessage("null"), json.RawMessage("null"), json.RawMessage("null")
	v.JSON, err = marshal(doc)
	return v, err
}

// vocabTokens returns the model's tokens by id ("" for an id none has).
// WordPiece, BPE and WordLevel keep a token → id object; Unigram a list of
// [piece, score] whose index is the id.
func vocabTokens(typ string, model map[string]json.RawMessage) ([]string, error) {
	if typ == "Unigram" {
		var pieces [][]json.RawMessage
		if err := json.Unmarshal(model["vocab"], &pieces); err != nil {
			return nil, fmt.Errorf("tokenizer.json: Unigram vocab: %w", err)
		}
		tokens := make([]string, len(pieces))
		for i, p := range pieces {
			if len(p) != 2 || json.Unmarshal(p[0], &tokens[i]) != nil {
				return nil, fmt.Errorf("tokenizer.json: Unigram vocab entry %d is not [piece, score]", i)
			}
		}
		return tokens, nil
	}
	var vocab map[string]int
	if err := json.Unmarshal(model["vocab"], &vocab); err != nil || vocab == nil {
		return nil, fmt.Errorf("tokenizer.json: %s model: no token → id vocab", typ)
	}
	n := 0
	for _, id := range vocab {
		if id < 0 || id > 1<<24 {
			return nil, fmt.Errorf("tokenizer.json: vocab id %d out of range", id)
		}
		n = max(n, id+1)
	}
	tokens := make([]string, n)
	for t, id := range vocab {
		if tokens[id] != "" {
			return nil, fmt.Errorf("tokenizer.json: vocab id %d is both %q and %q", id, tokens[id], t)
		}
		tokens[id] = t
	}
	return tokens, nil
}

// addedToken is one entry of added_tokens, every field kept.
type addedToken struct {
	Content string
	Fields  map[string]json.RawMessage
}

func addedTokens(doc tokenizerDoc) ([]addedToken, error) {
	var raw []map[string]json.RawMessage
	if r, ok := doc["added_tokens"]; ok && string(r) != "null" {
		if err := json.Unmarshal(r, &raw); err != nil {
			return nil, fmt.Errorf("tokenizer.json: added_tokens: %w", err)
		}
	}
	out := make([]addedToken, len(raw))
	for i, f := range raw {
		if err := json.Unmarshal(f["content"], &out[i].Content); err != nil {
			return nil, fmt.Errorf("tokenizer.json: added_tokens[%d] has no content", i)
		}
		out[i].Fields = f
	}
	return out, nil
}

// specialKept are the added tokens model2vec keeps: the model's unknown
// token and the padding's token (tokenizer.json's, else cfgPad).
func specialKept(doc tokenizerDoc, model map[string]json.RawMessage, typ string, tokens []string, cfgPad string) map[string]bool {
	keep := map[string]bool{}
	var unk string
	if typ == "Unigram" {
		var id int
		if json.Unmarshal(model["unk_id"], &id) == nil && id >= 0 && id < len(tokens) {
			unk = tokens[id]
		}
	} else {
		_ = json.Unmarshal(model["unk_token"], &unk)
	}
	var pad struct {
		Token string `json:"pad_token"`
	}
	_ = json.Unmarshal(doc["padding"], &pad)
	if pad.Token == "" {
		pad.Token = cfgPad
	}
	for _, t := range []string{unk, pad.Token} {
		if t != "" {
			keep[t] = true
		}
	}
	return keep
}

// rewriteModel puts the kept tokens, renumbered, into the model section:
// the vocab in the new id order, Unigram's unk_id moved, and BPE's merges
// that name a removed token dropped.
func rewriteModel(model map[string]json.RawMessage, typ string, tokens []string, ids []int32, removed map[string]bool, newID map[string]int) error {
	var buf bytes.Buffer
	if typ == "Unigram" {
		var pieces []json.RawMessage
		if err := json.Unmarshal(model["vocab"], &pieces); err != nil {
			return err
		}
		kept := make([]json.RawMessage, len(ids))
		for i, id := range ids {
			kept[i] = pieces[id]
		}
		b, err := marshal(kept)
		if err != nil {
			return err
		}
		model["vocab"] = b
		var unk int
		if json.Unmarshal(model["unk_id"], &unk) == nil && unk >= 0 && unk < len(tokens) {
			model["unk_id"] = json.RawMessage(fmt.Sprint(newID[tokens[unk]]))
		}
		return nil
	}
	buf.WriteByte('{')
	for i, id := range ids {
		k, _ := marshal(tokens[id])
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, "%s:%d", k, i)
	}
	buf.WriteByte('}')
	model["vocab"] = buf.Bytes()
	if typ != "BPE" || len(removed) == 0 {
		return nil
	}
	return dropMerges(model, removed)
}

// dropMerges removes the BPE merges that name a removed token (as one of
// the pair or as their result); merges are "a b" strings or [a, b] pairs.
func dropMerges(model map[string]json.RawMessage, removed map[string]bool) error {
	var merges []json.RawMessage
	if r, ok := model["merges"]; !ok || string(r) == "null" {
		return nil
	} else if err := json.Unmarshal(r, &merges); err != nil {
		return fmt.Errorf("tokenizer.json: BPE merges: %w", err)
	}
	merges = slices.DeleteFunc(merges, func(m json.RawMessage) bool {
		var pair []string
		var s string
		if json.Unmarshal(m, &s) == nil {
			pair = strings.SplitN(s, " ", 2)
		} else {
			_ = json.Unmarshal(m, &pair)
		}
		return len(pair) == 2 && (removed[pair[0]] || removed[pair[1]] || removed[pair[0]+pair[1]])
	})
	b, err := marshal(merges)
	model["merges"] = b
	return err
}

// keptAddedTokens is added_tokens less the removed ones, ids renumbered.
func keptAddedTokens(added []addedToken, newID map[string]int) (json.RawMessage, error) {
	kept := []map[string]json.RawMessage{}
	for _, a := range added {
		id, ok := newID[a.Content]
		if !ok {
			continue
		}
		a.Fields["id"] = json.RawMessage(fmt.Sprint(id))
		kept = append(kept, a.Fields)
	}
	return marshal(kept)
}

// configPadToken is the pad_token of the tokenizer_config.json in dir (a
// string or an added-token object), else of special_tokens_map.json; ""
// when neither names one. A file that is there but unreadable is an error.
func configPadToken(dir string) (string, error) {
	for _, name := range []string{"tokenizer_config.json", "special_tokens_map.json"} {
		p := filepath.Join(dir, name)
		if !fileExists(p) {
			continue
		}
		b, err := readlimit.ReadFile(p, readlimit.Config)
		if err != nil {
			return "", err
		}
		var c struct {
			Pad json.RawMessage `json:"pad_token"`
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		var tok string
		var obj struct {
			Content string `json:"content"`
		}
		if json.Unmarshal(c.Pad, &tok) != nil && json.Unmarshal(c.Pad, &obj) == nil {
			tok = obj.Content
		}
		if tok != "" {
			return tok, nil
		}
	}
	return "", nil
}

// marshal is json.Marshal without HTML escaping: tokens such as <s> stay
// as they are in tokenizer.json.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
