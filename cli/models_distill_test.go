package cli

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
)

// TestModelsDistill: models distill makes a Model2Vec directory from an
// embedder (the random-weight DistilBERT, converted): --dims rows over its
// whole vocabulary, which synapse embed then runs through the static
// engine; a text's vector is its tokens' rows' mean, normalized, so a text
// and the same text twice agree. An existing -o, a bad --sif and a GGUF
// model (no tokenizer.json) are refused (exit 2), nothing written.
func TestModelsDistill(t *testing.T) {
	dir := t.TempDir()
	env := []string{"SYNAPSE_MODELS=" + filepath.Join(dir, "models"), "SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	out := filepath.Join(dir, "static")
	res := runSynapse(t, env, "models", "distill", "../model/convert/testdata/distilbert-tiny", "-o", out, "--dims", "8")
	res.wantCode(t, exitOK)
	if !strings.Contains(res.stdout, "304 tokens × 8 dims (PCA from 32,") {
		t.Errorf("stdout %q; want the vocabulary (304 tokens) and the dims (8 of 32)", res.stdout)
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
	} {
		r := runSynapse(t, env, tc.args...)
		r.wantCode(t, exitUsage)
		if !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%s: stderr %q; want it to say %q", strings.Join(tc.args, " "), r.stderr, tc.says)
		}
	}
	for _, p := range []string{out + "2", out + "3"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a refused distill left %s", p)
		}
	}
}
