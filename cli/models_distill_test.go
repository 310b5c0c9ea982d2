package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/safetensors"
)

// TestModelsDistill: models distill makes a Model2Vec directory from an
// embedder (the random-weight DistilBERT, converted): --dims rows over its
// vocabulary less [CLS], [SEP] and [MASK], which synapse embed then runs through the static
// engine; a text's vector is its tokens' rows' mean, normalized, so a text
// and the same text twice agree. An existing -o, a bad --sif, a GGUF
// model (no tokenizer.json) and --dims above the model's width are refused
// (exit 2), nothing written.
func TestModelsDistill(t *testing.T) {
	dir := t.TempDir()
	env := []string{"SYNAPSE_MODELS=" + filepath.Join(dir, "models"), "SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	out := filepath.Join(dir, "static")
	res := runSynapse(t, env, "models", "distill", "../model/convert/testdata/distilbert-tiny", "-o", out, "--dims", "8")
	res.wantCode(t, exitOK)
	if !strings.Contains(res.stdout, "301 tokens × 8 dims (3 unused and special tokens left out; PCA from 32,") {
		t.Errorf("stdout %q; want the vocabulary (304 less [CLS], [SEP], [MASK]) and the dims (8 of 32)", res.stdout)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("the distilled model lacks %s: %v", f, err)
		}
	}
	in := filepath.Join(dir, "docs.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "a", "text": "stem cells repair the heart"},
		{"id": "b", "text": "stem cells repair the heart stem cells repair the heart"}, {"id": "c", "text": "blood pressure fell"}})
	vecs := filepath.Join(dir, "v.arrow")
	runSynapse(t, env, embedArgs(in, out, vecs)...).wantCode(t, exitOK)
	got := readVecFile(t, vecs)
	if got.dims != 8 || len(got.ids) != 3 {
		t.Fatalf("%d vectors of %d dims; want 3 of 8", len(got.ids), got.dims)
	}
	cos := func(i, j int) float64 {
		a, b := got.floats(i), got.floats(j)
		var d, na, nb float64
		for k := range a {
			d, na, nb = d+float64(a[k])*float64(b[k]), na+float64(a[k])*float64(a[k]), nb+float64(b[k])*float64(b[k])
		}
		return d / math.Sqrt(na*nb)
	}
	if c := cos(0, 1); c < 0.99999 {
		t.Errorf("a text and itself twice: cosine %.6f; want 1 (a mean of the same rows)", c)
	}
	if c := cos(0, 2); c > 0.9999 {
		t.Errorf("two different texts: cosine %.6f; want them apart", c)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"models", "distill", "../model/convert/testdata/distilbert-tiny", "-o", out}, "exists"},
		{[]string{"models", "distill", "../model/convert/testdata/distilbert-tiny", "-o", out + "2", "--sif", "2"}, "--sif"},
		{[]string{"models", "distill", tinyModel(t), "-o", out + "3"}, "no tokenizer.json"},
		{[]string{"models", "distill", "../model/convert/testdata/distilbert-tiny", "-o", out + "4", "--dims", "33"}, "have 32 values"},
	} {
		r := runSynapse(t, env, tc.args...)
		r.wantCode(t, exitUsage)
		if !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%s: stderr %q; want it to say %q", strings.Join(tc.args, " "), r.stderr, tc.says)
		}
	}
	for _, p := range []string{out + "2", out + "3", out + "4"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a refused distill left %s", p)
		}
	}
}

// TestModelsDistillReference: synapse's distill of the random-weight
// DistilBERT equals model2vec 0.10's (examples/models/reference_distill.py,
// --dims 8, float32): the same vocabulary (its special tokens but [PAD] and
// [UNK] left out, renumbered) and, token by token, the same row (cosine ≥
// 0.9999, norm within 0.1%). The rows are PCA scores of the transformer's
// raw token states, Zipf-weighted by rank among the kept tokens: token
// states normalized first (the model's Normalize module), or the whole
// vocabulary kept, give other rows.
func TestModelsDistillReference(t *testing.T) {
	var ref struct {
		Tokens  []string    `json:"tokens"`
		Vectors [][]float64 `json:"vectors"`
	}
	b, err := os.ReadFile("../model/convert/testdata/distilbert-tiny.distill.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := []string{"SYNAPSE_MODELS=" + filepath.Join(dir, "models"), "SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	out := filepath.Join(dir, "static")
	res := runSynapse(t, env, "models", "distill", "../model/convert/testdata/distilbert-tiny", "-o", out, "--dims", "8")
	res.wantCode(t, exitOK)
	var tok struct {
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
	}
	if b, err = os.ReadFile(filepath.Join(out, "tokenizer.json")); err == nil {
		err = json.Unmarshal(b, &tok)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(tok.Model.Vocab) != len(ref.Tokens) {
		t.Fatalf("%d tokens; model2vec keeps %d", len(tok.Model.Vocab), len(ref.Tokens))
	}
	for i, tk := range ref.Tokens {
		if id, ok := tok.Model.Vocab[tk]; !ok || id != i {
			t.Fatalf("token %q: id %d (present %v); model2vec's %d", tk, id, ok, i)
		}
	}
	f, err := safetensors.Open(filepath.Join(out, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, shape, err := f.Float32("embeddings")
	if err != nil {
		t.Fatal(err)
	}
	if len(shape) != 2 || int(shape[0]) != len(ref.Tokens) || shape[1] != 8 {
		t.Fatalf("embeddings %v; want [%d 8]", shape, len(ref.Tokens))
	}
	worst, worstNorm := 1.0, 0.0
	for i, want := range ref.Vectors {
		var d, na, nb float64
		for k, w := range want {
			g := float64(rows[i*8+k])
			d, na, nb = d+g*w, na+g*g, nb+w*w
		}
		worst = min(worst, d/math.Sqrt(na*nb))
		worstNorm = max(worstNorm, math.Abs(math.Sqrt(na/nb)-1))
	}
	if worst < 0.9999 || worstNorm > 1e-3 {
		t.Errorf("rows against model2vec's: min cosine %.6f (want ≥ 0.9999), max norm difference %.2g (want ≤ 0.001)", worst, worstNorm)
	}
}
