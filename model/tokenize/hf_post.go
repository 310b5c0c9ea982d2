package tokenize

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// hfTemplate is what a post-processor adds: the single-sequence and pair
// templates.
type hfTemplate struct {
	single, pair template
}

// template is a sequence of pieces: special tokens and the sequences A
// (seq 0) and B (seq 1), each with its token type.
type template struct {
	pieces         []tplPiece
	prefix, suffix []int32 // the special tokens before and after $A (single templates)
}

type tplPiece struct {
	seq    int // 0 (A), 1 (B), or -1 for special tokens
	ids    []int32
	typeID int32
}

// newTemplate fills prefix and suffix, the special tokens around A.
func newTemplate(pieces []tplPiece) template {
	t := template{pieces: pieces}
	seenA := false
	for _, p := range pieces {
		switch {
		case p.seq == 0:
			seenA = true
		case p.seq < 0 && !seenA:
			t.prefix = append(t.prefix, p.ids...)
		case p.seq < 0:
			t.suffix = append(t.suffix, p.ids...)
		}
	}
	return t
}

// apply lays out a and b (b unused by single templates) with their types.
func (t template) apply(a, b []int32) (ids, types []int32) {
	for _, p := range t.pieces {
		src := p.ids
		switch p.seq {
		case 0:
			src = a
		case 1:
			src = b
		}
		ids = append(ids, src...)
		for range src {
			types = append(types, p.typeID)
		}
	}
	return ids, types
}

func parseHFPost(raw json.RawMessage) (hfTemplate, error) {
	none := hfTemplate{single: newTemplate([]tplPiece{{seq: 0}}),
		pair: newTemplate([]tplPiece{{seq: 0}, {seq: 1, typeID: 1}})}
	if isNull(raw) {
		return none, nil
	}
	typ, err := typeOf(raw)
	if err != nil {
		return none, err
	}
	switch typ {
	case "ByteLevel": // offsets only
		return none, nil
	case "BertProcessing", "RobertaProcessing":
		var j struct {
			Sep [2]any `json:"sep"`
			Cls [2]any `json:"cls"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return none, fmt.Errorf("%s: %w", typ, err)
		}
		cls, ok1 := j.Cls[1].(float64)
		sep, ok2 := j.Sep[1].(float64)
		if !ok1 || !ok2 {
			return none, fmt.Errorf("%s: cls and sep: want [token, id]", typ)
		}
		c, s := []int32{int32(cls)}, []int32{int32(sep)}
		single := []tplPiece{{seq: -1, ids: c}, {seq: 0}, {seq: -1, ids: s}}
		pair := []tplPiece{{seq: -1, ids: c}, {seq: 0}, {seq: -1, ids: s}, {seq: 1, typeID: 1}, {seq: -1, ids: s, typeID: 1}}
		if typ == "RobertaProcessing" { // <s> A </s></s> B </s>, all of type 0
			pair = []tplPiece{{seq: -1, ids: c}, {seq: 0}, {seq: -1, ids: s}, {seq: -1, ids: s}, {seq: 1}, {seq: -1, ids: s}}
		}
		return hfTemplate{single: newTemplate(single), pair: newTemplate(pair)}, nil
	case "TemplateProcessing":
		return parseTemplateProcessing(raw)
	case "Sequence":
		var j struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return none, fmt.Errorf("%s: %w", typ, err)
		}
		out, adding := none, 0
		for _, r := range j.Processors {
			t, err := parseHFPost(r)
			if err != nil {
				return none, err
			}
			if len(t.single.pieces) != 1 || len(t.pair.pieces) != 2 {
				out = t
				adding++
			}
		}
		if adding > 1 {
			return none, fmt.Errorf("Sequence with %d processors that add special tokens: %w", adding, ErrUnsupported)
		}
		return out, nil
	}
	return none, unsupported("post-processor", typ)
}

func parseTemplateProcessing(raw json.RawMessage) (hfTemplate, error) {
	var j struct {
		Single        []json.RawMessage `json:"single"`
		Pair          []json.RawMessage `json:"pair"`
		SpecialTokens map[string]struct {
			IDs []int32 `json:"ids"`
		} `json:"special_tokens"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return hfTemplate{}, fmt.Errorf("TemplateProcessing: %w", err)
	}
	ids := map[string][]int32{}
	for name, st := range j.SpecialTokens {
		ids[name] = st.IDs
	}
	single, err := parsePieces(j.Single, ids)
	if err != nil {
		return hfTemplate{}, fmt.Errorf("TemplateProcessing: single: %w", err)
	}
	pair, err := parsePieces(j.Pair, ids)
	if err != nil {
		return hfTemplate{}, fmt.Errorf("TemplateProcessing: pair: %w", err)
	}
	return hfTemplate{single: newTemplate(single), pair: newTemplate(pair)}, nil
}

// parsePieces reads template pieces, {"SpecialToken": {"id", "type_id"}} and
// {"Sequence": {"id": "A"|"B", "type_id"}}, or their string forms ("[CLS]",
// "$A", "$B:1").
func parsePieces(raws []json.RawMessage, ids map[string][]int32) ([]tplPiece, error) {
	var out []tplPiece
	for _, r := range raws {
		var obj struct {
			Special *struct {
				ID     string `json:"id"`
				TypeID int32  `json:"type_id"`
			} `json:"SpecialToken"`
			Sequence *struct {
				ID     string `json:"id"`
				TypeID int32  `json:"type_id"`
			} `json:"Sequence"`
		}
		var str string
		switch {
		case json.Unmarshal(r, &str) == nil:
			p, err := parsePieceString(str, ids)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
			continue
		case json.Unmarshal(r, &obj) != nil:
			return nil, fmt.Errorf("piece %s: want SpecialToken or Sequence", r)
		}
		switch {
		case obj.Special != nil:
			tok, ok := ids[obj.Special.ID]
			if !ok {
				return nil, fmt.Errorf("special token %q is not in special_tokens", obj.Special.ID)
			}
			out = append(out, tplPiece{seq: -1, ids: tok, typeID: obj.Special.TypeID})
		case obj.Sequence != nil && (obj.Sequence.ID == "A" || obj.Sequence.ID == "B"):
			out = append(out, tplPiece{seq: int(obj.Sequence.ID[0] - 'A'), typeID: obj.Sequence.TypeID})
		default:
			return nil, fmt.Errorf("piece %s: want SpecialToken or Sequence A or B", r)
		}
	}
	return out, nil
}

func parsePieceString(s string, ids map[string][]int32) (tplPiece, error) {
	name, typ, hasType := strings.Cut(s, ":")
	var typeID int32
	if hasType {
		n, err := strconv.Atoi(typ)
		if err != nil {
			return tplPiece{}, fmt.Errorf("piece %q: type %q", s, typ)
		}
		typeID = int32(n)
	}
	switch name {
	case "$", "$A", "$0":
		return tplPiece{seq: 0, typeID: typeID}, nil
	case "$B", "$1":
		return tplPiece{seq: 1, typeID: typeID}, nil
	}
	tok, ok := ids[name]
	if !ok {
		return tplPiece{}, fmt.Errorf("special token %q is not in special_tokens", name)
	}
	return tplPiece{seq: -1, ids: tok, typeID: typeID}, nil
}
