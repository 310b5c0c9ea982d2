package pgstore_test

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/synapse-embed/synapse/io/pgstore/pgtest"
)

// TestFullRun writes a corpus into a table: its rows are the .arrow
// output's, vectors bit for bit; the password appears nowhere; a second
// full run replaces the table; a table of other columns is refused.
func TestFullRun(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	in := writeJSONL(t, filepath.Join(t.TempDir(), "docs.jsonl"), corpus(1500))
	want := embedFile(t, model, in)
	conn := s.Conn(t)
	for i := range 2 {
		r := run(t, "embed", in, "-m", model, "-o", tableURL(s, "docs"))
		r.wantCode(t, 0)
		if strings.Contains(r.stdout+r.stderr, s.Password) {
			t.Fatalf("run %d: the password is in the output:\n%s\n%s", i, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "xxxxx") {
			t.Errorf("run %d: the summary does not name the output (redacted):\n%s", i, r.stdout)
		}
		sameRows(t, tableRows(t, conn, "docs"), want)
	}
	var left int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_tables WHERE tablename LIKE '%synapse%' AND tablename <> 'synapse_state'").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d staging tables left after the run; want 0", left)
	}
	if _, err := conn.Exec(context.Background(), "CREATE TABLE other (id text, v vector(3))"); err != nil {
		t.Fatal(err)
	}
	r := run(t, "embed", in, "-m", model, "-o", tableURL(s, "other"))
	r.wantCode(t, 2)
	if !strings.Contains(r.stderr, "not a synapse table") {
		t.Errorf("a table of other columns: got %q; want a message naming its columns", r.stderr)
	}
}

// TestRefusals: what is refused before any work, exit 2, the secret never printed.
func TestRefusals(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	in := writeJSONL(t, filepath.Join(t.TempDir(), "docs.jsonl"), corpus(50))
	u, _ := url.Parse(tableURL(s, "docs"))
	wrong := "WrongSecret-" + s.Password[:6]
	u.User = url.UserPassword(pgtest.User, wrong)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"wrong password", []string{"-o", u.String()}, "password authentication failed"},
		{"int8", []string{"-o", tableURL(s, "docs"), "--dtype", "int8"}, "pgvector has no int8 type"},
		{"sync shard", []string{"-o", tableURL(s, "docs"), "--shard", "1/2", "--sync"}, "--sync with --shard"},
		{"shard table too long", []string{"-o", tableURL(s, strings.Repeat("t", 40)), "--shard", "10/100"}, "longer than PostgreSQL's 63 bytes"},
		{"sync to a file", []string{"-o", filepath.Join(t.TempDir(), "x.arrow"), "--sync"}, "--sync: the output is a PostgreSQL table"},
		{"bad table", []string{"-o", tableURL(s, "Bad-Name")}, "table \"Bad-Name\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, append([]string{"embed", in, "-m", model}, tc.args...)...)
			r.wantCode(t, 2)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("got %q; want a message with %q", r.stderr, tc.want)
			}
			for _, secret := range []string{s.Password, wrong} {
				if strings.Contains(r.stdout+r.stderr, secret) {
					t.Errorf("a password is in the output:\n%s\n%s", r.stdout, r.stderr)
				}
			}
		})
	}
}

// TestSettingsMismatch: a table made under other vector settings is
// refused (exit 2, naming the difference), by a full run and by a sync.
func TestSettingsMismatch(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	in := writeJSONL(t, filepath.Join(t.TempDir(), "docs.jsonl"), corpus(50))
	run(t, "embed", in, "-m", model, "-o", tableURL(s, "docs"), "--chunk-tokens", "64").wantCode(t, 0)
	for _, extra := range [][]string{nil, {"--sync"}} {
		r := run(t, append([]string{"embed", in, "-m", model, "-o", tableURL(s, "docs")}, extra...)...)
		r.wantCode(t, 2)
		if !strings.Contains(r.stderr, "other vector settings") || !strings.Contains(r.stderr, "chunk") {
			t.Errorf("%v: got %q; want a refusal naming the chunk setting", extra, r.stderr)
		}
	}
	r := run(t, "embed", in, "-m", model, "-o", tableURL(s, "docs"), "--dims", "16", "--chunk-tokens", "64")
	r.wantCode(t, 2)
	if !strings.Contains(r.stderr, "vector(16)") {
		t.Errorf("other dims: got %q; want a refusal naming vector(16)", r.stderr)
	}
}

// committedRows is the rows an interrupted run of table committed (its checkpoint's).
func committedRows(conn *pgx.Conn, table string) int64 {
	var n int64
	err := conn.QueryRow(context.Background(), "SELECT (convert_from(checkpoint, 'UTF8')::jsonb->>'rows')::bigint FROM synapse_state WHERE tbl = $1", table).Scan(&n)
	if err != nil {
		return 0
	}
	return n
}

// killAfterCommit starts a run and, once it has committed a batch, calls kill.
func killAfterCommit(t *testing.T, conn *pgx.Conn, table string, kill func(pid int), args ...string) result {
	t.Helper()
	cmd := command(context.Background(), t, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a committed batch", func() bool {
		return committedRows(conn, table) > 0
	})
	kill(cmd.Process.Pid)
	err := cmd.Wait()
	code := 0
	if ee, ok := err.(interface{ ExitCode() int }); ok {
		code = ee.ExitCode()
	}
	return result{out.String(), errb.String(), code}
}

// TestResumeAfterKill: synapse killed (SIGKILL) after a committed batch;
// nothing is published, and --resume gives the full run's rows, each once.
func TestResumeAfterKill(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	in := writeJSONL(t, filepath.Join(t.TempDir(), "docs.jsonl"), shortCorpus(5000))
	want := embedFile(t, model, in)
	conn := s.Conn(t)
	args := []string{"embed", in, "-m", model, "-o", tableURL(s, "docs"), "--workers", "1"}
	killAfterCommit(t, conn, "docs", func(pid int) { syscall.Kill(pid, syscall.SIGKILL) }, args...)
	if n := committedRows(conn, "docs"); n >= int64(len(want)) {
		t.Skipf("the run committed all %d rows before the kill: nothing to resume", n)
	}
	assertUnpublished(t, conn, "docs")
	run(t, append(args, "--resume")...).wantCode(t, 0)
	sameRows(t, tableRows(t, conn, "docs"), want)
}

func assertUnpublished(t *testing.T, conn *pgx.Conn, table string) {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Errorf("table %s exists after an interrupted first run; want nothing published", table)
	}
}

// TestServerKilledMidRun: the server dies while synapse COPYs: exit 1,
// nothing published; after a restart --resume finishes with the full rows.
func TestServerKilledMidRun(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	in := writeJSONL(t, filepath.Join(t.TempDir(), "docs.jsonl"), shortCorpus(5000))
	want := embedFile(t, model, in)
	conn := s.Conn(t)
	args := []string{"embed", in, "-m", model, "-o", tableURL(s, "docs"), "--workers", "1"}
	r := killAfterCommit(t, conn, "docs", func(int) { s.Kill() }, args...)
	r.wantCode(t, 1)
	if strings.Contains(r.stdout+r.stderr, s.Password) {
		t.Errorf("the password is in the output:\n%s", r.stderr)
	}
	s.Restart(t)
	conn = s.Conn(t)
	assertUnpublished(t, conn, "docs")
	run(t, append(args, "--resume")...).wantCode(t, 0)
	sameRows(t, tableRows(t, conn, "docs"), want)
}

// TestDtypes: --dtype float16 writes halfvec(D) and binary bit(D), the
// values those of the float32 run (rounded; the sign bits).
func TestDtypes(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	in := writeJSONL(t, filepath.Join(t.TempDir(), "docs.jsonl"), corpus(40))
	want := embedFile(t, model, in)
	conn := s.Conn(t)
	ctx := context.Background()
	run(t, "embed", in, "-m", model, "-o", tableURL(s, "half"), "--dtype", "float16").wantCode(t, 0)
	run(t, "embed", in, "-m", model, "-o", tableURL(s, "bits"), "--dtype", "binary").wantCode(t, 0)
	var types []string
	for _, table := range []string{"half", "bits"} {
		var typ string
		if err := conn.QueryRow(ctx, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'embedding'", table).Scan(&typ); err != nil {
			t.Fatal(err)
		}
		types = append(types, typ)
	}
	if got := strings.Join(types, " "); got != "halfvec(32) bit(32)" {
		t.Errorf("embedding types %s; want halfvec(32) bit(32)", got)
	}
	rows, err := conn.Query(ctx, "SELECT h.chunk_id, h.embedding::real[], b.embedding::text FROM half h JOIN bits b USING (chunk_id)")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var id, bits string
		var h []float32
		if err := rows.Scan(&id, &h, &bits); err != nil {
			t.Fatal(err)
		}
		n++
		ref := want[id].emb
		var wantBits strings.Builder
		for i, x := range ref {
			if d := h[i] - x; d > 1e-3 || d < -1e-3 {
				t.Errorf("%s: halfvec[%d] = %v; want %v", id, i, h[i], x)
			}
			wantBits.WriteByte("01"[b2i(x > 0)])
		}
		if bits != wantBits.String() {
			t.Errorf("%s: bit %s; want %s", id, bits, wantBits.String())
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Errorf("got %d rows in both tables; want %d", n, len(want))
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
