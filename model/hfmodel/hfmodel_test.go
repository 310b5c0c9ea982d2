package hfmodel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func touch(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	root := t.TempDir()
	// A Hub layout: graphs in onnx/, tokenizer and config at the top, a pooling module.
	hub := filepath.Join(root, "hub")
	touch(t, filepath.Join(hub, "onnx", "model.onnx"), "g")
	touch(t, filepath.Join(hub, "onnx", "model_quantized.onnx"), "q")
	touch(t, filepath.Join(hub, "tokenizer.json"), "{}")
	touch(t, filepath.Join(hub, "config.json"), "{}")
	touch(t, filepath.Join(hub, "modules.json"), `[{"idx":0,"path":"","type":"sentence_transformers.models.Transformer"},{"idx":1,"path":"2_Pool","type":"sentence_transformers.models.Pooling"}]`)
	touch(t, filepath.Join(hub, "2_Pool", "config.json"), `{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}`)
	// A flat layout with one variant only.
	flat := filepath.Join(root, "flat")
	touch(t, filepath.Join(flat, "model_int8.onnx"), "g")
	touch(t, filepath.Join(flat, "tokenizer.json"), "{}")
	touch(t, filepath.Join(flat, "1_Pooling", "config.json"), `{"pooling_mode_max_tokens": true, "pooling_mode_mean_tokens": false}`)
	// Two variants, no model.onnx.
	two := filepath.Join(root, "two")
	touch(t, filepath.Join(two, "a.onnx"), "g")
	touch(t, filepath.Join(two, "b.onnx"), "g")
	tests := []struct {
		path                                   string
		graph, tokenizer, config, pooling, err string
	}{
		{hub, "hub/onnx/model.onnx", "hub/tokenizer.json", "hub/config.json", "Pooling(cls)", ""},
		{filepath.Join(hub, "onnx", "model_quantized.onnx"), "hub/onnx/model_quantized.onnx", "hub/tokenizer.json", "hub/config.json", "Pooling(cls)", ""},
		{flat, "flat/model_int8.onnx", "flat/tokenizer.json", "", "Pooling(max)", ""},
		{two, "", "", "", "", "2 variants (a.onnx, b.onnx)"},
		{filepath.Join(root), "", "", "", "", "no model.onnx"},
		{filepath.Join(hub, "tokenizer.json"), "", "", "", "", "want a .onnx file"},
	}
	rel := func(p string) string {
		if p == "" {
			return ""
		}
		r, _ := filepath.Rel(root, p)
		return r
	}
	for _, tt := range tests {
		f, err := Resolve(tt.path)
		if tt.err != "" {
			if !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Resolve(%s): got %v; want ErrLayout mentioning %q", rel(tt.path), err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%s): %v", rel(tt.path), err)
			continue
		}
		got := []string{rel(f.Graph), rel(f.Tokenizer), rel(f.Config), f.Chain.String()}
		want := []string{tt.graph, tt.tokenizer, tt.config, tt.pooling}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("Resolve(%s): got %v; want %v", rel(tt.path), got, want)
				break
			}
		}
	}
}

func TestContextLength(t *testing.T) {
	one := 1
	tests := []struct {
		c    Config
		want int
	}{
		{Config{ModelType: "bert", MaxPositionEmbeddings: 512}, 512},
		{Config{ModelType: "xlm-roberta", MaxPositionEmbeddings: 514, PadTokenID: &one}, 512},
		{Config{ModelType: "roberta", MaxPositionEmbeddings: 514}, 512},
		{Config{ModelType: "mpnet", MaxPositionEmbeddings: 514, PadTokenID: &one}, 512},
		{Config{}, 0},
	}
	for _, tt := range tests {
		if got := tt.c.ContextLength(); got != tt.want {
			t.Errorf("%s %d: got %d; want %d", tt.c.ModelType, tt.c.MaxPositionEmbeddings, got, tt.want)
		}
	}
}
