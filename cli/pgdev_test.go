package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/synapse-embed/synapse/io/pgstore/pgtest"
)

// pgDev runs examples/pg-dev.sh (make pg-dev's script) with the server at
// server and its directory dir.
func pgDev(t *testing.T, server, dir, verb string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", repoPath("examples", "pg-dev.sh"), verb)
	cmd.Env = append(os.Environ(), "PG_SERVER="+server, "PG_DEV_DIR="+dir, "PG_USER="+pgtest.SystemUser)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("pg-dev.sh %s: %v", verb, err)
	}
	return string(out), code
}

// TestPGDev: make pg-dev's server starts, says its -o URL, takes an
// embedding run at that URL (the password from the file it names), says
// so again when started twice, and stops, its directory removed.
func TestPGDev(t *testing.T) {
	server := os.Getenv(pgtest.ServerEnv)
	if _, err := os.Stat(filepath.Join(server, "bin", "pg_ctl")); server == "" || err != nil {
		msg := "pg-dev: the PostgreSQL server is not installed (make pg-server; " + pgtest.ServerEnv + ")"
		if os.Getenv(pgtest.RequireEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	base := t.TempDir()
	if os.Geteuid() == 0 { // the server's user must reach its directory
		for _, d := range []string{filepath.Dir(base), base} {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := filepath.Join(base, "pgdev")
	out, code := pgDev(t, server, dir, "start")
	t.Cleanup(func() { pgDev(t, server, dir, "stop") })
	if code != 0 {
		t.Fatalf("pg-dev start: exit %d\n%s", code, out)
	}
	m := regexp.MustCompile(`-o '(postgresql://[^']+)'`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "make pg-dev-stop") {
		t.Fatalf("pg-dev start does not print the -o URL and how to stop it:\n%s", out)
	}
	url := m[1]
	pw, err := os.ReadFile(filepath.Join(dir, "password"))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "password")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("password file: %v, mode %v; want 0600", err, st.Mode())
	}
	in := filepath.Join(base, "in.jsonl")
	writeJSONL(t, in, testCorpus(20))
	env := []string{"PGPASSWORD=" + string(pw)}
	res := runSynapse(t, env, "embed", in, "-m", tinyModel(t), "-o", url, "--errors", filepath.Join(base, "errors.jsonl"))
	res.wantCode(t, exitOK)
	cfg, err := pgx.ParseConfig(url[:strings.Index(url, "?")])
	if err != nil {
		t.Fatal(err)
	}
	cfg.Password = string(pw)
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var docs int
	err = conn.QueryRow(context.Background(), "SELECT count(DISTINCT id) FROM trial").Scan(&docs)
	conn.Close(context.Background())
	if err != nil || docs != 20 {
		t.Errorf("table trial: %d documents (%v); want 20", docs, err)
	}
	if out, code := pgDev(t, server, dir, "start"); code != 0 || !strings.Contains(out, "already running") || !strings.Contains(out, url) {
		t.Errorf("pg-dev start again: exit %d; want it to say it runs, and its URL:\n%s", code, out)
	}
	if out, code := pgDev(t, server, dir, "stop"); code != 0 {
		t.Fatalf("pg-dev stop: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after stop, %s: %v; want it removed", dir, err)
	}
	if out, code := pgDev(t, server, dir, "status"); code != 1 || !strings.Contains(out, "not running") {
		t.Errorf("pg-dev status after stop: exit %d\n%s", code, out)
	}
}
