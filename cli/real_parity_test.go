//go:build cgo

package cli

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/convert/reftest"
)

// realEmbedding is a real embedding model of `make real-models` checked
// against committed references (model/convert/reftest).
type realEmbedding struct {
	model  string     // its directory under .cache/models
	args   []string   // what makes synapse embed as the reference did, besides --truncate
	checks []refCheck // the first names the texts and their truncation
}

// refCheck is one reference a model's vectors must agree with: the least
// cosine over its texts (not the mean) at least min.
type refCheck struct {
	ref string
	min float64
}

// realEmbed embeds the reference's texts (the first 1,000 SciFact
// documents, title and text) with synapse as the reference did (truncated
// at max_seq_length) and returns the vectors by id.
func realEmbed(t *testing.T, dir, model string, ref *reftest.Reference, args ...string) map[string][]float32 {
	t.Helper()
	in := filepath.Join(dir, "corpus.jsonl")
	headLines(t, testenv.Fixture(t, "corpora", "scifact", "corpus.jsonl"), in, ref.Count)
	out := filepath.Join(dir, filepath.Base(model)+".arrow")
	cmd := append([]string{"embed", in, "-m", model, "-o", out, "--text-field", "title", "--text-field", "text", "--id-field", "_id",
		"--truncate", "--chunk-tokens", strconv.Itoa(ref.Pipeline.MaxSeqLength - 2), "--workers", "2", "--threads", "1", "-q"}, args...)
	if ref.Pipeline.Prefix != "" {
		cmd = append(cmd, "--prefix", ref.Pipeline.Prefix)
	}
	runSynapseWithin(t, 20*time.Minute, []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}, cmd...).wantCode(t, exitOK)
	_, rows := readOutput(t, out)
	got := map[string][]float32{}
	for _, r := range rows {
		if r.Chunk != 0 {
			t.Fatalf("%s: document %s has chunk %d; --truncate gives one", model, r.ID, r.Chunk)
		}
		got[r.ID] = r.Emb
	}
	return got
}

// TestRealPublisherONNX embeds with the ONNX exports that registries ship
// (langchain4j's all-MiniLM-L6-v2 fp32 and int8, e5-small-v2 int8,
// bge-small-en-v1.5 fp32) and compares with sentence-transformers' encode
// of all-MiniLM-L6-v2 and with ONNX Runtime's own run of each graph
// (reference.py): an fp32 export must give its reference's vectors (min
// cosine 0.9999); bge-small pools the [CLS] row, which its directory
// cannot say (no sentence-transformers files), so the run gives it. An int8
// graph quantizes its activations per batch (DynamicQuantizeLinear), so
// its vectors depend on what it was batched with — the reference padded
// batches of 32, synapse runs each sequence alone: its figures are
// reported, against floors that catch a broken tokenizer or pooling
// (which fall far below).
func TestRealPublisherONNX(t *testing.T) {
	for _, m := range []realEmbedding{
		{model: "all-MiniLM-L6-v2-onnx", checks: []refCheck{{"all-MiniLM-L6-v2", 0.9999}, {"all-MiniLM-L6-v2-onnx", 0.9999}}},
		{model: "all-MiniLM-L6-v2-onnx-q", checks: []refCheck{{"all-MiniLM-L6-v2-onnx-q", 0.98}, {"all-MiniLM-L6-v2", 0.95}}},
		{model: "e5-small-v2-onnx-q", checks: []refCheck{{"e5-small-v2-onnx-q", 0.98}}},
		{model: "bge-small-en-v1.5-onnx", args: []string{"--pooling", "cls"}, checks: []refCheck{{"bge-small-en-v1.5-onnx", 0.9999}}},
	} {
		t.Run(m.model, func(t *testing.T) {
			checkReal(t, m)
		})
	}
}

// checkReal embeds with m's model and checks and reports its agreement
// with each reference.
func checkReal(t *testing.T, m realEmbedding) {
	t.Helper()
	model := testenv.RealModel(t, m.model)
	first, err := reftest.Read(m.checks[0].ref)
	if err != nil {
		t.Fatal(err)
	}
	got := realEmbed(t, t.TempDir(), model, first, m.args...)
	for _, c := range m.checks {
		ref, err := reftest.Read(c.ref)
		if err != nil {
			t.Fatal(err)
		}
		a := ref.Compare(got)
		line := fmt.Sprintf("%s against %s: min cosine %.6f (id %s), mean %.6f over %d texts", m.model, c.ref, a.Min, a.Worst, a.Mean, ref.Count-a.Missing)
		t.Log(line)
		switch {
		case a.Missing > 0:
			t.Errorf("%s: %d of the reference's ids have no vector", line, a.Missing)
		case a.Min < c.min:
			t.Errorf("%s; want min ≥ %v", line, c.min)
		}
	}
}
