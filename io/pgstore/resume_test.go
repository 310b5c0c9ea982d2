package pgstore_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/synapse-embed/synapse/io/pgstore/pgtest"
)

// TestResumeNamesOptions: a --resume of an interrupted table run with
// other options is refused (exit 2) naming each option that differs, as
// for a file, not with the settings records.
func TestResumeNamesOptions(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	in := writeJSONL(t, filepath.Join(t.TempDir(), "docs.jsonl"), shortCorpus(5000))
	conn := s.Conn(t)
	args := []string{"embed", in, "-m", model, "-o", tableURL(s, "docs"), "--workers", "1"}
	killAfterCommit(t, conn, "docs", func(pid int) { syscall.Kill(pid, syscall.SIGKILL) }, args...)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--truncate"}, "--truncate was not set in the interrupted run and is now"},
		{[]string{"--dtype", "binary"}, "--dtype was float32 in the interrupted run and is binary now"},
	} {
		r := run(t, append(append(args, "--resume"), tc.args...)...)
		r.wantCode(t, 2)
		if !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, `{"model_digest"`) || strings.Contains(r.stderr, "schema") {
			t.Errorf("resume with %s: stderr does not name the difference as %q (or shows settings records):\n%s", tc.args, tc.want, r.stderr)
		}
	}
	run(t, append(args, "--resume")...).wantCode(t, 0)
}
