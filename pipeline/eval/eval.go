// Package eval scores rankings against relevance judgements as trec_eval
// and pytrec_eval do: nDCG@k with graded gains and a log2 discount, MRR@k
// and Recall@k, averaged over the queries that have judgements.
package eval

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/synapse-embed/synapse/io/objstore"
)

// Qrels are relevance judgements: query id → document id → grade (0: not
// relevant; above 0: relevant, the grade being the gain).
type Qrels map[string]map[string]int

// Ranking is an ordered list of document ids per query, best first.
type Ranking map[string][]string

// Metrics are the averages Evaluate reports.
type Metrics struct {
	NDCG10, MRR10, Recall10, Recall100 float64
	Queries                            int // queries averaged over: ranked and judged
}

// Evaluate scores run against qrels, averaging over the queries of run that
// qrels judges (as trec_eval does without -c).
func Evaluate(run Ranking, qrels Qrels) Metrics {
	var m Metrics
	for qid, docs := range run {
		judged, ok := qrels[qid]
		if !ok {
			continue
		}
		m.Queries++
		m.NDCG10 += NDCG(docs, judged, 10)
		m.MRR10 += MRR(docs, judged, 10)
		m.Recall10 += Recall(docs, judged, 10)
		m.Recall100 += Recall(docs, judged, 100)
	}
	if m.Queries > 0 {
		n := float64(m.Queries)
		m.NDCG10, m.MRR10, m.Recall10, m.Recall100 = m.NDCG10/n, m.MRR10/n, m.Recall10/n, m.Recall100/n
	}
	return m
}

// NDCG is nDCG@k: Σ gain/log2(rank+1) over the first k documents, divided
// by the same sum over the judgements sorted by grade (0 when nothing is
// relevant).
func NDCG(docs []string, judged map[string]int, k int) float64 {
	var dcg float64
	for i, d := range docs[:min(k, len(docs))] {
		if g := judged[d]; g > 0 {
			dcg += float64(g) / math.Log2(float64(i+2))
		}
	}
	var grades []int
	for _, g := range judged {
		if g > 0 {
			grades = append(grades, g)
		}
	}
	slices.SortFunc(grades, func(a, b int) int { return b - a })
	var ideal float64
	for i, g := range grades[:min(k, len(grades))] {
		ideal += float64(g) / math.Log2(float64(i+2))
	}
	if ideal == 0 {
		return 0
	}
	return dcg / ideal
}

// MRR is the reciprocal rank of the first relevant document within the
// first k, 0 when there is none.
func MRR(docs []string, judged map[string]int, k int) float64 {
	for i, d := range docs[:min(k, len(docs))] {
		if judged[d] > 0 {
			return 1 / float64(i+1)
		}
	}
	return 0
}

// Recall is the share of the relevant documents among the first k (0 when
// nothing is relevant).
func Recall(docs []string, judged map[string]int, k int) float64 {
	relevant := 0
	for _, g := range judged {
		if g > 0 {
			relevant++
		}
	}
	if relevant == 0 {
		return 0
	}
	found := 0
	for _, d := range docs[:min(k, len(docs))] {
		if judged[d] > 0 {
			found++
		}
	}
	return float64(found) / float64(relevant)
}

// ReadQrels reads TREC qrels ("qid 0 docid grade") or BEIR TSV
// ("query-id corpus-id score", with or without its header line).
func ReadQrels(path string) (Qrels, error) {
	q := Qrels{}
	err := eachLine(path, func(f []string, line int) error {
		var qid, doc, grade string
		switch len(f) {
		case 4:
			qid, doc, grade = f[0], f[2], f[3]
		case 3:
			qid, doc, grade = f[0], f[1], f[2]
		default:
			return fmt.Errorf("%d fields: want qid 0 docid grade or query-id corpus-id score", len(f))
		}
		g, err := strconv.Atoi(grade)
		if err != nil {
			return fmt.Errorf("grade %q is not an integer", grade)
		}
		if q[qid] == nil {
			q[qid] = map[string]int{}
		}
		q[qid][doc] = g
		return nil
	})
	return q, err
}

// ReadRun reads a TREC run ("qid Q0 docid rank score tag") or a BEIR TSV
// run ("query-id corpus-id score") and orders each query's documents as
// trec_eval does: by score, highest first, ties by document id in
// descending order.
func ReadRun(path string) (Ranking, error) {
	type entry struct {
		doc   string
		score float64
	}
	byQuery := map[string][]entry{}
	err := eachLine(path, func(f []string, line int) error {
		var qid, doc, score string
		switch len(f) {
		case 6:
			qid, doc, score = f[0], f[2], f[4]
		case 3:
			qid, doc, score = f[0], f[1], f[2]
		default:
			return fmt.Errorf("%d fields: want a TREC run line or query-id corpus-id score", len(f))
		}
		s, err := strconv.ParseFloat(score, 64)
		if err != nil {
			return fmt.Errorf("score %q is not a number", score)
		}
		byQuery[qid] = append(byQuery[qid], entry{doc, s})
		return nil
	})
	if err != nil {
		return nil, err
	}
	run := Ranking{}
	for qid, es := range byQuery {
		slices.SortStableFunc(es, func(a, b entry) int {
			if c := cmp.Compare(b.score, a.score); c != 0 {
				return c
			}
			return strings.Compare(b.doc, a.doc)
		})
		for _, e := range es {
			run[qid] = append(run[qid], e.doc)
		}
	}
	return run, nil
}

// eachLine calls fn with the fields of every non-blank line of path, the
// BEIR header line skipped; an error names the file and line.
func eachLine(path string, fn func(fields []string, line int) error) error {
	var f io.ReadCloser
	var err error
	if objstore.IsURL(path) { // one streaming GET
		f, err = objstore.Open(context.Background(), path)
	} else {
		f, err = os.Open(path)
	}
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	return scanLines(f, path, fn)
}

func scanLines(r io.Reader, path string, fn func(fields []string, line int) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || (line == 1 && (f[0] == "query-id" || f[0] == "query_id")) {
			continue
		}
		if err := fn(f, line); err != nil {
			return fmt.Errorf("eval: %s:%d: %w", path, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("eval: %s: %w", path, err)
	}
	return nil
}

// Report prints metrics side by side, one column per named ranking.
func Report(w io.Writer, names []string, ms []Metrics) {
	fmt.Fprintf(w, "%-12s", "metric")
	for _, n := range names {
		fmt.Fprintf(w, " %12s", n)
	}
	fmt.Fprintln(w)
	rows := []struct {
		name string
		get  func(Metrics) float64
	}{
		{"nDCG@10", func(m Metrics) float64 { return m.NDCG10 }},
		{"MRR@10", func(m Metrics) float64 { return m.MRR10 }},
		{"Recall@10", func(m Metrics) float64 { return m.Recall10 }},
		{"Recall@100", func(m Metrics) float64 { return m.Recall100 }},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%-12s", r.name)
		for _, m := range ms {
			fmt.Fprintf(w, " %12.4f", r.get(m))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%-12s", "queries")
	for _, m := range ms {
		fmt.Fprintf(w, " %12d", m.Queries)
	}
	fmt.Fprintln(w)
}
