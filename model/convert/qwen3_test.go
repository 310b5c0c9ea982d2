package convert

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQwen3GGUFTokenizer: the GGUF file written from the random-weight
// Qwen3 embedder (testdata/qwen3-tiny, made by examples/models/tiny_qwen3.py)
// tokenizes the reference texts — accents, CJK, an emoji, tabs and new
// lines, digits — into the ids Hugging Face tokenizers gave, <|endoftext|>
// appended, and carries the model's settings (last-token pooling, the
// context max_seq_length, head size 16 with 4 query and 2 KV heads).
func TestQwen3GGUFTokenizer(t *testing.T) {
	checkGGUFConversion(t, "qwen3-tiny", "a Qwen3 decoder", map[string]uint64{"qwen3.pooling_type": 3, "qwen3.context_length": 128,
		"qwen3.attention.key_length": 16, "qwen3.attention.head_count": 4, "qwen3.attention.head_count_kv": 2})
}

// TestQwen3Refused: what the GGUF route does not implement is refused by
// Open or WriteGGUF, naming the setting, before anything is written.
func TestQwen3Refused(t *testing.T) {
	checkRefusedGGUF(t, "qwen3-tiny", []refusal{
		{"rope scaling", "config.json", "rope_scaling", map[string]any{"rope_type": "yarn", "factor": 4}, "rope scaling"},
		{"rope parameters", "config.json", "rope_parameters", map[string]any{"rope_type": "linear", "rope_theta": 1e6}, "rope scaling"},
		{"attention bias", "config.json", "attention_bias", true, "attention_bias"},
		{"sliding window", "config.json", "use_sliding_window", true, "use_sliding_window"},
		{"activation", "config.json", "hidden_act", "gelu", "hidden_act"},
		{"KV heads", "config.json", "num_key_value_heads", 3, "num_key_value_heads"},
		{"pre-tokenizer", "tokenizer.json", "pre_tokenizer", map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}, "Qwen2's byte-level BPE"},
		{"post-processor", "tokenizer.json", "post_processor", map[string]any{"type": "BertProcessing", "sep": []any{"<|im_end|>", 2}, "cls": []any{"<|im_start|>", 1}}, "post-processor"},
	})
}

// TestDistilBERTRefused: DistilBERT's sinusoidal position embeddings are
// refused by name; the learned ones of the test checkpoint open.
func TestDistilBERTRefused(t *testing.T) {
	if _, err := Open("testdata/distilbert-tiny"); err != nil {
		t.Fatalf("the DistilBERT checkpoint: %v", err)
	}
	dir := editedCopy(t, "distilbert-tiny", "config.json", "sinusoidal_pos_embds", true)
	if _, err := Open(dir); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "sinusoidal_pos_embds") {
		t.Errorf("sinusoidal positions: %v; want refused naming sinusoidal_pos_embds", err)
	}
}

// TestMPNetBuckets: mpnetBucket equals transformers'
// MPNetEncoder.relative_position_bucket (32 buckets, max distance 128) at
// every relative position from -600 to 600, the logarithmic ones included
// (testdata/mpnet-tiny.reference.json, computed by torch).
func TestMPNetBuckets(t *testing.T) {
	var ref struct {
		From    int     `json:"buckets_from"`
		Buckets []int64 `json:"buckets"`
	}
	b, err := os.ReadFile("testdata/mpnet-tiny.reference.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Buckets) != 1201 {
		t.Fatalf("%d buckets in the reference; want 1201", len(ref.Buckets))
	}
	for i, want := range ref.Buckets {
		if got := mpnetBucket(ref.From+i, 32); got != want {
			t.Errorf("relative position %d: bucket %d; transformers %d", ref.From+i, got, want)
		}
	}
}

// TestGGUFRefusesOtherEncoders: --format gguf converts BERT encoders only:
// DistilBERT's and MPNet's GGUF routes are not checked against
// sentence-transformers, so they are refused, naming --format onnx.
func TestGGUFRefusesOtherEncoders(t *testing.T) {
	for _, name := range []string{"distilbert-tiny", "mpnet-tiny", "modernbert-tiny"} {
		src, err := Open(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		err = src.WriteGGUF(filepath.Join(t.TempDir(), "model.gguf"))
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "use --format onnx") {
			t.Errorf("%s to GGUF: %v; want refused, naming --format onnx", name, err)
		}
	}
}

// TestModernBERTRefused: ModernBERT settings the graph does not implement
// are refused by name.
func TestModernBERTRefused(t *testing.T) {
	for _, tc := range []struct {
		key   string
		value any
		says  string
	}{
		{"norm_bias", true, "without biases"},
		{"mlp_bias", true, "without biases"},
		{"layer_types", []string{"full_attention"}, "layer_types names 1 layers"},
		{"rope_parameters", map[string]any{"full_attention": map[string]any{"rope_type": "yarn", "rope_theta": 1e4}}, "rope_type"},
	} {
		dir := editedCopy(t, "modernbert-tiny", "config.json", tc.key, tc.value)
		if _, err := Open(dir); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want refused, saying %q", tc.key, err, tc.says)
		}
	}
}
