package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/synapse-embed/synapse/internal/testenv"
	"github.com/synapse-embed/synapse/internal/testmodels"
	"github.com/synapse-embed/synapse/internal/tokenize"
	"github.com/synapse-embed/synapse/internal/wordvec"
)

// TestWordVectorModel: the model gen-model learns from a corpus runs in
// llama.cpp, and what llama.cpp computes for a text is what the package
// says it is: the SIF-weighted mean of the text's token vectors, normalized
// (computed here from the learned vectors, in float64).
func TestWordVectorModel(t *testing.T) {
	dir := t.TempDir()
	in, model, out := filepath.Join(dir, "c.jsonl"), filepath.Join(dir, "wv.gguf"), filepath.Join(dir, "v.arrow")
	docs := testmodels.Corpus(200)
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.Text
	}
	writeJSONL(t, in, corpus(len(docs)))
	const dims = 30
	runSynapse(t, nil, "gen-model", "--kind", "word-vectors", "--train", in, "--text-field", "text",
		"--dims", "30", "--out", model).wantCode(t, 0)
	runSynapse(t, nil, "embed", in, "-m", model, "--text-field", "text", "-o", out).wantCode(t, 0)

	built, err := wordvec.Build(texts, wordvec.Config{Dims: dims, Seed: 1}, "x")
	if err != nil {
		t.Fatal(err)
	}
	_, rows := readOutput(t, out)
	byID := rowsByID(rows)
	checked := 0
	for i, d := range docs {
		chunks := byID[d.ID]
		if len(chunks) != 1 {
			continue // a long text is cut into windows; the single-chunk ones suffice
		}
		want := sifMean(built, texts[i])
		emb := chunks[0].Emb
		if len(emb) != dims+2 || emb[dims] != 0 || emb[dims+1] != 0 {
			t.Fatalf("doc %s: %d dims ending %v; want %d + 2 sink dims that are zero", d.ID, len(emb), emb[dims:], dims)
		}
		if c := testenv.Cosine(emb[:dims], want); c < 0.9999 {
			t.Errorf("doc %s: cosine %.6f to the SIF-weighted mean of its word vectors; want ≥ 0.9999", d.ID, c)
		}
		checked++
	}
	if checked < 50 {
		t.Fatalf("only %d single-chunk documents checked", checked)
	}
}

// sifMean is Σ weight·vector over the tokens of text, normalized.
func sifMean(b *wordvec.Built, text string) []float32 {
	sum := make([]float64, len(b.Vectors.Unit[0]))
	for _, id := range b.Tokenizer.Tokenize(text, tokenize.Options{}).IDs() {
		w := float64(b.Vectors.Weight[id])
		for j, x := range b.Vectors.Unit[id] {
			sum[j] += w * float64(x)
		}
	}
	var ss float64
	for _, x := range sum {
		ss += x * x
	}
	out := make([]float32, len(sum))
	for j, x := range sum {
		out[j] = float32(x / math.Sqrt(ss))
	}
	return out
}
