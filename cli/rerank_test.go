package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/testmodels"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// End-to-end tests of `synapse rerank`: the real binary and workers, the
// reference cross-encoder where scores are compared with transformers, a
// generated one (testmodels.Reranker) everywhere else.

// rerankRow is one row of a rerank output read from JSON Lines.
type rerankRow struct {
	QueryID    string   `json:"query_id"`
	DocID      string   `json:"doc_id"`
	Score      float32  `json:"score"`
	Rank       int32    `json:"rank"`
	InputRank  int32    `json:"input_rank"`
	InputScore *float32 `json:"input_score"`
	Truncated  bool     `json:"truncated"`
}

func readRerankJSONL(t *testing.T, path string) []rerankRow {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []rerankRow
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r rerankRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rows = append(rows, r)
	}
	return rows
}

var recordsRE = regexp.MustCompile(`records read\s+(\d+) = (\d+) scored \+ (\d+) in errors`)

// rerankCounts parses the summary's "records read N = S scored + F in errors".
func rerankCounts(t *testing.T, r embedResult) (read, scored, failed int) {
	t.Helper()
	m := recordsRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no records-read line in the summary:\n%s\n%s", r.stdout, r.stderr)
	}
	read, _ = strconv.Atoi(m[1])
	scored, _ = strconv.Atoi(m[2])
	failed, _ = strconv.Atoi(m[3])
	return read, scored, failed
}

// refQuery is a query of the reference pairs with its documents and scores.
type refQuery struct {
	id, text string
	docs     []string
	scores   []float32
}

// rerankReference groups the reference pairs (reference/rerank.json) by query.
func rerankReference(t *testing.T) []refQuery {
	t.Helper()
	var ref struct {
		Items []struct {
			Query, Doc string
			Score      float32
		}
	}
	data, err := os.ReadFile(testenv.Fixture(t, "reference", "rerank.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	var qs []refQuery
	for _, it := range ref.Items {
		if len(qs) == 0 || qs[len(qs)-1].text != it.Query {
			qs = append(qs, refQuery{id: fmt.Sprintf("q%d", len(qs)), text: it.Query})
		}
		q := &qs[len(qs)-1]
		q.docs, q.scores = append(q.docs, it.Doc), append(q.scores, it.Score)
	}
	return qs
}

func docID(q, k int) string { return fmt.Sprintf("d%d-%d", q, k) }

// writeRerankForms writes queries in every input form: grouped JSONL and
// Parquet, flat pairs, and a run with its queries and corpus files.
func writeRerankForms(t *testing.T, dir string, qs []refQuery) map[string][]string {
	t.Helper()
	var grouped, flat, queries, corpus []map[string]any
	var run strings.Builder
	for qi, q := range qs {
		var cands []map[string]any
		for k, d := range q.docs {
			cands = append(cands, map[string]any{"id": docID(qi, k), "text": d})
			flat = append(flat, map[string]any{"query_id": q.id, "query": q.text, "doc_id": docID(qi, k), "text": d})
			corpus = append(corpus, map[string]any{"_id": docID(qi, k), "text": d})
			fmt.Fprintf(&run, "%s Q0 %s %d %d bm25\n", q.id, docID(qi, k), k+1, 100-k)
		}
		grouped = append(grouped, map[string]any{"query_id": q.id, "query": q.text, "candidates": cands})
		queries = append(queries, map[string]any{"_id": q.id, "text": q.text})
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	writeJSONL(t, p("grouped.jsonl"), grouped)
	writeJSONL(t, p("flat.jsonl"), flat)
	writeJSONL(t, p("queries.jsonl"), queries)
	writeJSONL(t, p("corpus.jsonl"), corpus)
	if err := os.WriteFile(p("run.trec"), []byte(run.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	writeGroupedParquet(t, p("grouped.parquet"), grouped)
	return map[string][]string{
		"grouped.jsonl":   {p("grouped.jsonl")},
		"grouped.parquet": {p("grouped.parquet")},
		"flat.jsonl":      {p("flat.jsonl")},
		"run":             {"--run", p("run.trec"), "--queries", p("queries.jsonl"), "--corpus", p("corpus.jsonl")},
	}
}

// writeGroupedParquet writes grouped rows with a list<struct> column.
func writeGroupedParquet(t *testing.T, path string, rows []map[string]any) {
	t.Helper()
	cand := arrow.StructOf(arrow.Field{Name: "id", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "text", Type: arrow.BinaryTypes.String})
	sc := arrow.NewSchema([]arrow.Field{{Name: "query_id", Type: arrow.BinaryTypes.String}, {Name: "query", Type: arrow.BinaryTypes.String},
		{Name: "candidates", Type: arrow.ListOf(cand)}}, nil)
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	for _, r := range rows {
		enc.Encode(r)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader("["+strings.Join(strings.Split(strings.TrimSpace(js.String()), "\n"), ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	writeRecord(t, path, rec)
}

// TestRerankReference scores the reference pairs through every input form:
// within 0.02 of transformers, and the same bytes for 1, 2 and 3 workers.
func TestRerankReference(t *testing.T) {
	model := testenv.Fixture(t, "models", "ref-bert-rerank.gguf")
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
	for _, form := range []string{"grouped.jsonl", "grouped.parquet", "flat.jsonl", "run"} {
		for _, workers := range []int{1, 2, 3} {
			if form != "grouped.jsonl" && workers != 2 {
				continue
			}
			out := filepath.Join(dir, fmt.Sprintf("%s-%d.jsonl", form, workers))
			args := append([]string{"rerank"}, forms[form]...)
			res := runSynapse(t, nil, append(args, "-m", model, "-o", out, "--workers", strconv.Itoa(workers), "--threads", "1")...)
			res.wantCode(t, exitOK)
			rows := readRerankJSONL(t, out)
			if len(rows) != len(want) {
				t.Fatalf("%s: %d rows; want %d", form, len(rows), len(want))
			}
			for _, r := range rows {
				w, ok := want[r.QueryID+" "+r.DocID]
				if !ok || math.Abs(float64(r.Score-w)) > 0.02 {
					t.Errorf("%s: %s %s scored %.4f; want %.4f ± 0.02", form, r.QueryID, r.DocID, r.Score, w)
				}
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if form == "run" { // input scores come from the run
				continue
			}
			if first == nil {
				first = data
			} else if !bytes.Equal(data, first) {
				t.Errorf("%s with %d workers: the output differs from grouped.jsonl with 1 worker", form, workers)
			}
		}
	}
}

// poisonRerank writes n generated queries of k candidates each, the
// candidate poisonDoc of query poisonQuery holding a word no other text
// holds; it returns the word's token id in testmodels.Reranker's vocabulary.
func poisonRerank(t *testing.T, path string, n, k, poisonQuery, poisonDoc int) int32 {
	t.Helper()
	tok, err := tokenize.Load(testmodels.Reranker(t))
	if err != nil {
		t.Fatal(err)
	}
	return poisonRerankWith(t, tok, path, n, k, poisonQuery, poisonDoc)
}

// poisonRerankWith is poisonRerank for a model with tokenizer tok.
func poisonRerankWith(t *testing.T, tok tokenize.Tokenizer, path string, n, k, poisonQuery, poisonDoc int) int32 {
	t.Helper()
	docs := testmodels.Corpus(n * (k + 1))
	words := testmodels.Words()
	word := words[len(words)-1]
	var rows []map[string]any
	for q := range n {
		var cands []map[string]any
		for c := range k {
			d := docs[q*(k+1)+1+c]
			text := d.Text
			if poisonQuery >= 0 && strings.Contains(" "+strings.ToLower(text)+" ", " "+word+" ") {
				t.Fatalf("the poison word %q occurs in the corpus", word)
			}
			if q == poisonQuery && c == poisonDoc {
				text += " " + word
			}
			cands = append(cands, map[string]any{"id": d.ID, "title": d.Title, "text": text, "score": float32(k - c)})
		}
		rows = append(rows, map[string]any{"query_id": fmt.Sprintf("q%d", q), "query": docs[q*(k+1)].Title, "candidates": cands})
	}
	writeJSONL(t, path, rows)
	ids := tok.Tokenize(word, tokenize.Options{}).IDs()
	if len(ids) != 1 {
		t.Fatalf("poison word %q is %d tokens; want 1", word, len(ids))
	}
	return ids[0]
}

// TestRerankPoisonPair: an engine abort (or hang) on a token that one
// candidate holds puts exactly that pair in the errors file, with the
// worker's log; every other pair is scored.
func TestRerankPoisonPair(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "q.jsonl")
	poison := poisonRerank(t, in, poisonN, poisonK, 7, 3)
	rerankPoisonDrills(t, testmodels.Reranker(t), in, poison, nil)
}

// The poisoned input of the drills: poisonN queries of poisonK candidates,
// query 7's candidate 3 poisoned.
const poisonN, poisonK = 12, 5

// rerankPoisonDrills runs the abort and hang drills on the poisoned pair of
// in (poison is its token id in model's vocabulary); env is the workers'.
func rerankPoisonDrills(t *testing.T, model, in string, poison int32, env []string) {
	t.Helper()
	const n, k = poisonN, poisonK
	dir := t.TempDir()
	for _, tc := range []struct {
		drill, reason string
		args          []string
	}{
		{"abort-on-token", "engine_crashed", nil},
		{"hang-on-token", "engine_timeout", []string{"--deadline", "3s", "--deadline-per-token", "0", "--deadline-stretch", "2", "--batch-tokens", "400"}},
	} {
		t.Run(tc.drill, func(t *testing.T) {
			out := filepath.Join(dir, tc.drill+".jsonl")
			args := append([]string{"rerank", in, "-m", model, "-o", out, "--workers", "2", "--threads", "1",
				"--chaos", fmt.Sprintf("%s=%d", tc.drill, poison)}, tc.args...)
			res := runSynapse(t, env, args...)
			res.wantCode(t, exitPartial)
			if read, scored, failed := rerankCounts(t, res); read != n || scored != n-1 || failed != 1 {
				t.Errorf("summary: %d read, %d scored, %d failed; want %d, %d, 1", read, scored, failed, n, n-1)
			}
			if rows := readRerankJSONL(t, out); len(rows) != n*k-1 {
				t.Errorf("%d rows; want %d (all but the poisoned pair)", len(rows), n*k-1)
			}
			errs := readErrors(t, out+".errors.jsonl")
			if len(errs) != 1 {
				t.Fatalf("errors file: %d lines; want 1: %+v", len(errs), errs)
			}
			e := errs[0]
			if e.ID != "q7" || e.Candidate == nil || *e.Candidate != 3 || e.Reason != tc.reason || e.DocID == "" {
				t.Errorf("error line %+v; want q7 candidate 3, %s", e, tc.reason)
			}
			if tc.reason == "engine_crashed" && !strings.Contains(e.WorkerLog, "chaos") {
				t.Errorf("error line has no worker log naming the drill: %q", e.WorkerLog)
			}
		})
	}
}

// TestRerankResume kills a slow run after its first checkpoint; --resume
// gives the files of an uninterrupted run, and a summary of the whole job.
func TestRerankResume(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "q.jsonl")
	poisonRerank(t, in, resumeN, resumeK, -1, -1)
	rerankResumeDrill(t, testmodels.Reranker(t), in, nil)
}

// The input of the resume drill: resumeN queries of resumeK candidates.
const resumeN, resumeK = 400, 5

// rerankResumeDrill kills a slow rerank of in with model after its first
// checkpoint and resumes it; env is the workers'.
func rerankResumeDrill(t *testing.T, model, in string, env []string) {
	t.Helper()
	const n = resumeN
	dir := t.TempDir()
	args := func(out string) []string {
		return []string{"rerank", in, "-m", model, "-o", out, "--workers", "2", "--threads", "1", "--batch-tokens", "1024"}
	}
	clean := filepath.Join(dir, "clean.jsonl")
	runSynapse(t, env, args(clean)...).wantCode(t, exitOK)
	want, err := os.ReadFile(clean)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "killed.jsonl")
	cmd := synapseCmd(context.Background(), t, env, append(args(out), "--chaos", "delay=5ms", "-q")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	waitCheckpoint(t, out, exited)
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	res := runSynapse(t, env, append(args(out), "--resume")...)
	res.wantCode(t, exitOK)
	if read, scored, _ := rerankCounts(t, res); read != n || scored != n {
		t.Errorf("resumed summary: %d read, %d scored; want the whole job's %d", read, scored, n)
	}
	if !strings.Contains(res.stdout, "the rest by the interrupted run") {
		t.Errorf("the summary does not say the run was resumed:\n%s", res.stdout)
	}
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("resumed output differs from an uninterrupted run (%v)", err)
	}
}

// TestRerankOldWorker: workers that do not announce RERANK_GROUPS get one
// RERANK per query, with the same scores.
func TestRerankOldWorker(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "q.jsonl")
	poisonRerank(t, in, 20, 4, -1, -1)
	model := testmodels.Reranker(t)
	base := []string{"rerank", in, "-m", model, "--workers", "1", "--threads", "1"}
	runSynapse(t, nil, append(base, "-o", filepath.Join(dir, "new.jsonl"))...).wantCode(t, exitOK)
	runSynapse(t, nil, append(base, "-o", filepath.Join(dir, "old.jsonl"), "--chaos", "old-worker=1")...).wantCode(t, exitOK)
	a, b := readRerankJSONL(t, filepath.Join(dir, "new.jsonl")), readRerankJSONL(t, filepath.Join(dir, "old.jsonl"))
	if len(a) != len(b) || len(a) != 80 {
		t.Fatalf("%d and %d rows; want 80", len(a), len(b))
	}
	for i := range a {
		if a[i].DocID != b[i].DocID || math.Abs(float64(a[i].Score-b[i].Score)) > 1e-4 {
			t.Errorf("row %d: %+v with RERANK_GROUPS, %+v with RERANK per query", i, a[i], b[i])
		}
	}
}

// TestRerankBadInputs: every bad input gets its documented outcome (an
// errors-file line with its reason and position) and exit code 3; the rest
// is scored. A document longer than the context is cut, never the query.
func TestRerankBadInputs(t *testing.T) {
	dir := t.TempDir()
	docs := testmodels.Corpus(8)
	long := strings.Repeat(docs[0].Text+" ", 40)
	longQuery := strings.Repeat("cell ", 600)
	lines := []string{
		`{"query_id": "ok", "query": "what cells", "candidates": [{"id": "a", "text": ` + strconv.Quote(docs[1].Text) + `}, {"id": "long", "text": ` + strconv.Quote(long) + `}]}`,
		`{broken`,
		`{"query_id": "noquery", "candidates": [{"id": "b", "text": "x"}]}`,
		`{"query_id": "empty", "query": " ", "candidates": [{"id": "c", "text": "x"}, {"id": "d", "text": "y"}]}`,
		`{"query_id": "cands", "query": "why", "candidates": [{"id": "e", "text": ""}, {"text": "no id"}, {"id": "f", "text": "z", "score": "high"}, {"id": "g", "text": "fine"}, {"id": "g", "text": "again"}]}`,
		`{"query_id": "toolong", "query": ` + strconv.Quote(longQuery) + `, "candidates": [{"id": "h", "text": "x"}]}`,
		`{"query_id": "ok", "query": "asked twice", "candidates": [{"id": "a", "text": "x"}]}`,
	}
	in := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	res := runSynapse(t, nil, "rerank", in, "-m", testmodels.Reranker(t), "-o", out, "--workers", "1")
	res.wantCode(t, exitPartial)
	rows := readRerankJSONL(t, out)
	scored := map[string]rerankRow{}
	for _, r := range rows {
		scored[r.DocID] = r
	}
	if len(rows) != 3 || !scored["long"].Truncated || scored["a"].Truncated || scored["g"].DocID != "g" {
		t.Errorf("rows %+v; want a, long (truncated) and g", rows)
	}
	var got []string
	for _, e := range readErrors(t, out+".errors.jsonl") {
		got = append(got, fmt.Sprintf("%d %s %s %s", *e.Line, e.ID, e.DocID, e.Reason))
	}
	want := []string{
		"2   malformed_json",
		"3 noquery b missing_field",
		"4 empty c empty_text", "4 empty d empty_text",
		"5 cands e empty_text", "5 cands  missing_field", "5 cands f bad_score", "5 cands g duplicate_id",
		"6 toolong h query_too_long",
		"7 ok a duplicate_id",
	}
	if !slices.Equal(got, want) {
		t.Errorf("errors file:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Records and pairs are counted apart: "cands" is in errors, yet its
	// pair g is scored and written.
	if read, ok, failed := rerankCounts(t, res); read != 7 || ok != 1 || failed != 6 {
		t.Errorf("summary: %d read = %d scored + %d in errors; want 7 = 1 + 6", read, ok, failed)
	}
	for _, want := range []string{"(1 of them in part: their other pairs are written)", "pairs scored   3 (+ 9 in errors)"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, res.stdout)
		}
	}
	if want := "6 of 7 records have errors (1 of them in part only); 3 pairs were scored and written, 9 are in the errors file"; !strings.Contains(res.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
	}
}

// TestRerankOutputs: --top-n trims what is written, --sigmoid maps scores
// into (0, 1) keeping their order, a TREC output is ranked with the model's
// tag, --qrels prints both orders' metrics, and `synapse eval` reads the run.
func TestRerankOutputs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "q.jsonl")
	poisonRerank(t, in, 6, 5, -1, -1)
	model := testmodels.Reranker(t)
	base := []string{"rerank", in, "-m", model, "--workers", "1"}
	raw := filepath.Join(dir, "raw.jsonl")
	runSynapse(t, nil, append(base, "-o", raw)...).wantCode(t, exitOK)
	all := readRerankJSONL(t, raw)

	top := filepath.Join(dir, "top.jsonl")
	runSynapse(t, nil, append(base, "-o", top, "--top-n", "2", "--sigmoid")...).wantCode(t, exitOK)
	trimmed := readRerankJSONL(t, top)
	if len(trimmed) != 12 {
		t.Errorf("--top-n 2: %d rows; want 12", len(trimmed))
	}
	for _, r := range trimmed {
		i := slices.IndexFunc(all, func(a rerankRow) bool { return a.QueryID == r.QueryID && a.DocID == r.DocID })
		if r.Rank > 2 || i < 0 || all[i].Rank != r.Rank || math.Abs(float64(r.Score)-1/(1+math.Exp(-float64(all[i].Score)))) > 1e-6 {
			t.Errorf("--top-n 2 --sigmoid row %+v; raw %+v", r, all[i])
		}
	}

	trec := filepath.Join(dir, "out.trec")
	qrels := filepath.Join(dir, "qrels.tsv")
	var q strings.Builder
	q.WriteString("query-id\tcorpus-id\tscore\n")
	for _, r := range all {
		if r.InputRank == 1 {
			fmt.Fprintf(&q, "%s\t%s\t1\n", r.QueryID, r.DocID)
		}
	}
	os.WriteFile(qrels, []byte(q.String()), 0o644)
	res := runSynapse(t, nil, append(base, "-o", trec, "--qrels", qrels)...)
	res.wantCode(t, exitOK)
	if !regexp.MustCompile(`nDCG@10 +\d\.\d{4}\n`).MatchString(res.stdout) || strings.Contains(res.stdout, "input") {
		t.Errorf("--qrels with a TREC output: want the reranked metrics only:\n%s", res.stdout)
	}
	data, _ := os.ReadFile(trec)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != len(all) || !strings.HasPrefix(lines[0], "q0 Q0 ") || !strings.HasSuffix(lines[0], " synapse-tiny-rerank") {
		t.Errorf("TREC output starts %q (%d lines); want %d lines, q0 first, tagged with the model", lines[0], len(lines), len(all))
	}
	for i, l := range lines {
		f := strings.Fields(l)
		if want := strconv.Itoa(i%5 + 1); f[3] != want {
			t.Errorf("TREC line %d: rank %s; want %s (ranked order)", i, f[3], want)
		}
	}
	res = runSynapse(t, nil, append(base, "-o", filepath.Join(dir, "out.arrow"), "--qrels", qrels)...)
	res.wantCode(t, exitOK)
	if !regexp.MustCompile(`(?m)^MRR@10 +1\.0000 +\d\.\d{4}$`).MatchString(res.stdout) {
		t.Errorf("--qrels with an Arrow output: want input (perfect here) and reranked columns:\n%s", res.stdout)
	}
	res = runSynapse(t, nil, "eval", "--run", trec, "--qrels", qrels)
	res.wantCode(t, exitOK)
	if !strings.Contains(res.stdout, "Recall@100") {
		t.Errorf("synapse eval printed:\n%s", res.stdout)
	}
}

// TestRerankRunMemory re-ranks a 5,000-query run whose corpus is 100 times
// larger than the documents it names: the module's peak memory stays that
// of a run whose corpus holds only the named documents (the corpus is read
// once and only the named texts are kept, spooled to disk).
func TestRerankRunMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 50 MB corpus")
	}
	dir := t.TempDir()
	const queries, corpusFactor = 5000, 100
	var run, qs bytes.Buffer
	for q := range queries {
		fmt.Fprintf(&run, "q%d Q0 d%d 1 1.0 bm25\n", q, q*corpusFactor)
		fmt.Fprintf(&qs, `{"_id": "q%d", "text": "which cells %d"}`+"\n", q, q)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	runPath, qPath := write("run.trec", run.Bytes()), write("queries.jsonl", qs.Bytes())
	var big, small bytes.Buffer
	for d := range queries * corpusFactor {
		line := fmt.Sprintf(`{"_id": "d%d", "title": "the cell %d", "text": "b cells and t cells of the blood, sample %d"}`+"\n", d, d, d)
		big.WriteString(line)
		if d%corpusFactor == 0 {
			small.WriteString(line)
		}
	}
	bigPath, smallPath := write("big.jsonl", big.Bytes()), write("small.jsonl", small.Bytes())
	model := testmodels.Reranker(t)
	peak := func(corpus string) int64 {
		out := filepath.Join(dir, filepath.Base(corpus)+".out.arrow")
		cmd := synapseCmd(context.Background(), t, nil, "rerank", "--run", runPath, "--queries", qPath, "--corpus", corpus,
			"-m", model, "-o", out, "-q", "--workers", "2", "--threads", "1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		hwm := make(chan int64)
		go func() { hwm <- watchHWM(cmd.Process.Pid) }()
		err := cmd.Wait()
		kib := <-hwm
		if err != nil {
			t.Fatalf("rerank with %s: %v", corpus, err)
		}
		return kib >> 10
	}
	withBig, withSmall := peak(bigPath), peak(smallPath)
	t.Logf("module peak: %d MiB with a %d MiB corpus, %d MiB with only the named documents", withBig, big.Len()>>20, withSmall)
	if withBig > withSmall+int64(big.Len()>>20)/4 {
		t.Errorf("module peak %d MiB with the large corpus, %d MiB without: it grows with the corpus (%d MiB)", withBig, withSmall, big.Len()>>20)
	}
}

// TestRerankQrelsSameDepth: with --run and --depth, --qrels scores the
// input run and the reranked order over the same top --depth candidates
// and says so: a relevant document the run ranks below the depth counts in
// neither column (issue: the input column scored the whole run).
func TestRerankQrelsSameDepth(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	var run, qs, docs, qrels strings.Builder
	qrels.WriteString("query-id\tcorpus-id\tscore\n")
	for q := range 4 {
		fmt.Fprintf(&qs, `{"_id": "q%d", "text": "which cells %d"}`+"\n", q, q)
		for r := 1; r <= 10; r++ {
			fmt.Fprintf(&run, "q%d Q0 d%d-%d %d %d.0 bm25\n", q, q, r, r, 20-r)
			fmt.Fprintf(&docs, `{"_id": "d%d-%d", "text": "b cells and t cells of the blood, sample %d"}`+"\n", q, r, r)
		}
		fmt.Fprintf(&qrels, "q%d\td%d-9\t1\n", q, q) // ranked 9th by the run: below --depth 3
	}
	for name, s := range map[string]string{"run.trec": run.String(), "q.jsonl": qs.String(), "c.jsonl": docs.String(), "qrels.tsv": qrels.String()} {
		if err := os.WriteFile(p(name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := runSynapse(t, nil, "rerank", "--run", p("run.trec"), "--queries", p("q.jsonl"), "--corpus", p("c.jsonl"), "--depth", "3",
		"-m", testmodels.Reranker(t), "-o", p("out.trec"), "--qrels", p("qrels.tsv"), "--workers", "1", "--threads", "1")
	res.wantCode(t, exitOK)
	if !regexp.MustCompile(`(?m)^Recall@100 +0\.0000 +0\.0000$`).MatchString(res.stdout) {
		t.Errorf("Recall@100 of the input must be scored over the 3 reranked candidates (0, as the reranked column):\n%s", res.stdout)
	}
	if !strings.Contains(res.stdout, "both scored over the top 3 candidates of each query") {
		t.Errorf("the report does not say the depth:\n%s", res.stdout)
	}
}
