package convert

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/tokenize"
)

// debertaReference is testdata/deberta-tiny.reference.json, written by
// examples/models/tiny_deberta.py.
type debertaReference struct {
	MaxLength int `json:"max_length"`
	Pairs     []struct {
		Query string `json:"query"`
		Doc   string `json:"doc"`
	} `json:"pairs"`
	Scores      []float64          `json:"scores"`
	TokenIDs    [][]int32          `json:"token_ids"`
	SingleIDs   [][]int32          `json:"single_ids"`
	BucketsFrom int                `json:"buckets_from"`
	Buckets     map[string][]int64 `json:"buckets"`
}

func readDebertaReference(t *testing.T, name string) debertaReference {
	t.Helper()
	var ref debertaReference
	b, err := os.ReadFile("testdata/" + name + ".reference.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Pairs) == 0 || len(ref.TokenIDs) != len(ref.Pairs) || len(ref.SingleIDs) != len(ref.Pairs) || len(ref.Scores) != len(ref.Pairs) {
		t.Fatalf("reference: %d pairs, %d token id lists, %d single, %d scores", len(ref.Pairs), len(ref.TokenIDs), len(ref.SingleIDs), len(ref.Scores))
	}
	return ref
}

// TestDebertaBuckets: debertaBucket equals transformers'
// make_log_bucket_position at every relative position from -600 to 600,
// for the test checkpoint's 16 buckets over 128 positions and DeBERTa-v3's
// 256 over 512 (computed by torch).
func TestDebertaBuckets(t *testing.T) {
	ref := readDebertaReference(t, "deberta-tiny")
	for _, tc := range []struct {
		key          string
		buckets, max int
	}{{"16/128", 16, 128}, {"256/512", 256, 512}} {
		want := ref.Buckets[tc.key]
		if len(want) != 1201 {
			t.Fatalf("%s: %d buckets in the reference; want 1201", tc.key, len(want))
		}
		for i, w := range want {
			if got := debertaBucket(ref.BucketsFrom+i, tc.buckets, tc.max); int64(got) != w {
				t.Errorf("%s: relative position %d: bucket %d; transformers %d", tc.key, ref.BucketsFrom+i, got, w)
			}
		}
	}
}

// TestDebertaTokenizer: the DeBERTa-v3-style tokenizer.json (Unigram,
// Strip, NFKC, Replace " {2,}", Metaspace) of testdata/deberta-tiny and
// deberta-v2-tiny gives Hugging Face tokenizers' ids for each query alone
// ([CLS] q [SEP]) and for each pair laid out by its post-processor's pair
// template, as rerank lays it out ([CLS] q [SEP] d [SEP], those within
// max_length, which tokenizers did not cut), with token types 0 then 1.
func TestDebertaTokenizer(t *testing.T) {
	for _, name := range []string{"deberta-tiny", "deberta-v2-tiny"} {
		ref := readDebertaReference(t, name)
		tok, err := tokenize.LoadHF("testdata/" + name + "/tokenizer.json")
		if err != nil {
			t.Fatal(err)
		}
		pt, err := tokenize.ReadPairTemplate("testdata/" + name + "/tokenizer.json")
		if err != nil {
			t.Fatal(err)
		}
		if whole := checkDebertaPairs(t, name, ref, tok, pt); whole < 5 {
			t.Errorf("%s: %d whole pairs compared; want at least 5", name, whole)
		}
	}
}

// checkDebertaPairs compares the ids of the reference's queries and pairs
// and returns how many pairs were compared whole.
func checkDebertaPairs(t *testing.T, name string, ref debertaReference, tok tokenize.Tokenizer, pt tokenize.PairTemplate) int {
	t.Helper()
	whole := 0
	for i, p := range ref.Pairs {
		if got := tok.Tokenize(p.Query, tokenize.Options{AddSpecial: true}).IDs(); !slices.Equal(got, ref.SingleIDs[i]) {
			t.Errorf("%s %q: ids %v; Hugging Face tokenizers: %v", name, p.Query, got, ref.SingleIDs[i])
		}
		q := tok.Tokenize(p.Query, tokenize.Options{}).IDs()
		d := tok.Tokenize(p.Doc, tokenize.Options{}).IDs()
		ids, types := pt.Apply(q, d)
		if len(ids) > ref.MaxLength {
			if !slices.Equal(ids[:ref.MaxLength-1], ref.TokenIDs[i][:ref.MaxLength-1]) {
				t.Errorf("%s pair %d: the first %d ids differ from Hugging Face tokenizers' (cut to max_length)", name, i, ref.MaxLength-1)
			}
			continue
		}
		whole++
		if !slices.Equal(ids, ref.TokenIDs[i]) {
			t.Errorf("%s pair %d (%q, %q): ids %v; Hugging Face tokenizers: %v", name, i, p.Query, p.Doc, ids, ref.TokenIDs[i])
		}
		if n := len(q) + 2; len(types) != len(ids) || slices.ContainsFunc(types[:n], func(v int32) bool { return v != 0 }) || slices.ContainsFunc(types[n:], func(v int32) bool { return v != 1 }) {
			t.Errorf("%s pair %d: token types %v; want 0 for [CLS] q [SEP], 1 for d [SEP]", name, i, types)
		}
	}
	return whole
}

// TestDebertaRefused: DeBERTa settings the graph does not implement are
// refused by name, naming what synapse converts; DeBERTa v1 is refused
// naming the architectures converted.
func TestDebertaRefused(t *testing.T) {
	for _, tc := range []struct {
		key   string
		value any
		says  string
	}{
		{"relative_attention", false, "relative_attention is false"},
		{"position_biased_input", true, "position_biased_input is true"},
		{"pos_att_type", "p2c", "pos_att_type \"p2c\""},
		{"pos_att_type", []string{"c2p", "p2p"}, "pos_att_type [\"c2p\",\"p2p\"]"},
		{"pos_att_type", nil, "no pos_att_type"},
		{"share_att_key", false, "share_att_key is false"},
		{"conv_kernel_size", 3, "conv_kernel_size 3"},
		{"embedding_size", 16, "embedding_size 16"},
		{"pooler_hidden_act", "tanh", "pooler_hidden_act \"tanh\""},
		{"position_buckets", 2, "position_buckets 2 with max_relative_positions 128"},
		{"max_relative_positions", 8, "position_buckets 16 with max_relative_positions 8"},
		{"hidden_act", "gelu_new", "hidden_act \"gelu_new\""},
	} {
		dir := editedCopy(t, "deberta-tiny", "config.json", tc.key, tc.value)
		_, err := Open(dir)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s %v: %v; want refused, saying %q", tc.key, tc.value, err, tc.says)
		}
		if err != nil && tc.key != "hidden_act" && !strings.Contains(err.Error(), "synapse converts DeBERTa-v3's layout") {
			t.Errorf("%s %v: %v; want the supported layout named", tc.key, tc.value, err)
		}
	}
	dir := editedCopy(t, "deberta-tiny", "config.json", "architectures", []string{"DebertaForSequenceClassification"})
	if _, err := Open(dir); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "DebertaV2ForSequenceClassification") {
		t.Errorf("DeBERTa v1: %v; want refused, naming DebertaV2ForSequenceClassification among those converted", err)
	}
	src, err := Open(filepath.Join("testdata", "deberta-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.WriteGGUF(filepath.Join(t.TempDir(), "model.gguf")); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "use --format onnx") {
		t.Errorf("DeBERTa to GGUF: %v; want refused, naming --format onnx", err)
	}
}
