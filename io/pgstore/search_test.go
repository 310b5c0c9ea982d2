package pgstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/pgstore/pgtest"
)

// TestSearchSQL: the SQL docs/postgres.md shows (ORDER BY embedding <=>
// $1 LIMIT k), by a scan and through an HNSW index, returns synapse
// search's top 10 for each query.
func TestSearchSQL(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	dir := t.TempDir()
	docs := corpus(300)
	in := writeJSONL(t, filepath.Join(dir, "docs.jsonl"), docs)
	var queries []map[string]any
	for i, d := range docs[:20] {
		words := strings.Fields(d["text"].(string))
		queries = append(queries, map[string]any{"_id": "q" + strconv.Itoa(i), "text": strings.Join(words[:min(6, len(words))], " ")})
	}
	qin := writeJSONL(t, filepath.Join(dir, "queries.jsonl"), queries)
	corpusOut, qOut, runOut := filepath.Join(dir, "docs.arrow"), filepath.Join(dir, "q.arrow"), filepath.Join(dir, "run.trec")
	run(t, "embed", in, "-m", model, "-o", corpusOut, "-q").wantCode(t, 0)
	run(t, "embed", qin, "-m", model, "-o", qOut, "-q").wantCode(t, 0)
	run(t, "embed", in, "-m", model, "-o", tableURL(s, "docs"), "-q").wantCode(t, 0)
	run(t, "search", "--queries", qOut, "--corpus", corpusOut, "-k", "10", "-o", runOut, "-q").wantCode(t, 0)
	want := readRun(t, runOut)
	conn := s.Conn(t)
	ctx := context.Background()
	for _, index := range []string{"", "CREATE INDEX ON docs USING hnsw (embedding vector_cosine_ops)"} {
		if index != "" {
			if _, err := conn.Exec(ctx, index); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range fileRows(t, qOut) {
			rows, err := conn.Query(ctx, "SELECT id FROM docs ORDER BY embedding <=> $1::vector LIMIT 10", vectorText(q.emb))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					t.Fatal(err)
				}
				got = append(got, id)
			}
			if !slices.Equal(got, want[q.id]) {
				t.Errorf("%q: query %s: got %v; want synapse search's %v", index, q.id, got, want[q.id])
			}
		}
	}
}

func vectorText(v []float32) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(float64(x), 'g', -1, 32)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// readRun reads a TREC run: each query's documents in rank order.
func readRun(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var q, q0, doc, tag string
		var rank int
		var score float64
		if _, err := fmt.Sscan(sc.Text(), &q, &q0, &doc, &rank, &score, &tag); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		out[q] = append(out[q], doc)
	}
	return out
}
