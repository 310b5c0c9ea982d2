//go:build cgo

package cli

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/convert/reftest"
)

// spladeRef is examples/models/reference_sparse.py's output: transformers'
// SPLADE vectors of the first SciFact documents.
type spladeRef struct {
	Format   string `json:"format"`
	Name     string `json:"name"`
	Count    int    `json:"count"`
	Pipeline struct {
		MaxSeqLength int `json:"max_seq_length"`
		Vocab        int `json:"vocab"`
	} `json:"pipeline"`
	Docs []struct {
		ID      string    `json:"id"`
		NTokens int32     `json:"n_tokens"`
		Indices []uint32  `json:"indices"`
		Values  []float64 `json:"values"`
	} `json:"docs"`
}

func readSpladeRef(t *testing.T, name string) *spladeRef {
	t.Helper()
	f, err := os.Open(filepath.Join(reftest.Dir(), name+".sparse.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var ref spladeRef
	if err := json.NewDecoder(z).Decode(&ref); err != nil {
		t.Fatalf("%s: %v", f.Name(), err)
	}
	if ref.Format != "synapse reference sparse vectors 1" || ref.Count != len(ref.Docs) || ref.Count == 0 {
		t.Fatalf("%s: format %q, count %d, %d docs; want the sparse reference format and count docs", f.Name(), ref.Format, ref.Count, len(ref.Docs))
	}
	return &ref
}

// spladeTol is how far synapse's SPLADE weights may be from the reference's
// (float32 ONNX Runtime against float32 torch), and the weight below which
// a term may be present on one side only (a logit within rounding of 0).
const spladeTol = 1e-4

// TestRealSplade converts the real SPLADE checkpoint splade-tiny (a
// BertForMaskedLM safetensors directory, the MLM head's decoder tied to the
// word embeddings) on first use, embeds the first 200 SciFact documents with
// `synapse embed --vectors sparse` truncated at 512 tokens, and compares
// every document with transformers' SPLADE of the same text
// (reference_sparse.py): the same token count, the same non-zero terms
// (a term may be on one side only when its weight is below 1e-4), weights
// within 1e-4.
func TestRealSplade(t *testing.T) {
	model := testenv.RealModel(t, "splade-tiny")
	ref := readSpladeRef(t, "splade-tiny")
	dir := t.TempDir()
	in := filepath.Join(dir, "corpus.jsonl")
	headLines(t, testenv.Fixture(t, "corpora", "scifact", "corpus.jsonl"), in, ref.Count)
	out := filepath.Join(dir, "sparse.arrow")
	runSynapseWithin(t, 20*time.Minute, []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}, "embed", in, "-m", model, "-o", out,
		"--vectors", "sparse", "--text-field", "title", "--text-field", "text", "--id-field", "_id", "--truncate",
		"--chunk-tokens", fmt.Sprint(ref.Pipeline.MaxSeqLength-2), "--workers", "2", "--threads", "1", "-q").wantCode(t, exitOK)
	_, rows := readSparse(t, out)
	if len(rows) != ref.Count {
		t.Fatalf("%d rows; want %d (one per document)", len(rows), ref.Count)
	}
	var maxDiff float64
	var worst string
	oneSided, nnz := 0, 0
	for i, r := range rows {
		want := ref.Docs[i]
		if r.ID != want.ID || r.Chunk != 0 {
			t.Fatalf("row %d: id %s chunk %d; want %s chunk 0", i, r.ID, r.Chunk, want.ID)
		}
		if r.NTokens != want.NTokens {
			t.Errorf("document %s: %d tokens; want %d", r.ID, r.NTokens, want.NTokens)
		}
		got := map[uint32]float64{}
		for k, ix := range r.Indices {
			got[ix] = float64(r.Values[k])
		}
		nnz += len(want.Indices)
		diff := func(ix uint32, g, w float64) {
			d := math.Abs(g - w)
			if d > maxDiff {
				maxDiff, worst = d, fmt.Sprintf("document %s term %d: %g; want %g", r.ID, ix, g, w)
			}
		}
		for k, ix := range want.Indices {
			w := want.Values[k]
			g, ok := got[ix]
			delete(got, ix)
			if !ok {
				oneSided++
				if w >= spladeTol {
					t.Errorf("document %s: term %d missing; want weight %g", r.ID, ix, w)
				}
			}
			diff(ix, g, w)
		}
		for ix, g := range got {
			oneSided++
			if g >= spladeTol {
				t.Errorf("document %s: term %d weight %g; want none", r.ID, ix, g)
			}
			diff(ix, g, 0)
		}
	}
	t.Logf("splade-tiny against transformers over %d documents (%d non-zero terms): max abs diff %.3g (%s); %d terms on one side only, each below %g",
		len(rows), nnz, maxDiff, worst, oneSided, spladeTol)
	if maxDiff > spladeTol {
		t.Errorf("max abs diff %g (%s); want ≤ %g", maxDiff, worst, spladeTol)
	}
}

// spladeSciFactNDCG is the nDCG@10 synapse measured for splade-tiny on
// SciFact's test queries (docs/token-outputs.md, 2026-12-04); the weights
// are checked against transformers by TestRealSplade, so this guards the
// retrieval path (sparse embed of queries and corpus, search, eval).
const spladeSciFactNDCG = 0.6466

// TestRealSpladeSciFact embeds SciFact's 5,183 documents (title and text,
// truncated at 512 tokens) and its 300 test queries with splade-tiny
// (--vectors sparse), searches by the sparse dot product and scores the
// run with synapse eval: nDCG@10 within 0.005 of the figure measured.
func TestRealSpladeSciFact(t *testing.T) {
	model := testenv.RealModel(t, "splade-tiny")
	sf := filepath.Join(testenv.Fixtures(t), "corpora", "scifact")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	env := []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	embed := func(in, out string, args ...string) {
		cmd := append([]string{"embed", in, "-m", model, "-o", out, "--vectors", "sparse", "--id-field", "_id", "--truncate",
			"--workers", "2", "--threads", "1", "-q"}, args...)
		runSynapseWithin(t, 30*time.Minute, env, cmd...).wantCode(t, exitOK)
	}
	embed(filepath.Join(sf, "queries-test.jsonl"), p("q.arrow"))
	embed(filepath.Join(sf, "corpus.jsonl"), p("c.arrow"), "--text-field", "title", "--text-field", "text")
	run := p("run.trec")
	runSynapseWithin(t, 10*time.Minute, nil, "search", "--queries", p("q.arrow"), "--corpus", p("c.arrow"), "-k", "100", "-o", run, "-q").wantCode(t, exitOK)
	got := ndcg10(t, run, filepath.Join(sf, "qrels", "test.tsv"))
	t.Logf("splade-tiny: SciFact nDCG@10 %.4f (measured before: %.4f)", got, spladeSciFactNDCG)
	if math.Abs(got-spladeSciFactNDCG) > 0.005 {
		t.Errorf("nDCG@10 %.4f; want within 0.005 of %.4f", got, spladeSciFactNDCG)
	}
}
