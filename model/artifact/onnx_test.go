package artifact

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

func writeModel(t *testing.T, d onnxtest.Dir) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "enc")
	if _, err := onnxtest.WriteDir(dir, d); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestOpenONNX(t *testing.T) {
	dir := writeModel(t, onnxtest.Dir{Encoder: onnxtest.Tiny()})
	a, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	graph := filepath.Join(dir, "model.onnx")
	_, digest, _ := hfmodel.Digest(graph)
	st, _ := os.Stat(graph)
	pre, suf := a.Tokenizer.Affixes()
	checks := []struct {
		field     string
		got, want any
	}{
		{"Format", a.Format, FormatONNX},
		{"Path", a.Path, graph},
		{"Digest", a.Digest, digest},
		{"Size", a.Size, st.Size()},
		{"Name", a.Name, "enc"},
		{"Arch", a.Arch, "bert"},
		{"ContextLength", a.ContextLength, onnxtest.Tiny().Positions},
		{"Pooling", a.Pooling, "mean"},
		{"affixes", len(pre) + len(suf), 2},
		{"inputs", len(a.ONNX.Inputs), 3},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v; want %v", c.field, c.got, c.want)
		}
	}
}

func TestOpenONNXVariants(t *testing.T) {
	// A variant named by its file, no config.json (the context comes from
	// tokenizer.json's truncation), a sentence-transformers CLS pooling.
	dir := writeModel(t, onnxtest.Dir{Encoder: onnxtest.Tiny(), Graph: "model_quantized.onnx", Omit: []string{"config.json"}})
	os.MkdirAll(filepath.Join(dir, "1_Pooling"), 0o755)
	os.WriteFile(filepath.Join(dir, "1_Pooling", "config.json"), []byte(`{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}`), 0o644)
	a, err := Open(filepath.Join(dir, "model_quantized.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "enc/model_quantized" || a.ContextLength != onnxtest.Tiny().Positions || a.Pooling != "cls" {
		t.Errorf("got name %q context %d pooling %q; want enc/model_quantized, %d, cls", a.Name, a.ContextLength, a.Pooling, onnxtest.Tiny().Positions)
	}
	if a, err := Open(dir); err != nil || a.Path != filepath.Join(dir, "model_quantized.onnx") {
		t.Errorf("directory with one graph: got %v, %v; want its model_quantized.onnx", a, err)
	}
}

func TestOpenONNXErrors(t *testing.T) {
	noTok := writeModel(t, onnxtest.Dir{Encoder: onnxtest.Tiny(), Omit: []string{"tokenizer.json"}})
	badTok := writeModel(t, onnxtest.Dir{Encoder: onnxtest.Tiny()})
	os.WriteFile(filepath.Join(badTok, "tokenizer.json"), []byte(`{"version":"1.0","model":{"type":"WordLevel","vocab":{},"unk_token":"x"}}`), 0o644)
	garbage := writeModel(t, onnxtest.Dir{Encoder: onnxtest.Tiny()})
	os.WriteFile(filepath.Join(garbage, "model.onnx"), []byte("not a graph"), 0o644)
	empty := t.TempDir()
	tests := []struct{ path, want string }{
		{noTok, "no tokenizer.json"},
		{badTok, `model "WordLevel"`},
		{garbage, "not an ONNX model"},
		{empty, "no model.onnx"},
	}
	for _, tt := range tests {
		_, err := Open(tt.path)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%s): got %v; want ErrInvalid mentioning %q", filepath.Base(tt.path), err, tt.want)
		}
	}
	if _, err := Open(filepath.Join(empty, "none.onnx")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: got %v; want fs.ErrNotExist", err)
	}
}
