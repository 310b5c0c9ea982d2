package tokenize

import (
	"encoding/json"
	"fmt"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// PairTemplate is how a tokenizer.json post-processor lays out a pair of
// sequences, as the Rust library's encode(a, b) does (truncation aside):
// TemplateProcessing's "pair" ([CLS] $A [SEP] $B:1 [SEP]:1 for BERT),
// BertProcessing ([CLS] A [SEP] B [SEP], B and its [SEP] of type 1),
// RobertaProcessing (<s> A </s></s> B </s>, all of type 0), or no
// post-processor (A B, B of type 1). Cross-encoders score a query (A) and a
// document (B) laid out this way.
type PairTemplate struct {
	t template
}

// Apply lays out a and b: the ids and each id's token type (token_type_ids).
func (p PairTemplate) Apply(a, b []int32) (ids, types []int32) { return p.t.apply(a, b) }

// Overhead is the number of special tokens the layout adds to a pair.
func (p PairTemplate) Overhead() int {
	n := 0
	for _, pc := range p.t.pieces {
		if pc.seq < 0 {
			n += len(pc.ids)
		}
	}
	return n
}

// MaxType is the largest token type the layout gives.
func (p PairTemplate) MaxType() int32 {
	var m int32
	for _, pc := range p.t.pieces {
		m = max(m, pc.typeID)
	}
	return m
}

// HasB reports whether the layout holds the second sequence (a template
// whose pair omits $B would score the query alone).
func (p PairTemplate) HasB() bool {
	for _, pc := range p.t.pieces {
		if pc.seq == 1 {
			return true
		}
	}
	return false
}

// String shows the layout with the special tokens' ids, e.g.
// "[101] A:0 [102] B:1 [102]:1".
func (p PairTemplate) String() string {
	s := ""
	for i, pc := range p.t.pieces {
		if i > 0 {
			s += " "
		}
		switch pc.seq {
		case 0:
			s += "A"
		case 1:
			s += "B"
		default:
			s += fmt.Sprint(pc.ids)
		}
		if pc.typeID != 0 || pc.seq >= 0 {
			s += fmt.Sprintf(":%d", pc.typeID)
		}
	}
	return s
}

// PairLayout is a tokenizer that knows its pair layout: those read from a
// tokenizer.json (LoadHF, NewHF).
type PairLayout interface {
	PairTemplate() PairTemplate
}

// PairTemplate is the post-processor's pair layout.
func (t *hfTokenizer) PairTemplate() PairTemplate { return PairTemplate{t.post.pair} }

// ReadPairTemplate reads only the post-processor of the tokenizer.json at
// path: what a worker needs to build cross-encoder pairs from plain ids
// without loading the whole tokenizer.
func ReadPairTemplate(path string) (PairTemplate, error) {
	b, err := readlimit.ReadFile(path, readlimit.Tokenizer)
	if err != nil {
		return PairTemplate{}, fmt.Errorf("tokenize: %w", err)
	}
	var j struct {
		PostProcessor json.RawMessage `json:"post_processor"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return PairTemplate{}, fmt.Errorf("tokenize: %s: %w", path, err)
	}
	t, err := parseHFPost(j.PostProcessor)
	if err != nil {
		return PairTemplate{}, fmt.Errorf("tokenize: %s: post_processor: %w", path, err)
	}
	return PairTemplate{t.pair}, nil
}
