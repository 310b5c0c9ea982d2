package hfmodel

import (
	"encoding/json"
	"fmt"
	"path/filepath"
)

// MultiVector is how a multi-vector (ColBERT) model marks, cuts and
// filters its inputs, as PyLate's ColBERT reads it from
// config_sentence_transformers.json, with PyLate's defaults for what the
// file does not say:
//
//	"query_prefix": "[Q] ", "document_prefix": "[D] "   marker tokens, inserted after [CLS] ("" : none)
//	"query_length": 32, "document_length": 180          tokens, special tokens and marker included
//	"do_query_expansion": true                          pad queries to query_length with [MASK]
//	"attend_to_expansion_tokens": false                 the [MASK] tokens outside the attention mask
//	"skiplist_words": string.punctuation                document tokens left out of the output
type MultiVector struct {
	QueryPrefix, DocumentPrefix string
	QueryLength, DocumentLength int
	QueryExpansion              bool
	AttendExpansion             bool
	Skiplist                    []string
}

// PyLatePunctuation is Python's string.punctuation, PyLate's default
// skiplist_words.
var PyLatePunctuation = []string{"!", "\"", "#", "$", "%", "&", "'", "(", ")", "*", "+", ",", "-", ".", "/", ":", ";",
	"<", "=", ">", "?", "@", "[", "\\", "]", "^", "_", "`", "{", "|", "}", "~"}

// readMultiVector reads the multi-vector members of
// config_sentence_transformers.json (optional) with PyLate's defaults.
func (c *Chain) readMultiVector(root string) error {
	mv := MultiVector{QueryPrefix: "[Q] ", DocumentPrefix: "[D] ", QueryLength: 32, DocumentLength: 180,
		QueryExpansion: true, Skiplist: PyLatePunctuation}
	path := filepath.Join(root, "config_sentence_transformers.json")
	if exists(path) {
		var cfg struct {
			QueryPrefix     *string   `json:"query_prefix"`
			DocumentPrefix  *string   `json:"document_prefix"`
			QueryLength     *int      `json:"query_length"`
			DocumentLength  *int      `json:"document_length"`
			QueryExpansion  *bool     `json:"do_query_expansion"`
			AttendExpansion *bool     `json:"attend_to_expansion_tokens"`
			Skiplist        *[]string `json:"skiplist_words"`
		}
		if err := readJSON(path, &cfg); err != nil {
			return err
		}
		set(&mv.QueryPrefix, cfg.QueryPrefix)
		set(&mv.DocumentPrefix, cfg.DocumentPrefix)
		set(&mv.QueryLength, cfg.QueryLength)
		set(&mv.DocumentLength, cfg.DocumentLength)
		set(&mv.QueryExpansion, cfg.QueryExpansion)
		set(&mv.AttendExpansion, cfg.AttendExpansion)
		set(&mv.Skiplist, cfg.Skiplist)
		if mv.QueryLength < 4 || mv.DocumentLength < 4 {
			return fmt.Errorf("hfmodel: %s: %w: query_length %d, document_length %d: want at least 4 tokens", path, ErrModule, mv.QueryLength, mv.DocumentLength)
		}
	}
	if !mv.QueryExpansion {
		mv.AttendExpansion = false // as PyLate: nothing to attend to
	}
	c.Multi = mv
	return nil
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// String describes the settings that decide a multi-vector model's
// vectors besides its weights, as the output's settings record them.
func (m MultiVector) String() string {
	b, _ := json.Marshal([]any{m.QueryPrefix, m.DocumentPrefix, m.QueryLength, m.DocumentLength, m.QueryExpansion, m.AttendExpansion, m.Skiplist})
	return string(b)
}
