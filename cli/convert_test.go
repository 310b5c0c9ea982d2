//go:build cgo

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/convert/converttest"
	"github.com/synapse-embed/synapse/model/convert/reftest"
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
	for run, want := range []string{"model: converted " + model + " to ONNX into the model cache as tiny-st-bert", "model: " + model + ": reusing its ONNX conversion in the model cache"} {
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
// worker, to ONNX and with --format gguf to GGUF; the GGUF entry embeds
// (llama.cpp) near the float64 encoder. On this random 16-wide model
// llama.cpp's vectors stray to cosine 0.89–0.96 (the ONNX conversion's
// are 0.99999; the real MiniLM's GGUF conversion is 0.999999 to its ONNX
// one and is held to 0.9999 in TestRealConvertMiniLM), so the floor here
// only catches a wrong layout (a transposed matrix gives ~0).
func TestModelsAddConverts(t *testing.T) {
	work := t.TempDir()
	model, b := convertedDir(t, work)
	store := filepath.Join(work, "models")
	env := []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t), "SYNAPSE_LLAMA_LIB=" + testenv.LlamaLib(t), "SYNAPSE_MODELS=" + store}
	s, err := modelcache.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ format, name string }{{"onnx", "st-converted"}, {"gguf", "st-converted-gguf"}} {
		r := runSynapse(t, env, "models", "add", model, "--name", tc.name, "--format", tc.format)
		r.wantCode(t, exitOK)
		if !strings.Contains(r.stderr, "converting") || !strings.Contains(r.stderr, "validating the conversion") {
			t.Errorf("models add --format %s: stderr does not report converting and validating:\n%s", tc.format, r.stderr)
		}
		e, err := s.Lookup(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind != modelcache.KindEmbed || e.Dims != 16 || e.Format() != tc.format {
			t.Errorf("entry kind %s, dims %d, format %s; want embed, 16, %s", e.Kind, e.Dims, e.Format(), tc.format)
		}
	}
	// --quantize with --format gguf: a GGUF file type (not ONNX's int8), made by llama.cpp from the conversion.
	qr := runSynapse(t, env, "models", "add", model, "--name", "st-converted-gguf", "--format", "gguf", "--quantize", "q8_0", "--rounds", "1")
	qr.wantCode(t, exitOK)
	if e, err := s.Lookup("st-converted-gguf:q8_0"); err != nil || e.Quantization != "Q8_0" || e.Format() != "gguf" {
		t.Errorf("models add --format gguf --quantize q8_0: entry %+v, %v; want a Q8_0 GGUF variant\n%s", e, err, qr.stderr)
	}
	texts := []string{"the cell", "protein gene study results of the cells", "hello world, and a gene"}
	var docs []map[string]any
	for i, s := range texts {
		docs = append(docs, map[string]any{"id": fmt.Sprint(i), "text": s})
	}
	in := filepath.Join(work, "in.jsonl")
	writeJSONL(t, in, docs)
	out := filepath.Join(work, "gguf.arrow")
	runSynapse(t, env, "embed", in, "-m", "st-converted-gguf", "-o", out, "--workers", "1").wantCode(t, exitOK)
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
		c := cosine64(row.Emb, want)
		t.Logf("GGUF text %d: cosine %.7f to the float64 encoder", i, c)
		if c < 0.85 {
			t.Errorf("GGUF text %d: cosine %.7f to the float64 encoder; want ≥ 0.85", i, c)
		}
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
	wantRefusedUncached(t, work, model, "pytorch_model.bin", "model.safetensors", "synapse models pull")
}

// TestRealConvertMiniLM embeds the reference texts with `-m` naming
// all-MiniLM-L6-v2's Hugging Face directory (safetensors, converted to
// ONNX on first use), then with its GGUF conversion (models add --format
// gguf, run by llama.cpp), and compares both with sentence-transformers'
// vectors: min cosine ≥ 0.9999.
func TestRealConvertMiniLM(t *testing.T) {
	store := filepath.Join(t.TempDir(), "models")
	t.Setenv("SYNAPSE_MODELS", store)
	t.Run("onnx", func(t *testing.T) {
		checkReal(t, realEmbedding{model: "all-MiniLM-L6-v2", checks: []refCheck{{"all-MiniLM-L6-v2", 0.9999}}})
	})
	// synapse's int8 of the conversion (7-bit weights: the same vectors on
	// every CPU class, docs/onnx.md), made by `embed --quantize int8` at the
	// default --min-cosine, against sentence-transformers' float vectors:
	// 0.9887 at worst over the 1,000 documents on the Xeon it was measured
	// on, and so on every CPU.
	t.Run("int8", func(t *testing.T) {
		checkReal(t, realEmbedding{model: "all-MiniLM-L6-v2", args: []string{"--quantize", "int8"}, checks: []refCheck{{"all-MiniLM-L6-v2", 0.985}}})
	})
	t.Run("gguf", func(t *testing.T) {
		dir := testenv.RealModel(t, "all-MiniLM-L6-v2")
		ref, err := reftest.Read("all-MiniLM-L6-v2")
		if err != nil {
			t.Fatal(err)
		}
		// llama.cpp's library only: the GGUF conversion needs no ONNX Runtime.
		runSynapse(t, nil, "models", "add", dir, "--format", "gguf", "--name", "minilm-gguf").wantCode(t, exitOK)
		a := ref.Compare(realEmbed(t, t.TempDir(), "minilm-gguf", ref))
		t.Logf("GGUF conversion of all-MiniLM-L6-v2 against sentence-transformers: min cosine %.6f (id %s), mean %.6f over %d texts", a.Min, a.Worst, a.Mean, ref.Count-a.Missing)
		if a.Missing > 0 || a.Min < 0.9999 {
			t.Errorf("min cosine %.6f, %d missing; want min ≥ 0.9999, none missing", a.Min, a.Missing)
		}
	})
}

// writeST6 writes sentence-transformers 6's files for a directory of
// weights: modules.json naming its modules by file
// (sentence_transformers.base.modules.transformer.Transformer, …),
// 1_Pooling/config.json with pooling_mode and embedding_dimension,
// 2_Normalize, a sentence_bert_config.json without max_seq_length, and the
// length as the tokenizer's model_max_length, as 6.3's save writes them.
func writeST6(t *testing.T, dir string, hidden int, pooling string, maxLen int) {
	t.Helper()
	files := map[string]string{
		"modules.json": `[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
 {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling"},
 {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.base.modules.normalize.Normalize"}]`,
		"1_Pooling/config.json": fmt.Sprintf(`{"embedding_dimension": %d, "pooling_mode": %q, "include_prompt": true}`, hidden, pooling),
		"sentence_bert_config.json": `{"transformer_task": "feature-extraction", "modality_config": {"text": {"method": "forward",
 "method_output_name": "last_hidden_state"}}, "module_output_name": "token_embeddings"}`,
		"tokenizer_config.json": fmt.Sprintf(`{"do_lower_case": false, "model_max_length": %d, "tokenizer_class": "BertTokenizer"}`, maxLen),
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "2_Normalize"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestConvertSentenceTransformers6: a directory saved by
// sentence-transformers 6 (modules named by file, pooling_mode, the length
// in tokenizer_config.json) converts and embeds as that version computes:
// CLS pooling, normalized, chunks cut at model_max_length. The same
// weights with other modules convert, into the same model cache, to an
// entry of their own and to their own vectors; the first directory still
// finds its own.
func TestConvertSentenceTransformers6(t *testing.T) {
	work := t.TempDir()
	b := converttest.Tiny()
	model := filepath.Join(work, "st6")
	if err := b.WriteDir(model); err != nil {
		t.Fatal(err)
	}
	writeST6(t, model, b.Hidden, "cls", 12)
	texts := []string{"the cell", "protein gene study results of the cells and the gene in a study"}
	in := filepath.Join(work, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "0", "text": texts[0]}, {"id": "1", "text": texts[1]}})
	env := append(ortEnv(t), "SYNAPSE_MODELS="+filepath.Join(work, "models"))
	out := filepath.Join(work, "out.arrow")
	r := runSynapse(t, env, "embed", in, "-m", model, "-o", out, "--truncate")
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "max_seq_length 12") || !strings.Contains(r.stdout, "Pooling(cls) + Normalize") {
		t.Errorf("stdout does not say Pooling(cls) + Normalize and max_seq_length 12:\n%s", r.stdout)
	}
	tok, err := tokenize.LoadHF(filepath.Join(model, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, rows := readOutput(t, out)
	for _, row := range rows {
		var i int
		fmt.Sscan(row.ID, &i)
		ids := tok.Tokenize(texts[i], tokenize.Options{AddSpecial: true}).IDs()
		if len(ids) > 12 { // truncated as sentence-transformers truncates: [CLS] 10 tokens [SEP]
			ids = append(ids[:11:11], ids[len(ids)-1])
		}
		want := onnxtest.STReference(b.HiddenStates(ids), []string{"cls"}, nil, true)
		if c := cosine64(row.Emb, want); c < 0.99999 {
			t.Errorf("text %d: cosine %.7f to the float64 encoder's CLS vector; want ≥ 0.99999", i, c)
		}
	}

	mean := filepath.Join(work, "st6-mean")
	if err := os.CopyFS(mean, os.DirFS(model)); err != nil {
		t.Fatal(err)
	}
	writeST6(t, mean, b.Hidden, "mean", 12)
	r = runSynapse(t, env, "embed", in, "-m", mean, "-o", filepath.Join(work, "mean.arrow"), "--truncate")
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stderr, "converted "+mean) {
		t.Errorf("the same weights with other modules: stderr %q; want a conversion of its own", r.stderr)
	}
	_, rows = readOutput(t, filepath.Join(work, "mean.arrow"))
	ids := tok.Tokenize(texts[0], tokenize.Options{AddSpecial: true}).IDs()
	if c := cosine64(rows[0].Emb, onnxtest.STReference(b.HiddenStates(ids), []string{"mean"}, nil, true)); rows[0].ID != "0" || c < 0.99999 {
		t.Errorf("the mean-pooled directory beside the CLS one: row %s cosine %.7f to the mean vector; want ≥ 0.99999", rows[0].ID, c)
	}
	s, err := modelcache.Open(filepath.Join(work, "models"))
	if err != nil {
		t.Fatal(err)
	}
	if es, err := s.Entries(); err != nil || len(es) != 2 || es[0].Digest != es[1].Digest {
		t.Errorf("model cache entries %+v (%v); want two of one model file", es, err)
	}
	r = runSynapse(t, env, "embed", in, "-m", model, "-o", out, "--truncate") // the CLS directory again: its own entry
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "Pooling(cls)") || !strings.Contains(r.stderr, "reusing") {
		t.Errorf("the CLS directory after the mean one: stdout %q, stderr %q; want its CLS conversion reused", r.stdout, r.stderr)
	}
}

// TestEmbedConvertedModelName: the model's name in the outputs and the
// start line is the folder -m names, not the name (nor the path) of the
// folder the same weights were first converted from into the cache.
func TestEmbedConvertedModelName(t *testing.T) {
	work := t.TempDir()
	src, _ := convertedDir(t, work)
	first, second := filepath.Join(work, "a", "model"), filepath.Join(work, "b", "minilm-here")
	for _, d := range []string{first, second} {
		if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(d, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
	}
	env := append(ortEnv(t), "SYNAPSE_MODELS="+filepath.Join(work, "models"))
	in := filepath.Join(work, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "1", "text": "the cell"}})
	runSynapse(t, env, "embed", in, "-m", first, "-o", filepath.Join(work, "first.arrow")).wantCode(t, exitOK)
	out := filepath.Join(work, "second.arrow")
	r := runSynapse(t, env, "embed", in, "-m", second, "-o", out)
	r.wantCode(t, exitOK)
	sc, _ := readOutput(t, out)
	if got, _ := sc.Metadata().GetValue("synapse.model_name"); got != "minilm-here" {
		t.Errorf("synapse.model_name %q; want minilm-here (the folder -m named)", got)
	}
	if !strings.Contains(r.stderr, "embedding with minilm-here ") || strings.Contains(r.stderr+r.stdout, first) {
		t.Errorf("the start line does not name minilm-here, or names the first conversion's folder %s:\n%s", first, r.stderr)
	}
}
