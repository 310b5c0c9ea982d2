package eval

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-5 }

// Hand-computed: judgements a=2, b=1, c=0; ranking c, a, x, b.
//
//	DCG@10  = 2/log2(3) + 1/log2(5) = 1.261860 + 0.430677 = 1.692536
//	IDCG@10 = 2/log2(2) + 1/log2(3) = 2 + 0.630930        = 2.630930
//	nDCG@10 = 0.643324; MRR@10 = 1/2; Recall@10 = 2/2; Recall@2 = 1/2
func TestMetricsByHand(t *testing.T) {
	judged := map[string]int{"a": 2, "b": 1, "c": 0}
	docs := []string{"c", "a", "x", "b"}
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"nDCG@10", NDCG(docs, judged, 10), 0.643324},
		{"nDCG@1", NDCG(docs, judged, 1), 0},
		{"nDCG@2", NDCG(docs, judged, 2), (2 / math.Log2(3)) / (2 + 1/math.Log2(3))},
		{"MRR@10", MRR(docs, judged, 10), 0.5},
		{"MRR@1", MRR(docs, judged, 1), 0},
		{"Recall@10", Recall(docs, judged, 10), 1},
		{"Recall@2", Recall(docs, judged, 2), 0.5},
		{"nDCG, nothing relevant", NDCG(docs, map[string]int{"c": 0}, 10), 0},
		{"Recall, nothing relevant", Recall(docs, map[string]int{"c": 0}, 10), 0},
		{"nDCG, perfect", NDCG([]string{"a", "b"}, judged, 10), 1},
	} {
		if !near(tc.got, tc.want) {
			t.Errorf("%s = %.6f; want %.6f", tc.name, tc.got, tc.want)
		}
	}
}

// TestEvaluateAverages over the ranked queries the qrels judge: q2 has no
// judgements and is left out; q3 is judged with nothing relevant and counts
// as zero, as trec_eval does.
func TestEvaluateAverages(t *testing.T) {
	qrels := Qrels{"q1": {"a": 2, "b": 1, "c": 0}, "q3": {"z": 0}, "q4": {"k": 1}}
	run := Ranking{"q1": {"c", "a", "x", "b"}, "q2": {"a"}, "q3": {"z"}}
	m := Evaluate(run, qrels)
	if m.Queries != 2 || !near(m.NDCG10, 0.643324/2) || !near(m.MRR10, 0.25) || !near(m.Recall100, 0.5) {
		t.Errorf("got %+v; want 2 queries, nDCG@10 %.6f, MRR@10 0.25, Recall@100 0.5", m, 0.643324/2)
	}
}

// TestReadRunAndQrels: TREC and BEIR TSV forms, the header line skipped,
// documents ordered by score and, on ties, by document id descending (as
// trec_eval does), a bad line named with its file and line.
func TestReadRunAndQrels(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	trec := write("run.trec", "q1 Q0 d1 1 3.0 bm25\nq1 Q0 d3 2 2.0 bm25\nq1 Q0 d2 3 2.0 bm25\nq2 Q0 d9 1 5 bm25\n")
	run, err := ReadRun(trec)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(run["q1"], []string{"d1", "d3", "d2"}) || !slices.Equal(run["q2"], []string{"d9"}) {
		t.Errorf("TREC run %v; want q1 d1 d3 d2 (ties by id descending), q2 d9", run)
	}
	tsv := write("run.tsv", "query-id\tcorpus-id\tscore\nq1\td2\t0.5\nq1\td1\t0.9\n")
	if run, err = ReadRun(tsv); err != nil || !slices.Equal(run["q1"], []string{"d1", "d2"}) {
		t.Errorf("TSV run %v, %v; want q1 d1 d2", run, err)
	}
	qrels, err := ReadQrels(write("qrels.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\n"))
	if err != nil || qrels["q1"]["d2"] != 2 {
		t.Errorf("TSV qrels %v, %v", qrels, err)
	}
	if qrels, err = ReadQrels(write("qrels.trec", "q1 0 d1 1\nq2 0 d4 0\n")); err != nil || qrels["q2"]["d4"] != 0 || len(qrels) != 2 {
		t.Errorf("TREC qrels %v, %v", qrels, err)
	}
	if _, err := ReadRun(write("bad.trec", "q1 Q0 d1 1 3.0 bm25\nq1 d1\n")); err == nil || !strings.Contains(err.Error(), "bad.trec:2") {
		t.Errorf("bad run line: %v; want an error naming bad.trec:2", err)
	}
	if _, err := ReadQrels(write("bad.qrels", "q1 0 d1 high\n")); err == nil || !strings.Contains(err.Error(), "bad.qrels:1") {
		t.Errorf("bad qrels grade: %v; want an error naming bad.qrels:1", err)
	}
}
