package convert

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/safetensors"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// modernRerankRef is testdata/modernbert-rerank-tiny.reference.json, made by
// examples/models/tiny_modernbert_rerank.py: the pairs, their ids as Hugging
// Face tokenizers laid them out, and CrossEncoder's logits for each
// classifier_pooling.
type modernRerankRef struct {
	Pairs    [][2]string          `json:"pairs"`
	TokenIDs [][]int32            `json:"token_ids"`
	Scores   map[string][]float64 `json:"scores"`
}

func readModernRerankRef(t *testing.T) modernRerankRef {
	t.Helper()
	var ref modernRerankRef
	b, err := os.ReadFile("testdata/modernbert-rerank-tiny.reference.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Pairs) == 0 || len(ref.TokenIDs) != len(ref.Pairs) || len(ref.Scores["mean"]) != len(ref.Pairs) || len(ref.Scores["cls"]) != len(ref.Pairs) {
		t.Fatalf("reference: %d pairs, %d id lists, %d mean and %d cls scores", len(ref.Pairs), len(ref.TokenIDs), len(ref.Scores["mean"]), len(ref.Scores["cls"]))
	}
	return ref
}

// TestModernBERTRerankPairs: the reranker's tokenizer.json lays out each
// reference pair as Hugging Face tokenizers did ([CLS] q [SEP] d [SEP]),
// and the pairs are longer than a local layer's window.
func TestModernBERTRerankPairs(t *testing.T) {
	ref := readModernRerankRef(t)
	path := "testdata/modernbert-rerank-tiny/tokenizer.json"
	tok, err := tokenize.LoadHF(path)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := tokenize.ReadPairTemplate(path)
	if err != nil {
		t.Fatal(err)
	}
	longest := 0
	for i, p := range ref.Pairs {
		q := tok.Tokenize(p[0], tokenize.Options{}).IDs()
		d := tok.Tokenize(p[1], tokenize.Options{}).IDs()
		got, _ := pt.Apply(q, d)
		if !slices.Equal(got, ref.TokenIDs[i]) {
			t.Errorf("pair %d: ids %v; Hugging Face tokenizers: %v", i, got, ref.TokenIDs[i])
		}
		longest = max(longest, len(got))
	}
	if longest <= 16 {
		t.Errorf("longest pair %d tokens: want past the local window (16)", longest)
	}
}

// TestModernBERTRerankRefused: a ModernBERT head the graph does not
// implement (another pooling, activation, a dense bias) is refused by name;
// another ModernBERT head architecture is refused naming the supported list.
func TestModernBERTRerankRefused(t *testing.T) {
	if _, err := Open("testdata/modernbert-rerank-tiny"); err != nil {
		t.Fatalf("the ModernBERT reranker: %v", err)
	}
	for _, tc := range []struct {
		key   string
		value any
		says  string
	}{
		{"classifier_pooling", "max", `classifier_pooling "max"`},
		{"classifier_activation", "silu", `classifier_activation "silu"`},
		{"classifier_bias", true, "classifier_bias true"},
		{"norm_bias", true, "without biases"},
		{"architectures", []string{"ModernBertForTokenClassification"}, "ModernBertForSequenceClassification, ModernBertModel"},
	} {
		dir := editedCopy(t, "modernbert-rerank-tiny", "config.json", tc.key, tc.value)
		if _, err := Open(dir); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want refused, saying %q", tc.key, err, tc.says)
		}
	}
}

// TestModernBERTRerankMissingHead: a reranker checkpoint without one of its
// head's tensors (the weights rewritten without it) is refused when the
// graph is built, naming the tensor.
func TestModernBERTRerankMissingHead(t *testing.T) {
	f, err := safetensors.Open("testdata/modernbert-rerank-tiny/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, drop := range []string{"classifier.weight", "head.dense.weight", "head.norm.weight", "classifier.bias"} {
		tensors, shapes := map[string][]float32{}, map[string][]int64{}
		for _, n := range f.Names() {
			if n == drop {
				continue
			}
			if tensors[n], shapes[n], err = f.Float32(n); err != nil {
				t.Fatal(err)
			}
		}
		if len(tensors) != len(f.Names())-1 {
			t.Fatalf("%s is not a tensor of the checkpoint (%v)", drop, f.Names())
		}
		dir := editedCopy(t, "modernbert-rerank-tiny", "config.json", "classifier_pooling", "mean")
		if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), tensors, shapes); err != nil {
			t.Fatal(err)
		}
		src, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = src.Graph()
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), drop) {
			t.Errorf("without %s: %v; want refused, naming it", drop, err)
		}
		t.Logf("without %s: %v", drop, err)
	}
}
