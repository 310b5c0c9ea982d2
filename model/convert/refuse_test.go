package convert_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/convert"
	"github.com/synapse-embed/synapse/model/convert/converttest"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/safetensors"
)

// editConfig rewrites dir's config.json with edit applied.
func editConfig(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	convert.EditJSON(t, filepath.Join(dir, "config.json"), edit)
}

// rewriteWeights rewrites dir's model.safetensors with edit applied.
func rewriteWeights(t *testing.T, dir string, edit func(converttest.Tensors)) {
	t.Helper()
	w := converttest.Tiny().Tensors()
	edit(w)
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), w.Values, w.Shapes); err != nil {
		t.Fatal(err)
	}
}

// TestRefusals: what the converter cannot convert is ErrRefused, naming
// the file and the tensor or setting, and leaves no entry in the cache
// (nor anything staged).
func TestRefusals(t *testing.T) {
	const q = "encoder.layer.1.attention.self.query.weight"
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  []string
	}{
		{"unknown architecture", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { c["architectures"] = []string{"GPT2LMHeadModel"} })
		}, []string{"config.json", "GPT2LMHeadModel", "BertModel"}},
		{"DeBERTa v1", func(t *testing.T, dir string) { // the supported list and the ways out, named
			editConfig(t, dir, func(c map[string]any) {
				c["architectures"], c["model_type"] = []string{"DebertaForSequenceClassification"}, "deberta"
			})
		}, []string{"config.json", "architecture DebertaForSequenceClassification;", "DebertaV2ForSequenceClassification", "DistilBertModel", "MPNetModel", "ModernBertModel", "Qwen3Model", "ONNX export", "onnx/model.onnx", "GGUF"}},
		{"missing tensor", func(t *testing.T, dir string) {
			rewriteWeights(t, dir, func(w converttest.Tensors) { delete(w.Values, q); delete(w.Shapes, q) })
		}, []string{"model.safetensors", "no tensor " + q}},
		{"wrong shape", func(t *testing.T, dir string) {
			rewriteWeights(t, dir, func(w converttest.Tensors) { w.Values[q], w.Shapes[q] = w.Values[q][:16*15], []int64{16, 15} })
		}, []string{"model.safetensors", q, "[16 15]", "[16 16]"}},
		{"more layers than weights", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { c["num_hidden_layers"] = 3 })
		}, []string{"model.safetensors", "no tensor encoder.layer.2."}},
		{"pickle only", func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, "model.safetensors"), filepath.Join(dir, "pytorch_model.bin")); err != nil {
				t.Fatal(err)
			}
		}, []string{"pytorch_model.bin", "pickle", "model.safetensors", "synapse models pull", "huggingface-cli download"}},
		{"truncated safetensors", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors")
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, st.Size()-100); err != nil {
				t.Fatal(err)
			}
		}, []string{"model.safetensors", "not a valid safetensors file", "outside the"}},
		{"corrupt header", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("\x10\x00\x00\x00\x00\x00\x00\x00{not json at all"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"model.safetensors", "not a valid safetensors file"}},
		{"gelu_new activation", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { c["hidden_act"] = "gelu_new" })
		}, []string{"config.json", "hidden_act", "gelu_new"}},
		{"no tokenizer", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "tokenizer.json")); err != nil {
				t.Fatal(err)
			}
		}, []string{"no tokenizer.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "model")
			if err := converttest.Tiny().WriteDir(dir); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, dir)
			st, err := modelcache.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if !convert.IsSource(dir) {
				t.Fatalf("IsSource(%s) = false; want true", dir)
			}
			_, err = convert.Cached(context.Background(), st, dir, convert.Options{})
			if !errors.Is(err, convert.ErrRefused) {
				t.Fatalf("got %v; want ErrRefused", err)
			}
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			entries, err := st.Entries()
			if err != nil || len(entries) != 0 {
				t.Errorf("cache entries %v (%v); want none", entries, err)
			}
			staged, _ := filepath.Glob(filepath.Join(st.Root, "tmp", "*"))
			for _, p := range staged {
				if fi, err := os.Stat(p); err == nil && fi.IsDir() {
					t.Errorf("staging directory %s left behind", p)
				}
			}
		})
	}
}

// TestCachedReuses: a second conversion of the same directory reuses the
// entry; a changed config.json converts again.
func TestCachedReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny-bert")
	if err := converttest.Tiny().WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	st, err := modelcache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := convert.Cached(ctx, st, dir, convert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if first.Reused || first.Entry.Name != "tiny-bert" || first.Entry.Stored != modelcache.StoredConverted || first.Entry.Dims != 16 {
		t.Errorf("first conversion: reused %v, entry %+v; want a new entry tiny-bert, stored converted, 16 dims", first.Reused, first.Entry)
	}
	for _, f := range []string{"model.onnx", "tokenizer.json", "config.json"} {
		if _, err := os.Stat(filepath.Join(first.Entry.Dir(), f)); err != nil {
			t.Errorf("converted entry: %v", err)
		}
	}
	again, err := convert.Cached(ctx, st, dir, convert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reused || again.Entry.Digest != first.Entry.Digest {
		t.Errorf("second conversion: reused %v, digest %s; want the first's %s reused", again.Reused, again.Entry.Digest, first.Entry.Digest)
	}
	editConfig(t, dir, func(c map[string]any) { c["layer_norm_eps"] = 1e-5 })
	changed, err := convert.Cached(ctx, st, dir, convert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if changed.Reused || changed.Key == first.Key || changed.Entry.Digest == first.Entry.Digest {
		t.Errorf("after editing config.json: reused %v, key %s (first %s); want a new conversion", changed.Reused, changed.Key, first.Key)
	}
	if changed.Entry.Name == first.Entry.Name {
		t.Errorf("second entry's name %q is the first's", changed.Entry.Name)
	}
}

// TestGGUF: a BERT converts to a GGUF file with llama.cpp's metadata and
// the vocabulary spelled as llama.cpp spells it; RoBERTa and Dense modules
// are refused for GGUF.
func TestGGUF(t *testing.T) {
	dir := t.TempDir()
	if err := converttest.Tiny().WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	src, err := convert.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := src.WriteGGUF(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	n, _ := f.Uint("bert.block_count")
	if f.Architecture() != "bert" || n != 2 || len(toks) != len(converttest.Vocab()) || toks[2] != "[CLS]" || toks[5] != "\u2581the" {
		t.Errorf("architecture %s, %d blocks, %d tokens (2: %q, 5: %q); want bert, 2, %d, [CLS], ▁the",
			f.Architecture(), n, len(toks), toks[2], toks[5], len(converttest.Vocab()))
	}
	if _, ok := f.Tensor("blk.1.ffn_down.weight"); !ok {
		t.Error("no blk.1.ffn_down.weight")
	}

	roberta := converttest.Tiny()
	roberta.Arch, roberta.Offset, roberta.PadID, roberta.Prefix = "XLMRobertaModel", true, 1, "roberta."
	rdir := t.TempDir()
	if err := roberta.WriteDir(rdir); err != nil {
		t.Fatal(err)
	}
	if src, err = convert.Open(rdir); err != nil {
		t.Fatal(err)
	}
	if err := src.WriteGGUF(filepath.Join(t.TempDir(), "model.gguf")); !errors.Is(err, convert.ErrRefused) || !strings.Contains(err.Error(), "XLMRobertaModel") {
		t.Errorf("RoBERTa to GGUF: got %v; want ErrRefused naming XLMRobertaModel", err)
	}
}
