package pgstore_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/pgstore/pgtest"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// spladeModel writes a generated BERT masked-LM (logits its only output,
// a 24-token context, a vocabulary of 64) for --vectors sparse.
func spladeModel(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mlm")
	enc := onnxtest.Tiny()
	enc.Positions, enc.Layers, enc.Pooled, enc.NoHidden, enc.MLM = 24, 1, false, true, true
	if _, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: enc}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// spladeCorpus is n documents of 1–18 of the model's words: one chunk each.
func spladeCorpus(n int, seed uint64) []map[string]any {
	rng := rand.New(rand.NewPCG(seed, 35))
	var docs []map[string]any
	for d := range n {
		words := make([]string, 1+rng.IntN(18))
		for i := range words {
			words[i] = onnxtest.Words[rng.IntN(len(onnxtest.Words))]
		}
		docs = append(docs, map[string]any{"id": fmt.Sprintf("d%03d", d), "text": strings.Join(words, " ")})
	}
	return docs
}

// vocabSize is spladeModel's vocabulary as its tokenizer has it (the
// tokenizer's words and special tokens beyond the encoder's 64 rows).
const vocabSize = 123

// sparseRow is one chunk's sparse vector: 0-based indices, rising.
type sparseRow struct {
	ix   []uint32
	vals []float32
}

// TestSparse: --vectors sparse into a table writes sparsevec(V) rows equal,
// index for index and bit for bit, to the file output's; a sync night
// with changed, new and deleted documents gives a full run's rows; the
// SQL docs/postgres.md shows (ORDER BY embedding <#> $1) returns synapse
// search's top 10; a run without --sparse-top-k, and a dense run on the
// sparse table, are refused before any work.
func TestSparse(t *testing.T) {
	t.Setenv("SYNAPSE_ORT_LIB", testenv.ORTLib(t)) // the runs' environment
	s := pgtest.Start(t)
	model := spladeModel(t)
	dir := t.TempDir()
	sparse := []string{"--vectors", "sparse", "--sparse-top-k", "8", "-q"}
	docs := spladeCorpus(300, 1)
	in := writeJSONL(t, filepath.Join(dir, "docs.jsonl"), docs)
	ref := filepath.Join(dir, "ref.arrow")
	run(t, append([]string{"embed", in, "-m", model, "-o", ref}, sparse...)...).wantCode(t, 0)
	run(t, append([]string{"embed", in, "-m", model, "-o", tableURL(s, "sp")}, sparse...)...).wantCode(t, 0)
	conn := s.Conn(t)
	sameSparse(t, "full run", tableSparse(t, conn, "sp"), fileSparse(t, ref))

	// A night: 6 changed, 3 new, 3 deleted.
	night := slices.Clone(docs[3:])
	for i := 0; i < 6; i++ {
		night[10*i] = map[string]any{"id": night[10*i]["id"], "text": night[10*i]["text"].(string) + " protein gene"}
	}
	night = append(night, spladeCorpus(303, 2)[300:]...)
	for _, d := range night[len(night)-3:] {
		d["id"] = "new-" + d["id"].(string)
	}
	nin := writeJSONL(t, filepath.Join(dir, "night.jsonl"), night)
	nref := filepath.Join(dir, "night.arrow")
	run(t, append([]string{"embed", nin, "-m", model, "-o", nref}, sparse...)...).wantCode(t, 0)
	run(t, append([]string{"embed", nin, "-m", model, "-o", tableURL(s, "sp"), "--sync"}, sparse...)...).wantCode(t, 0)
	sameSparse(t, "sync night", tableSparse(t, conn, "sp"), fileSparse(t, nref))

	r := run(t, "embed", nin, "-m", model, "-o", tableURL(s, "sp2"), "--vectors", "sparse")
	r.wantCode(t, 2)
	if !strings.Contains(r.stderr, "--sparse-top-k") {
		t.Errorf("no --sparse-top-k: got %q; want a refusal naming it", r.stderr)
	}
	r = run(t, "embed", nin, "-m", tinyModel(t), "-o", tableURL(s, "sp"))
	r.wantCode(t, 2)
	if !strings.Contains(r.stderr, "sparsevec(123)") || strings.Contains(r.stdout, "embedded") {
		t.Errorf("a dense run on the sparse table: got %q / %q; want a refusal naming its columns, before any work", r.stderr, r.stdout)
	}
	checkSparseSearch(t, conn, model, dir, night, nref)
}

// checkSparseSearch: the inner-product SQL on the table returns synapse
// search's top 10 over the file output, for 20 queries.
func checkSparseSearch(t *testing.T, conn *pgx.Conn, model, dir string, docs []map[string]any, corpus string) {
	t.Helper()
	var queries []map[string]any
	for i, d := range docs[:20] {
		words := strings.Fields(d["text"].(string))
		queries = append(queries, map[string]any{"id": "q" + strconv.Itoa(i), "text": strings.Join(words[:min(4, len(words))], " ")})
	}
	qin := writeJSONL(t, filepath.Join(dir, "queries.jsonl"), queries)
	qOut, runOut := filepath.Join(dir, "q.arrow"), filepath.Join(dir, "run.trec")
	run(t, "embed", qin, "-m", model, "-o", qOut, "--vectors", "sparse", "--sparse-top-k", "8", "-q").wantCode(t, 0)
	run(t, "search", "--queries", qOut, "--corpus", corpus, "-k", "10", "-o", runOut, "-q").wantCode(t, 0)
	want := readRun(t, runOut)
	for id, q := range fileSparse(t, qOut) {
		qid, _, _ := strings.Cut(id, "#")
		rows, err := conn.Query(context.Background(), "SELECT id FROM sp ORDER BY embedding <#> $1::sparsevec, id LIMIT 10", sparseText(q, vocabSize))
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[qid]) {
			t.Errorf("query %s: got %v; want synapse search's %v", qid, got, want[qid])
		}
	}
}

// sparseText is pgvector's text form of a sparse vector: 1-based indices.
func sparseText(r sparseRow, dims int) string {
	parts := make([]string, len(r.ix))
	for i, x := range r.ix {
		parts[i] = fmt.Sprintf("%d:%s", x+1, strconv.FormatFloat(float64(r.vals[i]), 'g', -1, 32))
	}
	return "{" + strings.Join(parts, ",") + "}/" + strconv.Itoa(dims)
}

// tableSparse reads a table's sparsevec column by chunk_id, through its
// text form ('{i:v,…}/V', 1-based, each value printed to round-trip); V
// must be the vocabulary's size.
func tableSparse(t *testing.T, conn *pgx.Conn, table string) map[string]sparseRow {
	t.Helper()
	want := strconv.Itoa(vocabSize)
	rows, err := conn.Query(context.Background(), "SELECT chunk_id, embedding::text FROM "+pgx.Identifier{table}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]sparseRow{}
	var id, text string
	_, err = pgx.ForEachRow(rows, []any{&id, &text}, func() error {
		body, dims, ok := strings.Cut(strings.TrimPrefix(text, "{"), "}/")
		if !ok || dims != want {
			return fmt.Errorf("%s: %q is not a sparsevec of %s dims", id, text, want)
		}
		var r sparseRow
		for _, p := range strings.Split(body, ",") {
			i, v, _ := strings.Cut(p, ":")
			ix, err1 := strconv.ParseUint(i, 10, 32)
			val, err2 := strconv.ParseFloat(v, 32)
			if err1 != nil || err2 != nil || ix == 0 {
				return fmt.Errorf("%s: %q: element %q", id, text, p)
			}
			r.ix, r.vals = append(r.ix, uint32(ix-1)), append(r.vals, float32(val))
		}
		out[id] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fileSparse reads an .arrow sparse output by ID#CHUNK.
func fileSparse(t *testing.T, path string) map[string]sparseRow {
	t.Helper()
	out := map[string]sparseRow{}
	eachBatch(t, path, func(col func(string) arrow.Array, n int) {
		ids, chunks := col("id").(*array.String), col("chunk").(*array.Int32)
		ix, vals := col("sparse_indices").(*array.List), col("sparse_values").(*array.List)
		ixv, valv := ix.ListValues().(*array.Uint32).Values(), vals.ListValues().(*array.Float32).Values()
		for j := range n {
			a, b := ix.ValueOffsets(j)
			va, vb := vals.ValueOffsets(j)
			out[fmt.Sprintf("%s#%d", ids.Value(j), chunks.Value(j))] = sparseRow{slices.Clone(ixv[a:b]), slices.Clone(valv[va:vb])}
		}
	})
	return out
}

func sameSparse(t *testing.T, what string, got, want map[string]sparseRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows; want %d", what, len(got), len(want))
	}
	for id, w := range want {
		g, ok := got[id]
		switch {
		case !ok:
			t.Errorf("%s: %s missing", what, id)
		case !slices.Equal(g.ix, w.ix):
			t.Errorf("%s: %s: indices %v; want %v", what, id, g.ix, w.ix)
		case !slices.EqualFunc(g.vals, w.vals, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }):
			t.Errorf("%s: %s: values %v; want %v (bit for bit)", what, id, g.vals, w.vals)
		}
	}
}
