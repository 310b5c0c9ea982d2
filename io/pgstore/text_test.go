package pgstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"

	"github.com/synapse-embed/synapse/io/pgstore/pgtest"
)

// TestWithText: --with-text gives the table a text column holding each
// chunk's text, equal to what the file output's text column holds, on
// non-ASCII input; a sync night keeps it; a run without --with-text on that
// table (and one with it on a table without) is refused before any work,
// naming the flag.
func TestWithText(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	docs := corpus(300)
	for i, d := range docs {
		switch i % 3 {
		case 0:
			d["text"] = d["text"].(string) + " 细胞生物学 🧬 café"
		case 1:
			d["text"] = "naïve e\u0301tude — " + d["text"].(string)
		}
	}
	in := writeJSONL(t, filepath.Join(t.TempDir(), "docs.jsonl"), docs)
	ref := filepath.Join(t.TempDir(), "ref.arrow")
	run(t, "embed", in, "-m", model, "-o", ref, "--with-text", "-q").wantCode(t, 0)
	want := fileTexts(t, ref)
	conn := s.Conn(t)
	run(t, "embed", in, "-m", model, "-o", tableURL(s, "docs"), "--with-text").wantCode(t, 0)
	sameTexts(t, tableTexts(t, conn, "docs"), want)
	sameRows(t, tableRows(t, conn, "docs"), fileRows(t, ref))

	run(t, "embed", in, "-m", model, "-o", tableURL(s, "docs"), "--with-text", "--sync").wantCode(t, 0)
	sameTexts(t, tableTexts(t, conn, "docs"), want)

	r := run(t, "embed", in, "-m", model, "-o", tableURL(s, "docs"))
	r.wantCode(t, 2)
	if !strings.Contains(r.stderr, "written with --with-text") {
		t.Errorf("a run without --with-text on a table with text: got %q; want a refusal naming --with-text", r.stderr)
	}
	run(t, "embed", in, "-m", model, "-o", tableURL(s, "plain")).wantCode(t, 0)
	r = run(t, "embed", in, "-m", model, "-o", tableURL(s, "plain"), "--with-text")
	r.wantCode(t, 2)
	if !strings.Contains(r.stderr, "written without --with-text") {
		t.Errorf("--with-text on a table without text: got %q; want a refusal naming --with-text", r.stderr)
	}
}

// tableTexts is a table's text column by chunk_id.
func tableTexts(t *testing.T, conn *pgx.Conn, table string) map[string]string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT chunk_id, text FROM "+pgx.Identifier{table}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var id, text string
	if _, err := pgx.ForEachRow(rows, []any{&id, &text}, func() error { out[id] = text; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// fileTexts is an .arrow output's text column by ID#CHUNK.
func fileTexts(t *testing.T, path string) map[string]string {
	t.Helper()
	out := map[string]string{}
	eachBatch(t, path, func(col func(string) arrow.Array, n int) {
		ids, chunks, texts := col("id").(*array.String), col("chunk").(*array.Int32), col("text").(*array.String)
		for j := range n {
			out[fmt.Sprintf("%s#%d", ids.Value(j), chunks.Value(j))] = texts.Value(j)
		}
	})
	return out
}

func sameTexts(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) || len(want) == 0 {
		t.Errorf("got %d texts; want %d", len(got), len(want))
	}
	bad := 0
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("chunk %s: text %q (present %v); want %q", k, g, ok, w)
			if bad++; bad > 5 {
				t.Fatal("more texts differ")
			}
		}
	}
}
