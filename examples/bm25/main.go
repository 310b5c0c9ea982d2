// Command bm25 is the lexical baseline of the SciFact example: Okapi BM25
// (k1 = 0.9, b = 0.4, Anserini's defaults) over lower-cased runs of letters
// and digits, without stemming or stop words, written as a TREC run that
// `synapse eval` scores beside synapse's own searches.
//
//	go run ./examples/bm25 -corpus corpus.jsonl -queries queries.jsonl -k 100 > bm25.trec
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"unicode"
)

// BM25 parameters (Anserini's defaults for BEIR).
const (
	k1 = 0.9
	b  = 0.4
)

// doc is one JSON Lines record: its id and the text of its fields.
type doc struct {
	id, text string
}

func main() {
	corpus := flag.String("corpus", "", "JSON Lines corpus (_id or id, title, text)")
	queries := flag.String("queries", "", "JSON Lines queries (_id or id, text)")
	k := flag.Int("k", 100, "documents per query")
	flag.Parse()
	if *corpus == "" || *queries == "" {
		fmt.Fprintln(os.Stderr, "bm25: -corpus and -queries are required")
		os.Exit(2)
	}
	docs, err := readDocs(*corpus, "title", "text")
	if err == nil {
		var qs []doc
		if qs, err = readDocs(*queries, "text"); err == nil {
			err = writeRun(os.Stdout, newIndex(docs), qs, *k)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bm25:", err)
		os.Exit(1)
	}
}

// terms are the lower-cased runs of letters and digits of s.
func terms(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// index is an inverted index: per term, the documents holding it and how often.
type index struct {
	ids      []string
	length   []float64
	avgLen   float64
	postings map[string][]posting
}

type posting struct {
	doc int
	tf  float64
}

func newIndex(docs []doc) *index {
	ix := &index{postings: map[string][]posting{}}
	var total float64
	for i, d := range docs {
		tf := map[string]float64{}
		ts := terms(d.text)
		for _, t := range ts {
			tf[t]++
		}
		for t, n := range tf {
			ix.postings[t] = append(ix.postings[t], posting{i, n})
		}
		ix.ids = append(ix.ids, d.id)
		ix.length = append(ix.length, float64(len(ts)))
		total += float64(len(ts))
	}
	ix.avgLen = total / float64(max(1, len(docs)))
	return ix
}

// scores are BM25's for query q over every document holding one of its
// terms (each distinct query term counted once, as Anserini does).
func (ix *index) scores(q string) map[int]float64 {
	out := map[int]float64{}
	n := float64(len(ix.ids))
	seen := map[string]bool{}
	for _, t := range terms(q) {
		if seen[t] {
			continue
		}
		seen[t] = true
		ps := ix.postings[t]
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range ps {
			norm := k1 * (1 - b + b*ix.length[p.doc]/ix.avgLen)
			out[p.doc] += idf * p.tf * (k1 + 1) / (p.tf + norm)
		}
	}
	return out
}

// writeRun writes the top k documents of each query, ties broken by
// document id.
func writeRun(w io.Writer, ix *index, qs []doc, k int) error {
	bw := bufio.NewWriter(w)
	for _, q := range qs {
		s := ix.scores(q.text)
		hits := make([]int, 0, len(s))
		for d := range s {
			hits = append(hits, d)
		}
		sort.Slice(hits, func(i, j int) bool {
			if s[hits[i]] != s[hits[j]] {
				return s[hits[i]] > s[hits[j]]
			}
			return ix.ids[hits[i]] < ix.ids[hits[j]]
		})
		for r, d := range hits[:min(k, len(hits))] {
			fmt.Fprintf(bw, "%s Q0 %s %d %.6f bm25\n", q.id, ix.ids[d], r+1, s[d])
		}
	}
	return bw.Flush()
}

// readDocs reads a JSON Lines file's records: id from _id or id, text the
// fields joined by a space.
func readDocs(path string, fields ...string) ([]doc, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var docs []doc
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		id, _ := rec["_id"].(string)
		if id == "" {
			id, _ = rec["id"].(string)
		}
		if id == "" {
			return nil, fmt.Errorf("%s:%d: no _id or id", path, line)
		}
		var parts []string
		for _, f := range fields {
			if s, ok := rec[f].(string); ok {
				parts = append(parts, s)
			}
		}
		docs = append(docs, doc{id, strings.Join(parts, " ")})
	}
	return docs, sc.Err()
}
