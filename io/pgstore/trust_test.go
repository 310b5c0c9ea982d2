package pgstore_test

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/synapse-embed/synapse/io/pgstore/pgtest"
)

// admin runs statements as the cluster's superuser (SET ROLE first to act
// as another role), failing the test on an error.
func admin(t *testing.T, s *pgtest.Server, statements ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.AdminURL+"&dbname="+pgtest.Database)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range statements {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestReusedTablesTrust: in a schema where another role may create tables,
// she creates synapse_state (or a table named as synapse names its own)
// first, grants it to everyone and puts a trigger on it; the run refuses
// before any work (exit 2) naming the table and its owner, and her trigger
// never fires. A trigger, a rule or a row-level security policy on the
// run's own reused tables is refused too.
func TestReusedTablesTrust(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	in := writeJSONL(t, filepath.Join(t.TempDir(), "docs.jsonl"), corpus(20))
	admin(t, s,
		"CREATE ROLE mallory LOGIN",
		"GRANT USAGE, CREATE ON SCHEMA public TO mallory",
		"CREATE TABLE public.fired (n int)",
		"GRANT INSERT, SELECT ON public.fired TO PUBLIC",
		`CREATE FUNCTION public.steal() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.fired VALUES (1); RETURN NEW; END $$`,
		"GRANT EXECUTE ON FUNCTION public.steal() TO PUBLIC")
	embed := func(t *testing.T, table string, more ...string) result {
		return run(t, append([]string{"embed", in, "-m", model, "-o", tableURL(s, table)}, more...)...)
	}
	for _, name := range []string{"synapse_state", "docs_synapse_keep", "docs_synapse_shard_1_of_2"} {
		t.Run("hers "+name, func(t *testing.T) {
			admin(t, s, "SET ROLE mallory",
				"CREATE TABLE public."+name+" (tbl text PRIMARY KEY, checkpoint bytea, manifest bytea)",
				"GRANT ALL ON public."+name+" TO PUBLIC",
				"CREATE TRIGGER t BEFORE INSERT OR UPDATE ON public."+name+" FOR EACH ROW EXECUTE FUNCTION public.steal()")
			defer admin(t, s, "DROP TABLE public."+name)
			r := embed(t, "docs")
			r.wantCode(t, 2)
			if !strings.Contains(r.stderr, "table "+name+" is owned by role mallory") {
				t.Errorf("stderr %q; want it to name %s and its owner mallory", r.stderr, name)
			}
			if left, _ := filepath.Glob(filepath.Join(workDir(t), "docs.errors.jsonl*")); len(left) > 0 {
				t.Errorf("the refused run left %v behind", left)
			}
			var fired int
			if err := s.Conn(t).QueryRow(context.Background(), "SELECT count(*) FROM public.fired").Scan(&fired); err != nil || fired != 0 {
				t.Errorf("her trigger fired %d times (%v); want never", fired, err)
			}
		})
	}
	embed(t, "docs").wantCode(t, 0) // synapse_state is now the run's own
	t.Run("a second role after the first", func(t *testing.T) {
		admin(t, s, "CREATE ROLE second LOGIN PASSWORD 'second-pw'", "GRANT USAGE, CREATE ON SCHEMA public TO second")
		u, err := url.Parse(tableURL(s, "theirs"))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword("second", "second-pw")
		r := run(t, "embed", in, "-m", model, "-o", u.String())
		r.wantCode(t, 2)
		if !strings.Contains(r.stderr, "table synapse_state is owned by role "+pgtest.User) || !strings.Contains(r.stderr, "search_path") {
			t.Errorf("stderr %q; want it to say synapse_state is %s's and how to use a schema of one's own", r.stderr, pgtest.User)
		}
		if left, _ := filepath.Glob(filepath.Join(workDir(t), "theirs.errors.jsonl*")); len(left) > 0 {
			t.Errorf("the refused run left %v behind", left)
		}
	})
	for _, tc := range []struct{ name, add, drop, says string }{
		{"trigger", "CREATE TRIGGER t BEFORE INSERT ON synapse_state FOR EACH ROW EXECUTE FUNCTION public.steal()", "DROP TRIGGER t ON synapse_state", "1 trigger(s)"},
		{"rule", "CREATE RULE r AS ON INSERT TO synapse_state DO ALSO INSERT INTO public.fired VALUES (2)", "DROP RULE r ON synapse_state", "1 rule(s)"},
		{"policy", "CREATE POLICY p ON synapse_state USING (true)", "DROP POLICY p ON synapse_state", "1 row-level security policy(s)"},
		{"row security", "ALTER TABLE synapse_state ENABLE ROW LEVEL SECURITY", "ALTER TABLE synapse_state DISABLE ROW LEVEL SECURITY", "row-level security enabled"},
	} {
		t.Run("own state table with a "+tc.name, func(t *testing.T) {
			admin(t, s, "SET ROLE "+pgtest.User, tc.add)
			defer admin(t, s, "SET ROLE "+pgtest.User, tc.drop)
			r := embed(t, "docs")
			r.wantCode(t, 2)
			if !strings.Contains(r.stderr, "table synapse_state has "+tc.says) {
				t.Errorf("stderr %q; want it to say synapse_state has %s", r.stderr, tc.says)
			}
		})
	}
}

// TestViewOnTable: a view or a materialized view on the output table stops
// a full run before any work (exit 2, naming it and --sync), since the
// publish drops the table; --sync keeps the table, and runs.
func TestViewOnTable(t *testing.T) {
	s := pgtest.Start(t)
	model := tinyModel(t)
	in := writeJSONL(t, filepath.Join(t.TempDir(), "docs.jsonl"), corpus(20))
	out := tableURL(s, "docs")
	run(t, "embed", in, "-m", model, "-o", out).wantCode(t, 0)
	for _, kind := range []string{"VIEW", "MATERIALIZED VIEW"} {
		t.Run(kind, func(t *testing.T) {
			admin(t, s, "SET ROLE "+pgtest.User, "CREATE "+kind+" docs_ids AS SELECT DISTINCT id FROM docs")
			defer admin(t, s, "SET ROLE "+pgtest.User, "DROP "+kind+" docs_ids")
			r := run(t, "embed", in, "-m", model, "-o", out)
			r.wantCode(t, 2)
			if !strings.Contains(r.stderr, "docs_ids") || !strings.Contains(r.stderr, "--sync") || strings.Contains(r.stdout, "rows read") {
				t.Errorf("stderr %q stdout %q; want a refusal before work naming docs_ids and --sync", r.stderr, r.stdout)
			}
			run(t, "embed", in, "-m", model, "-o", out, "--sync").wantCode(t, 0)
		})
	}
}
