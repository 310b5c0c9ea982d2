package pgstore_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/pgstore/pgtest"
)

// TestNULRows: a U+0000 in an id, or in a text that --with-text stores,
// cannot go into a PostgreSQL text column. Each such document goes to the
// errors file (not_storable, naming what holds it), the others are
// written, exit 3 — and a --resume or a second run does not stop at it.
// Without --with-text a NUL in the text is no problem: the text is not
// stored.
func TestNULRows(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	docs := shortCorpus(30)
	docs[3]["_id"] = "bad\x00id"
	docs[7]["text"] = "a text with a \x00 in it"
	in := writeJSONL(t, filepath.Join(t.TempDir(), "docs.jsonl"), docs)
	for _, tc := range []struct {
		name     string
		withText bool
		bad      []string // ids in the errors file
	}{
		{"without --with-text", false, []string{"bad\x00id"}},
		{"with --with-text", true, []string{"bad\x00id", docs[7]["_id"].(string)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := map[bool]string{false: "plain", true: "texts"}[tc.withText]
			args := []string{"embed", in, "-m", model, "-o", tableURL(s, table)}
			if tc.withText {
				args = append(args, "--with-text")
			}
			for range 2 { // the second run: a full run over the same table, not stuck at the same batch
				r := run(t, args...)
				r.wantCode(t, 3)
				errs := readErrorIDs(t, filepath.Join(workDir(t), table+".errors.jsonl"))
				if strings.Join(errs, ",") != strings.Join(tc.bad, ",") {
					t.Errorf("errors file ids %q; want %q\n%s", errs, tc.bad, r.stderr)
				}
				if n := len(tableRows(t, s.Conn(t), table)); n != len(docs)-len(tc.bad) {
					t.Errorf("%d documents' rows in the table; want %d", n, len(docs)-len(tc.bad))
				}
			}
		})
	}
}

// readErrorIDs are the ids of an errors file's records whose reason is
// not_storable (others fail the test).
func readErrorIDs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct{ ID, Reason, Detail string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if e.Reason != "not_storable" || !strings.Contains(e.Detail, "U+0000") {
			t.Errorf("errors record %s; want reason not_storable naming U+0000", line)
		}
		ids = append(ids, e.ID)
	}
	return ids
}
