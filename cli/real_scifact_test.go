//go:build cgo

package cli

import (
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
)

// mtebSciFactMiniLM is the nDCG@10 MTEB publishes for all-MiniLM-L6-v2 on
// SciFact (title and text, truncated at 256 tokens).
const mtebSciFactMiniLM = 0.6451

// sciFactModel is the all-MiniLM-L6-v2 that TestRealSciFact runs.
var sciFactModel = "all-MiniLM-L6-v2"

// TestRealSciFact embeds SciFact's 5,183 documents (title and text,
// --truncate at all-MiniLM-L6-v2's max_seq_length) and its 300 test
// queries, searches and scores the run against qrels/test.tsv with synapse
// eval: nDCG@10 within 0.005 of MTEB's published 0.6451. The int8 and
// binary outputs (binary alone and --rescore 4 against the float32 one)
// are reported, and held to floors far below a working search.
func TestRealSciFact(t *testing.T) {
	model := testenv.RealModel(t, sciFactModel)
	sf := filepath.Join(testenv.Fixtures(t), "corpora", "scifact")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	env := []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	embed := func(in, out string, args ...string) {
		cmd := append([]string{"embed", in, "-m", model, "-o", out, "--id-field", "_id", "--truncate", "--chunk-tokens", "254",
			"--workers", "2", "--threads", "1", "-q"}, args...)
		runSynapseWithin(t, 30*time.Minute, env, cmd...).wantCode(t, exitOK)
	}
	corpus := filepath.Join(sf, "corpus.jsonl")
	fields := []string{"--text-field", "title", "--text-field", "text"}
	embed(filepath.Join(sf, "queries-test.jsonl"), p("q.arrow"))
	embed(corpus, p("float32.arrow"), fields...)
	embed(corpus, p("int8.arrow"), append(fields, "--dtype", "int8", "--calibration", p("float32.arrow"))...)
	embed(corpus, p("binary.arrow"), append(fields, "--dtype", "binary")...)
	for _, c := range []struct {
		name  string
		args  []string
		floor float64 // the least nDCG@10 accepted; 0: within 0.005 of MTEB's
	}{
		{"float32", []string{"--corpus", p("float32.arrow")}, 0},
		{"int8", []string{"--corpus", p("int8.arrow")}, 0.60},
		{"binary", []string{"--corpus", p("binary.arrow")}, 0.45},
		{"binary --rescore 4", []string{"--corpus", p("binary.arrow"), "--rescore", "4", "--rescore-with", p("float32.arrow")}, 0.60},
	} {
		run := p(c.name + ".trec")
		runSynapseWithin(t, 10*time.Minute, nil, append([]string{"search", "--queries", p("q.arrow"), "-k", "100", "-o", run, "-q"}, c.args...)...).wantCode(t, exitOK)
		got := ndcg10(t, run, filepath.Join(sf, "qrels", "test.tsv"))
		t.Logf("%s: SciFact nDCG@10 %.4f (MTEB publishes %.4f for float32)", c.name, got, mtebSciFactMiniLM)
		switch {
		case c.floor == 0 && math.Abs(got-mtebSciFactMiniLM) > 0.005:
			t.Errorf("%s: nDCG@10 %.4f; want within 0.005 of MTEB's %.4f", c.name, got, mtebSciFactMiniLM)
		case got < c.floor:
			t.Errorf("%s: nDCG@10 %.4f; want at least %.2f", c.name, got, c.floor)
		}
	}
}

// ndcgRE is synapse eval's nDCG@10 line.
var ndcgRE = regexp.MustCompile(`(?m)^nDCG@10\s+([0-9.]+)`)

// ndcg10 scores run against qrels with synapse eval.
func ndcg10(t *testing.T, run, qrels string) float64 {
	t.Helper()
	res := runSynapse(t, nil, "eval", "--run", run, "--qrels", qrels)
	res.wantCode(t, exitOK)
	m := ndcgRE.FindStringSubmatch(res.stdout)
	if m == nil {
		t.Fatalf("no nDCG@10 line in synapse eval's output:\n%s", res.stdout)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
