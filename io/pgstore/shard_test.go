package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/synapse-embed/synapse/io/pgstore/pgtest"
)

// Shards of a table (--shard I/N -o postgresql://…) and synapse merge of them.

const (
	shard0 = "docs/shard-0-of-2" // shard 0's row of synapse_state
	shard1 = "docs/shard-1-of-2"
)

// shardDocs is a short corpus with a document without a text in each half
// (a missing_field row of the errors file).
func shardDocs(n int) []map[string]any {
	docs := shortCorpus(n)
	for _, i := range []int{n / 10, n - n/10} {
		docs[i] = map[string]any{"_id": docs[i]["_id"], "title": "no text"}
	}
	return docs
}

// started is a synapse run started in the background.
type started struct {
	cmd       *exec.Cmd
	out, errb bytes.Buffer
}

func start(t *testing.T, args ...string) *started {
	t.Helper()
	s := &started{cmd: command(context.Background(), t, args...)}
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.errb
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cmd.Process.Kill(); s.cmd.Wait() })
	return s
}

func (s *started) wait() result {
	var ee *exec.ExitError
	err := s.cmd.Wait()
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	return result{s.out.String(), s.errb.String(), code}
}

// shardDone reports whether the shard has recorded its manifest.
func shardDone(t *testing.T, conn *pgx.Conn, key string) bool {
	t.Helper()
	var done bool
	if err := conn.QueryRow(context.Background(), "SELECT coalesce((SELECT manifest IS NOT NULL FROM synapse_state WHERE tbl = $1), false)", key).Scan(&done); err != nil {
		t.Fatal(err)
	}
	return done
}

// leftovers are the tables and state rows of runs left in the database.
func leftovers(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var left string
	err := conn.QueryRow(context.Background(), `SELECT concat_ws(' ',
		(SELECT string_agg(tablename, ' ') FROM pg_tables WHERE tablename LIKE '%synapse%' AND tablename <> 'synapse_state'),
		(SELECT string_agg(tbl, ' ') FROM synapse_state))`).Scan(&left)
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// TestShardsMerge: two shards of one table run at once (shard 0 is stopped
// mid-run while shard 1 runs to its end; a second run of shard 0 is kept
// off); merge names the shard not done (exit 1) and publishes nothing;
// once both are done, merge publishes them in one transaction: the table
// is a single run's (vectors bit for bit), the errors file the single
// run's byte for byte, a reader polling meanwhile sees the old table or
// the new one, and no staging table or state row is left.
func TestShardsMerge(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	dir := t.TempDir()
	docs := shardDocs(8000)
	in := writeJSONL(t, filepath.Join(dir, "docs.jsonl"), docs)
	old := writeJSONL(t, filepath.Join(dir, "old.jsonl"), docs[:300])
	conn := s.Conn(t)
	ctx := context.Background()
	run(t, "embed", old, "-m", model, "-o", tableURL(s, "docs"), "-q").wantCode(t, 0)
	yesterday, err := fingerprint(ctx, conn, "docs")
	if err != nil {
		t.Fatal(err)
	}
	run(t, "embed", in, "-m", model, "-o", tableURL(s, "single"), "-q").wantCode(t, 3)

	shard := func(i string) []string {
		return []string{"embed", in, "-m", model, "-o", tableURL(s, "docs"), "--shard", i, "--workers", "1"}
	}
	first := start(t, shard("0/2")...)
	waitFor(t, "shard 0's first committed batch", func() bool { return committedRows(conn, shard0) > 0 })
	if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if shardDone(t, conn, shard0) {
		t.Fatal("shard 0 was done before it could be stopped: give it a bigger corpus")
	}
	again := run(t, shard("0/2")...)
	again.wantCode(t, 2)
	if !strings.Contains(again.stderr, "shard 0 of 2 of table docs is being written by another run") {
		t.Errorf("a second run of shard 0: got %q; want it kept off", again.stderr)
	}
	second := run(t, shard("1/2")...)
	second.wantCode(t, 3) // its document without a text
	if !strings.Contains(second.stdout, "docs_synapse_shard_1_of_2, unpublished until synapse merge") {
		t.Errorf("shard 1's summary does not say where its rows are:\n%s", second.stdout)
	}
	early := run(t, "merge", tableURL(s, "docs"))
	early.wantCode(t, 1)
	if !strings.Contains(early.stderr, "shard 0 of 2 of table docs not done") {
		t.Errorf("merge with shard 0 running: got %q; want it named as not done", early.stderr)
	}
	if fp, err := fingerprint(ctx, conn, "docs"); err != nil || fp != yesterday {
		t.Errorf("after the refused merge the table changed (%v)", err)
	}
	if err := first.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	first.wait().wantCode(t, 3)
	done := run(t, shard("1/2")...)
	done.wantCode(t, 0)
	if !strings.Contains(done.stderr, "nothing to do") {
		t.Errorf("shard 1 run again: got %q; want nothing to do", done.stderr)
	}

	stop := pollFingerprints(t, s, "docs")
	merged := run(t, "merge", tableURL(s, "docs"))
	polled := stop()
	merged.wantCode(t, 3)
	today, err := fingerprint(ctx, conn, "docs")
	if err != nil {
		t.Fatal(err)
	}
	for fp, n := range polled {
		if fp != yesterday && fp != today {
			t.Errorf("a reader saw a table that is neither the old nor the merged one (%d times)", n)
		}
	}
	if len(polled) == 0 || today == yesterday {
		t.Errorf("the reader read %d tables; the merged one is the old one: %v", len(polled), today == yesterday)
	}
	if strings.Contains(merged.stdout+merged.stderr, s.Password) {
		t.Errorf("the password is in merge's output:\n%s\n%s", merged.stdout, merged.stderr)
	}
	sameRows(t, tableRows(t, conn, "docs"), tableRows(t, conn, "single"))
	sameErrors(t, filepath.Join(workDir(t), "docs.errors.jsonl"), filepath.Join(workDir(t), "single.errors.jsonl"))
	if left := strings.TrimSpace(leftovers(t, conn)); left != "" {
		t.Errorf("left after the merge: %s; want nothing", left)
	}
	run(t, "merge", tableURL(s, "docs")).wantCode(t, 1) // nothing to merge any more
}

func sameErrors(t *testing.T, got, want string) {
	t.Helper()
	g, err1 := os.ReadFile(got)
	w, err2 := os.ReadFile(want)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) || len(w) == 0 {
		t.Errorf("merged errors file:\n%s\nwant the single run's:\n%s", g, w)
	}
}

// TestShardResumeAfterKill: a shard killed (SIGKILL) after a committed
// batch publishes nothing; --resume finishes it, and the merge is the
// single run's rows, each once.
func TestShardResumeAfterKill(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	in := writeJSONL(t, filepath.Join(t.TempDir(), "docs.jsonl"), shortCorpus(8000))
	want := embedFile(t, model, in)
	conn := s.Conn(t)
	args := []string{"embed", in, "-m", model, "-o", tableURL(s, "docs"), "--shard", "0/2", "--workers", "1"}
	killAfterCommit(t, conn, shard0, func(pid int) { syscall.Kill(pid, syscall.SIGKILL) }, args...)
	if shardDone(t, conn, shard0) {
		t.Skip("shard 0 was done before the kill: nothing to resume")
	}
	run(t, "embed", in, "-m", model, "-o", tableURL(s, "docs"), "--shard", "1/2").wantCode(t, 0)
	r := run(t, "merge", tableURL(s, "docs"))
	r.wantCode(t, 1)
	if !strings.Contains(r.stderr, "shard 0 of 2") {
		t.Errorf("merge with shard 0 killed: got %q; want it named", r.stderr)
	}
	assertUnpublished(t, conn, "docs")
	resumed := run(t, append(args, "--resume")...)
	resumed.wantCode(t, 0)
	if !strings.Contains(resumed.stdout, "resumed") {
		t.Errorf("the resumed shard's summary does not say it resumed:\n%s", resumed.stdout)
	}
	run(t, "merge", tableURL(s, "docs")).wantCode(t, 0)
	sameRows(t, tableRows(t, conn, "docs"), want)
}

// TestShardsForeign: merge refuses (exit 2, publishing nothing) shards of
// other settings, of two shard counts, and an id in two shards; --force
// runs a done shard again.
func TestShardsForeign(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	dir := t.TempDir()
	docs := corpus(200)
	in := writeJSONL(t, filepath.Join(dir, "docs.jsonl"), docs)
	conn := s.Conn(t)
	shard := func(table, i string, extra ...string) result {
		return run(t, append([]string{"embed", in, "-m", model, "-o", tableURL(s, table), "--shard", i, "-q"}, extra...)...)
	}
	refused := func(table, want string) {
		t.Helper()
		r := run(t, "merge", tableURL(s, table))
		r.wantCode(t, 2)
		if !strings.Contains(r.stderr, want) {
			t.Errorf("merge: got %q; want a refusal with %q", r.stderr, want)
		}
		assertUnpublished(t, conn, table)
	}
	shard("docs", "0/2").wantCode(t, 0)
	shard("docs", "1/2", "--chunk-tokens", "64").wantCode(t, 0)
	refused("docs", "another command, model or settings than shard 0")

	shard("docs", "1/2", "--force").wantCode(t, 0)
	shard("docs", "1/3").wantCode(t, 0)
	refused("docs", "different shard counts")

	docs[len(docs)-1]["_id"] = docs[0]["_id"]
	dup := writeJSONL(t, filepath.Join(dir, "dup.jsonl"), docs)
	for _, i := range []string{"0/2", "1/2"} {
		run(t, "embed", dup, "-m", model, "-o", tableURL(s, "dup"), "--shard", i, "-q").wantCode(t, 0)
	}
	refused("dup", "is in shard 0")

	r := run(t, "merge", tableURL(s, "dup"), "-o", filepath.Join(dir, "dup.arrow"))
	r.wantCode(t, 2)
	if !strings.Contains(r.stderr, "-o with a PostgreSQL table") {
		t.Errorf("merge -o of a table: got %q; want a refusal", r.stderr)
	}
}
