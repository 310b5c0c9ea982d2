//go:build cgo

package cli

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/model/testmodels"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// `synapse rerank` with ONNX cross-encoders: the reference one (the ONNX
// form of ref-bert-rerank.gguf) and generated ones.

// ortEnv is the environment of ONNX runs: ONNX Runtime, and no llama.cpp.
func ortEnv(t *testing.T) []string {
	return []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t), "SYNAPSE_LLAMA_LIB=" + t.TempDir()}
}

// TestRerankONNXReference scores the reference pairs with the ONNX
// cross-encoder through every input form, within 0.02 of transformers, the
// same bytes for 1 and 2 workers and every form; and the GGUF form of the
// same weights gives the same scores (within 0.02) and the same ranking.
func TestRerankONNXReference(t *testing.T) {
	model := testenv.Fixture(t, "models", "ref-bert-rerank-onnx")
	gguf := testenv.Fixture(t, "models", "ref-bert-rerank.gguf")
	qs := rerankReference(t)
	dir := t.TempDir()
	forms := writeRerankForms(t, dir, qs)
	want := map[string]float32{}
	for qi, q := range qs {
		for k, s := range q.scores {
			want[q.id+" "+docID(qi, k)] = s
		}
	}
	var first []byte
	for _, run := range []struct {
		form    string
		workers int
	}{{"grouped.jsonl", 1}, {"grouped.jsonl", 2}, {"grouped.parquet", 2}, {"flat.jsonl", 2}, {"run", 2}} {
		out := filepath.Join(dir, fmt.Sprintf("%s-%d.jsonl", run.form, run.workers))
		args := append(append([]string{"rerank"}, forms[run.form]...), "-m", model, "-o", out, "--workers", strconv.Itoa(run.workers), "--threads", "1")
		runSynapse(t, ortEnv(t), args...).wantCode(t, exitOK)
		rows := readRerankJSONL(t, out)
		if len(rows) != len(want) {
			t.Fatalf("%s: %d rows; want %d", run.form, len(rows), len(want))
		}
		for _, r := range rows {
			if w, ok := want[r.QueryID+" "+r.DocID]; !ok || math.Abs(float64(r.Score-w)) > 0.02 {
				t.Errorf("%s: %s %s scored %.4f; want %.4f ± 0.02", run.form, r.QueryID, r.DocID, r.Score, w)
			}
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case run.form == "run": // input scores come from the run
		case first == nil:
			first = data
		case string(data) != string(first):
			t.Errorf("%s with %d workers: the output differs from grouped.jsonl with 1 worker", run.form, run.workers)
		}
	}
	ggufOut := filepath.Join(dir, "gguf.jsonl")
	runSynapse(t, nil, append([]string{"rerank", forms["grouped.jsonl"][0]}, "-m", gguf, "-o", ggufOut, "--workers", "1", "--threads", "1")...).wantCode(t, exitOK)
	compareRankings(t, readRerankJSONL(t, filepath.Join(dir, "grouped.jsonl-1.jsonl")), readRerankJSONL(t, ggufOut))
}

// compareRankings checks that two rerank outputs give every pair the same
// score within 0.02 and every query the same order of documents.
func compareRankings(t *testing.T, onnxRows, ggufRows []rerankRow) {
	t.Helper()
	order := func(rows []rerankRow) map[string][]string {
		by := map[string][]rerankRow{}
		for _, r := range rows {
			by[r.QueryID] = append(by[r.QueryID], r)
		}
		out := map[string][]string{}
		for q, rs := range by {
			sort.SliceStable(rs, func(i, j int) bool { return rs[i].Score > rs[j].Score })
			for _, r := range rs {
				out[q] = append(out[q], r.DocID)
			}
		}
		return out
	}
	scores := map[string]float32{}
	for _, r := range ggufRows {
		scores[r.QueryID+" "+r.DocID] = r.Score
	}
	if len(onnxRows) != len(ggufRows) {
		t.Fatalf("ONNX: %d rows, GGUF: %d", len(onnxRows), len(ggufRows))
	}
	for _, r := range onnxRows {
		if g, ok := scores[r.QueryID+" "+r.DocID]; !ok || math.Abs(float64(r.Score-g)) > 0.02 {
			t.Errorf("%s %s: ONNX %.4f, GGUF %.4f; want within 0.02", r.QueryID, r.DocID, r.Score, g)
		}
	}
	og := order(ggufRows)
	for q, docs := range order(onnxRows) {
		if !slices.Equal(docs, og[q]) {
			t.Errorf("query %s: ONNX ranks %v, GGUF %v", q, docs, og[q])
		}
	}
}

// writeCrossModel writes a generated cross-encoder over the test
// vocabulary (testmodels.Words) into a fresh directory.
// positions is its context.
func writeCrossModel(t *testing.T, positions, labels int, names ...string) (string, onnxtest.CrossEncoder) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), fmt.Sprintf("cross-%d", labels))
	c, err := onnxtest.WriteCrossDir(dir, onnxtest.CrossDir{Words: testmodels.Words(), Labels: names,
		CrossEncoder: onnxtest.CrossEncoder{Hidden: 16, Positions: positions, Labels: labels, Seed: 11}})
	if err != nil {
		t.Fatal(err)
	}
	return dir, c
}

// TestRerankONNXGenerated: with a generated cross-encoder (no fixtures),
// every score is the logits computed independently over [CLS] q [SEP] d
// [SEP] with token types 0 and 1, the document (never the query) cut to the
// context; two labels score logits[1] - logits[0]; three are refused before
// any work.
func TestRerankONNXGenerated(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "q.jsonl")
	docs := testmodels.Corpus(30)
	type pair struct{ q, d string }
	var pairs []pair
	var rows []map[string]any
	for q := range 6 {
		var cands []map[string]any
		for c := range 4 {
			d := docs[6+q*4+c]
			text := d.Text
			if c == 0 { // a short document, which fits whole
				text = d.Title
			}
			cands = append(cands, map[string]any{"id": d.ID, "text": text})
			pairs = append(pairs, pair{docs[q].Title, text})
		}
		rows = append(rows, map[string]any{"query_id": fmt.Sprintf("q%d", q), "query": docs[q].Title, "candidates": cands})
	}
	writeJSONL(t, in, rows)
	for _, labels := range []int{1, 2} {
		model, c := writeCrossModel(t, 96, labels)
		tok, err := tokenize.LoadHF(filepath.Join(model, "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, fmt.Sprintf("out-%d.jsonl", labels))
		runSynapse(t, ortEnv(t), "rerank", in, "-m", model, "-o", out, "--workers", "2", "--threads", "1").wantCode(t, exitOK)
		got := readRerankJSONL(t, out)
		if len(got) != len(pairs) {
			t.Fatalf("%d labels: %d rows; want %d", labels, len(got), len(pairs))
		}
		cut := 0
		for i, r := range got { // the output keeps the input order
			q := tok.Tokenize(pairs[i].q, tokenize.Options{}).IDs()
			d := tok.Tokenize(pairs[i].d, tokenize.Options{}).IDs()
			room := c.Positions - 3 - len(q)
			truncated := len(d) > room
			if truncated {
				d, cut = d[:room], cut+1
			}
			ids := slices.Concat([]int32{2}, q, []int32{3}, d, []int32{3}) // [CLS] 2, [SEP] 3
			types := slices.Concat(make([]int32, len(q)+2), slices.Repeat([]int32{1}, len(d)+1))
			lg := c.Logits(ids, types)
			want := lg[0]
			if labels == 2 {
				want = lg[1] - lg[0]
			}
			if math.Abs(float64(r.Score)-want) > 1e-4 || r.Truncated != truncated {
				t.Errorf("%d labels, row %d: score %.6f, truncated %t; want %.6f, %t", labels, i, r.Score, r.Truncated, want, truncated)
			}
		}
		if cut == 0 || cut == len(pairs) {
			t.Errorf("%d of %d documents were cut: the test wants some cut and some whole", cut, len(pairs))
		}
	}
	three, _ := writeCrossModel(t, 96, 3, "contradiction", "entailment", "neutral")
	out := filepath.Join(dir, "three.jsonl")
	res := runSynapse(t, ortEnv(t), "rerank", in, "-m", three, "-o", out)
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "3 labels") {
		t.Errorf("a 3-label classifier: stderr does not say why:\n%s", res.stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused run wrote %s", out)
	}
}

// TestRerankONNXDrills: the fault drills of the GGUF reranker (an engine
// abort or hang on one pair; synapse killed, then --resume) on a generated
// ONNX cross-encoder.
func TestRerankONNXDrills(t *testing.T) {
	model, _ := writeCrossModel(t, 512, 1) // the poisoned word ends a document: no document is cut
	tok, err := tokenize.LoadHF(filepath.Join(model, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Run("poison", func(t *testing.T) {
		in := filepath.Join(dir, "poison.jsonl")
		poison := poisonRerankWith(t, tok, in, poisonN, poisonK, 7, 3)
		rerankPoisonDrills(t, model, in, poison, ortEnv(t))
	})
	t.Run("resume", func(t *testing.T) {
		in := filepath.Join(dir, "resume.jsonl")
		poisonRerankWith(t, tok, in, resumeN, resumeK, -1, -1)
		rerankResumeDrill(t, model, in, ortEnv(t))
	})
}
