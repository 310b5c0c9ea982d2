package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/synapse-embed/synapse/io/pgstore/pgtest"
)

// night is a corpus and its next version: 2% of the documents with
// another text, 1% added, 1% deleted.
type night struct {
	old, new                []map[string]any
	changed, added, deleted map[string]bool
}

func makeNight(n int) night {
	docs := shortCorpus(n + n/50 + n/100)
	v := night{old: docs[:n], changed: map[string]bool{}, added: map[string]bool{}, deleted: map[string]bool{}}
	rng := rand.New(rand.NewPCG(3, 4))
	extra := n
	for k, i := range rng.Perm(n) {
		d := docs[i]
		id := d["_id"].(string)
		switch {
		case k < n*2/100:
			d = map[string]any{"_id": id, "title": d["title"], "text": docs[extra]["text"]}
			extra++
			v.changed[id] = true
		case k < n*3/100:
			v.deleted[id] = true
			continue
		}
		v.new = append(v.new, d)
	}
	for range n / 100 {
		d := docs[extra]
		id := "added-" + d["_id"].(string)
		v.new = append(v.new, map[string]any{"_id": id, "title": d["title"], "text": d["text"]})
		v.added[id] = true
		extra++
	}
	return v
}

// fingerprint is a digest of a table's rows: a reader compares snapshots by it.
func fingerprint(ctx context.Context, conn *pgx.Conn, table string) (string, error) {
	var fp string
	err := conn.QueryRow(ctx, "SELECT coalesce(md5(string_agg(chunk_id || encode(doc_hash, 'hex') || embedding::text, ',' ORDER BY chunk_id)), '') FROM "+pgx.Identifier{table}.Sanitize()).Scan(&fp)
	return fp, err
}

var syncRE = regexp.MustCompile(`previous\s+the table \(--sync\): (\d+) unchanged, (\d+) changed, (\d+) new, (\d+) deleted`)

// TestSync: a night with 2% changed, 1% new and 1% deleted documents. The
// synced table equals a full run's on the new corpus, the unchanged rows
// bit for bit as they were; only changed and new documents are embedded;
// a reader polling throughout sees yesterday's table or today's, never a
// mix. A resumed sync (killed after a committed batch) ends the same.
func TestSync(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	v := makeNight(4000)
	dir := t.TempDir()
	oldIn := writeJSONL(t, filepath.Join(dir, "old.jsonl"), v.old)
	newIn := writeJSONL(t, filepath.Join(dir, "new.jsonl"), v.new)
	want := embedFile(t, model, newIn)
	conn := s.Conn(t)
	ctx := context.Background()
	run(t, "embed", oldIn, "-m", model, "-o", tableURL(s, "docs")).wantCode(t, 0)
	before := tableRows(t, conn, "docs")
	yesterday, err := fingerprint(ctx, conn, "docs")
	if err != nil {
		t.Fatal(err)
	}

	stop := pollFingerprints(t, s, "docs")
	r := run(t, "embed", newIn, "-m", model, "-o", tableURL(s, "docs"), "--sync")
	r.wantCode(t, 0)
	today, err := fingerprint(ctx, conn, "docs")
	if err != nil {
		t.Fatal(err)
	}
	polled := stop()
	for fp, n := range polled {
		if fp != yesterday && fp != today {
			t.Errorf("a reader saw a table that is neither yesterday's nor today's (%d times)", n)
		}
	}
	if len(polled) == 0 {
		t.Error("the reader read nothing")
	}

	got := tableRows(t, conn, "docs")
	sameIDsAndHashes(t, got, want)
	for k, g := range got {
		if b, ok := before[k]; ok && !v.changed[g.id] && !equalBits(g.emb, b.emb) {
			t.Errorf("unchanged row %s: its vector changed", k)
		}
	}
	m := syncRE.FindStringSubmatch(r.stdout)
	wantCounts := fmt.Sprint([]int{len(v.old) - len(v.changed) - len(v.deleted), len(v.changed), len(v.added), len(v.deleted)})
	if m == nil || fmt.Sprint(m[1:]) != wantCounts {
		t.Errorf("summary's sync line %q; want unchanged, changed, new, deleted %s\n%s", m, wantCounts, r.stdout)
	}
	embedded := regexp.MustCompile(`documents\s+\d+ reused from the previous output, (\d+) embedded`).FindStringSubmatch(r.stdout)
	if want := fmt.Sprint(len(v.changed) + len(v.added)); embedded == nil || embedded[1] != want {
		t.Errorf("summary's documents line %q; want %s embedded (the changed and new)", embedded, want)
	}
}

// sameIDsAndHashes compares rows but their vectors (a changed document's
// is embedded in other batches than the full run's).
func sameIDsAndHashes(t *testing.T, got, want map[string]row) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d rows; want %d", len(got), len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g.hash != w.hash {
			t.Errorf("row %s: got %v (present %v); want %v", k, g, ok, w)
		}
	}
}

// pollFingerprints reads the table's fingerprint in a loop on its own
// connection until stop, which returns how often each was seen.
func pollFingerprints(t *testing.T, s *pgtest.Server, table string) func() map[string]int {
	conn := s.Conn(t)
	seen := map[string]int{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var pollErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			fp, err := fingerprint(context.Background(), conn, table)
			if err != nil {
				pollErr = err
				return
			}
			seen[fp]++
		}
	}()
	return func() map[string]int {
		close(done)
		wg.Wait()
		if pollErr != nil {
			t.Errorf("reader: %v", pollErr)
		}
		return seen
	}
}
