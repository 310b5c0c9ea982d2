package hfmodel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/safetensors"
)

// staticDir writes a Model2Vec-like directory: tensor name [rows, dims],
// an empty tokenizer.json (ReadStatic checks it exists; the artifact
// package reads it) and the given files.
func staticDir(t *testing.T, tensor string, shape []int64, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), map[string][]float32{tensor: make([]float32, n)},
		map[string][]int64{tensor: shape}); err != nil {
		t.Fatal(err)
	}
	files["tokenizer.json"] = "{}"
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReadStaticModel2Vec(t *testing.T) {
	dir := staticDir(t, TensorModel2Vec, []int64{10, 4}, map[string]string{"config.json": `{"normalize": true, "max_length": null}`})
	if !IsStatic(dir) {
		t.Fatal("IsStatic: false for a model2vec directory")
	}
	s, err := ReadStatic(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != StaticModel2Vec || !s.Normalize || !s.DropUnk || s.MaxLength != 0 || s.Rows != 10 || s.Dims != 4 {
		t.Errorf("ReadStatic: %+v; want model2vec, normalize, drop unk, no max_length, 10×4", s)
	}
	dir = staticDir(t, TensorModel2Vec, []int64{10, 4}, map[string]string{"config.json": `{}`})
	if s, err := ReadStatic(dir); err != nil || s.Normalize || s.MaxLength != 512 {
		t.Errorf("config without normalize or max_length: %+v, %v; want model2vec's defaults (false, 512)", s, err)
	}
}

func TestReadStaticEmbedding(t *testing.T) {
	mods := `[{"idx":0,"name":"0","path":"0_StaticEmbedding","type":"sentence_transformers.models.StaticEmbedding"},
		{"idx":1,"name":"1","path":"1_Normalize","type":"sentence_transformers.models.Normalize"}]`
	dir := staticDir(t, TensorStatic, []int64{10, 4}, map[string]string{"modules.json": mods})
	sub := filepath.Join(dir, "0_StaticEmbedding")
	os.MkdirAll(sub, 0o755)
	for _, f := range []string{"model.safetensors", "tokenizer.json"} {
		if err := os.Rename(filepath.Join(dir, f), filepath.Join(sub, f)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := ReadStatic(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != StaticEmbeddings || !s.Normalize || s.DropUnk || s.Weights != filepath.Join(sub, "model.safetensors") {
		t.Errorf("ReadStatic: %+v; want StaticEmbedding in 0_StaticEmbedding, Normalize, no unknown-token drop", s)
	}
}

func TestReadStaticRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		tensor string
		shape  []int64
		files  map[string]string
		want   string
	}{
		"dense after":   {TensorStatic, []int64{4, 2}, map[string]string{"modules.json": `[{"path":"","type":"sentence_transformers.models.StaticEmbedding"},{"path":"2_Dense","type":"sentence_transformers.models.Dense"}]`}, "module 1 is sentence_transformers.models.Dense"},
		"outside":       {TensorStatic, []int64{4, 2}, map[string]string{"modules.json": `[{"path":"../x","type":"sentence_transformers.models.StaticEmbedding"}]`}, "outside the model directory"},
		"rank 1":        {TensorModel2Vec, []int64{8}, map[string]string{"config.json": `{}`}, "want [rows, dims]"},
		"bad maxlength": {TensorModel2Vec, []int64{4, 2}, map[string]string{"config.json": `{"max_length": -3}`}, "max_length -3"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadStatic(staticDir(t, c.tensor, c.shape, c.files))
			if !errors.Is(err, ErrModule) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ReadStatic: %v; want ErrModule naming %q", err, c.want)
			}
		})
	}
}

// TestReadStaticWeightsLength: weights must cover exactly the token ids
// the embeddings (or the mapping) cover.
func TestReadStaticWeightsLength(t *testing.T) {
	dir := staticDir(t, TensorModel2Vec, []int64{4, 2}, map[string]string{"config.json": `{}`})
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"),
		map[string][]float32{TensorModel2Vec: make([]float32, 8), TensorWeights: make([]float32, 3)},
		map[string][]int64{TensorModel2Vec: {4, 2}, TensorWeights: {3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStatic(dir); !errors.Is(err, ErrModule) || !strings.Contains(err.Error(), "3 weights for 4 tokens") {
		t.Errorf("ReadStatic: %v; want ErrModule naming 3 weights for 4 tokens", err)
	}
}
