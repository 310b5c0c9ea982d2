//go:build cgo

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/convert/converttest"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// `synapse embed -m DIR` and `synapse models add DIR` on Hugging Face
// directories with safetensors weights (package convert).

// convertedDir writes a generated sentence-transformers checkpoint (mean
// pooling, normalized) as safetensors into dir/name.
func convertedDir(t *testing.T, dir string) (string, converttest.BERT) {
	t.Helper()
	b := converttest.Tiny()
	p := filepath.Join(dir, "tiny-st-bert")
	if err := b.WriteDir(p); err != nil {
		t.Fatal(err)
	}
	if _, err := onnxtest.WriteST(p, onnxtest.ST{Pooling: onnxtest.PoolingConfig(b.Hidden, true, "mean"), Normalize: true, MaxSeqLength: 24}); err != nil {
		t.Fatal(err)
	}
	return p, b
}

// TestEmbedConvertsSafetensors: the first run converts the directory into
// the model cache and says so, its vectors are the float64 encoder's (mean
// pooled, normalized, as modules.json says); the second reuses the entry
// and gives the same bytes; models add of the directory finds it cached.
func TestEmbedConvertsSafetensors(t *testing.T) {
	work := t.TempDir()
	model, b := convertedDir(t, work)
	store := filepath.Join(work, "models")
	env := append(ortEnv(t), "SYNAPSE_MODELS="+store)
	texts := []string{"the cell", "protein gene study results of the cells", "hello world, and a gene"}
	var docs []map[string]any
	for i, s := range texts {
		docs = append(docs, map[string]any{"id": fmt.Sprint(i), "text": s})
	}
	in := filepath.Join(work, "in.jsonl")
	writeJSONL(t, in, docs)
	var outs [2][]byte
	for run, want := range []string{"model: converted " + model + " to ONNX into the model cache as tiny-st-bert", "model: reusing tiny-st-bert"} {
		out := filepath.Join(work, fmt.Sprintf("out%d.arrow", run))
		r := runSynapse(t, env, "embed", in, "-m", model, "-o", out, "--workers", "2")
		r.wantCode(t, exitOK)
		if !strings.Contains(r.stderr, want) {
			t.Errorf("run %d: stderr does not say %q:\n%s", run+1, want, r.stderr)
		}
		var err error
		if outs[run], err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
		if run > 0 {
			continue
		}
		tok, err := tokenize.LoadHF(filepath.Join(model, "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		_, rows := readOutput(t, out)
		if len(rows) != len(texts) {
			t.Fatalf("%d rows; want %d", len(rows), len(texts))
		}
		for _, row := range rows {
			var i int
			fmt.Sscan(row.ID, &i)
			ids := tok.Tokenize(texts[i], tokenize.Options{AddSpecial: true}).IDs()
			want := onnxtest.STReference(b.HiddenStates(ids), []string{"mean"}, nil, true)
			if c := cosine64(row.Emb, want); c < 0.99999 {
				t.Errorf("text %d: cosine %.7f to the float64 encoder; want ≥ 0.99999", i, c)
			}
		}
	}
	if string(outs[0]) != string(outs[1]) {
		t.Error("the run reusing the conversion wrote other bytes than the converting run")
	}
	s, err := modelcache.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := s.Entries()
	if err != nil || len(entries) != 1 || entries[0].Stored != modelcache.StoredConverted || entries[0].SourcePath != model {
		t.Fatalf("cache entries %+v (%v); want one converted from %s", entries, err, model)
	}
	r := runSynapse(t, env, "models", "add", model)
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "tiny-st-bert") {
		t.Errorf("models add of the converted directory: stdout %q does not name tiny-st-bert", r.stdout)
	}
}

// TestModelsAddConverts: models add DIR converts and validates in a
// worker; --format gguf is refused (exit 2) and adds nothing.
func TestModelsAddConverts(t *testing.T) {
	work := t.TempDir()
	model, _ := convertedDir(t, work)
	store := filepath.Join(work, "models")
	env := append(ortEnv(t), "SYNAPSE_MODELS="+store)
	r := runSynapse(t, env, "models", "add", model, "--format", "gguf")
	r.wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, "gguf") {
		t.Errorf("--format gguf: stderr does not say why:\n%s", r.stderr)
	}
	r = runSynapse(t, env, "models", "add", model, "--name", "st-converted")
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stderr, "converting") || !strings.Contains(r.stderr, "validating the conversion") {
		t.Errorf("models add: stderr does not report converting and validating:\n%s", r.stderr)
	}
	s, err := modelcache.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Lookup("st-converted")
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != modelcache.KindEmbed || e.Dims != 16 || e.Format() != "onnx" {
		t.Errorf("entry kind %s, dims %d, format %s; want embed, 16, onnx", e.Kind, e.Dims, e.Format())
	}
}

// TestConvertRefusesPickle: a directory with pytorch_model.bin and no
// safetensors exits 2 from embed and models add, saying what to fetch,
// and the model cache stays empty.
func TestConvertRefusesPickle(t *testing.T) {
	work := t.TempDir()
	model, _ := convertedDir(t, work)
	if err := os.Rename(filepath.Join(model, "model.safetensors"), filepath.Join(model, "pytorch_model.bin")); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(work, "models")
	env := append(ortEnv(t), "SYNAPSE_MODELS="+store)
	in := filepath.Join(work, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "a", "text": "the cell"}})
	for _, args := range [][]string{{"embed", in, "-m", model, "-o", filepath.Join(work, "out.arrow")}, {"models", "add", model}} {
		r := runSynapse(t, env, args...)
		r.wantCode(t, exitUsage)
		for _, w := range []string{"pytorch_model.bin", "model.safetensors", "synapse models pull"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("synapse %s: stderr does not name %q:\n%s", args[0], w, r.stderr)
			}
		}
	}
	s, err := modelcache.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := s.Entries(); len(entries) != 0 {
		t.Errorf("cache entries %v; want none", entries)
	}
}

// TestRealConvertMiniLM embeds the reference texts with `-m` naming
// all-MiniLM-L6-v2's Hugging Face directory (safetensors, converted on
// first use) and compares with sentence-transformers' vectors.
func TestRealConvertMiniLM(t *testing.T) {
	t.Setenv("SYNAPSE_MODELS", filepath.Join(t.TempDir(), "models"))
	checkReal(t, realEmbedding{model: "all-MiniLM-L6-v2", checks: []refCheck{{"all-MiniLM-L6-v2", 0.9999}}})
}
