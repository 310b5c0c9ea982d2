package convert

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/gguf"
)

// TestGemmaGGUFTokenizer: the GGUF file written from the random-weight
// EmbeddingGemma (testdata/gemma-tiny, made by examples/models/tiny_gemma.py)
// tokenizes the reference texts — accents, CJK and an emoji through byte
// fallback, tabs and new lines, runs of spaces, digits — into the ids
// Hugging Face tokenizers gave, <bos> … <eos> around them, and carries the
// model's settings (mean pooling, the Dense projections 32 → 128 → 32, the
// sliding window, head size 16 with 4 query and 2 KV heads).
func TestGemmaGGUFTokenizer(t *testing.T) {
	a := "gemma-embedding."
	checkGGUFConversion(t, "gemma-tiny", "an EmbeddingGemma", map[string]uint64{a + "pooling_type": 1, a + "context_length": 128,
		a + "attention.key_length": 16, a + "attention.head_count": 4, a + "attention.head_count_kv": 2, a + "attention.sliding_window": 8,
		a + "dense_2_feat_in": 32, a + "dense_2_feat_out": 128, a + "dense_3_feat_in": 128, a + "dense_3_feat_out": 32})
}

// TestGemmaRefused: what llama.cpp's gemma-embedding does not compute is
// refused by Open or WriteGGUF, naming the setting, before anything is
// written.
func TestGemmaRefused(t *testing.T) {
	six := []string{"sliding_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "sliding_attention"}
	checkRefusedGGUF(t, "gemma-tiny", []refusal{
		{"causal", "config.json", "use_bidirectional_attention", false, "use_bidirectional_attention false"},
		{"query scale", "config.json", "query_pre_attn_scalar", 32, "query_pre_attn_scalar"},
		{"layer pattern", "config.json", "layer_types", six, "layer_types[3]"},
		{"window pattern", "config.json", "sliding_window_pattern", 4, "sliding_window_pattern"},
		{"local rope base", "config.json", "rope_parameters", map[string]any{"full_attention": map[string]any{"rope_type": "default", "rope_theta": 1e6}, "sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 5e4}}, "rope_local_base_freq"},
		{"rope scaling", "config.json", "rope_parameters", map[string]any{"full_attention": map[string]any{"rope_type": "linear", "factor": 8, "rope_theta": 1e6}, "sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 1e4}}, "rope_type"},
		{"soft-capping", "config.json", "attn_logit_softcapping", 50, "soft-capping"},
		{"activation", "config.json", "hidden_activation", "silu", "hidden_activation"},
		{"dense activation", "3_Dense/config.json", "activation_function", "torch.nn.modules.activation.Tanh", "Dense modules"},
		{"pooling without prompt", "1_Pooling/config.json", "include_prompt", false, "include_prompt false"},
		{"normalizer", "tokenizer.json", "normalizer", map[string]any{"type": "NFC"}, "normalizer"},
		{"pre-tokenizer", "tokenizer.json", "pre_tokenizer", map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}, "pre-tokenizer"},
	})
}

// TestGemmaMergesIncomplete: a tokenizer.json whose merges lack a pair of
// tokens that join to a token is refused — llama.cpp's SentencePiece
// tokenizer would merge that pair where transformers' BPE does not.
func TestGemmaMergesIncomplete(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "gemma-tiny"))); err != nil {
		t.Fatal(err)
	}
	var dropped any
	EditJSON(t, filepath.Join(dir, "tokenizer.json"), func(m map[string]any) {
		model := m["model"].(map[string]any)
		merges := model["merges"].([]any)
		dropped, model["merges"] = merges[0], merges[1:]
	})
	src, err := Open(dir)
	if err == nil {
		err = src.WriteGGUF(filepath.Join(dir, "model.gguf"))
	}
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "the merges lack that pair") {
		t.Errorf("merge %v dropped: %v; want it refused, saying the merges lack that pair", dropped, err)
	}
}

// TestGemmaTransformers4Config: the config.json spelling of transformers 4
// (google/embeddinggemma-300m's: rope_theta and rope_local_base_freq, not
// rope_parameters) converts as transformers 5's does, the full layers'
// rotary base and the window carried.
func TestGemmaTransformers4Config(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "gemma-tiny"))); err != nil {
		t.Fatal(err)
	}
	EditJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) {
		delete(m, "rope_parameters")
		m["rope_theta"], m["rope_local_base_freq"], m["rope_scaling"], m["sliding_window_pattern"] = 1e6, 1e4, nil, 6
	})
	src, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "model.gguf")
	if err := src.WriteGGUF(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Float("gemma-embedding.rope.freq_base"); got != 1e6 {
		t.Errorf("rope.freq_base %v; want 1e6", got)
	}
	if got, _ := f.Uint("gemma-embedding.attention.sliding_window"); got != 8 {
		t.Errorf("attention.sliding_window %d; want 8", got)
	}
	EditJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["rope_local_base_freq"] = 2e4 })
	if _, err := Open(dir); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "rope_local_base_freq") {
		t.Errorf("rope_local_base_freq 20000: %v; want refused, naming it", err)
	}
}
