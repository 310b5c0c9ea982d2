package pgstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/synapse-embed/synapse/io/output"
)

// The shards of a table and their merge (see "Shards" in the package doc).

// ShardDone reports whether shard i of n of the target's table has
// recorded its manifest: it is done, and not merged yet.
func ShardDone(ctx context.Context, t *Target, i, n int) (bool, error) {
	conn, err := dial(ctx, t)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	ok, err := hasManifests(ctx, conn)
	if err != nil || !ok {
		return false, t.wrapNil("read "+StateTable, err)
	}
	var done bool
	err = conn.QueryRow(ctx, "SELECT coalesce((SELECT manifest IS NOT NULL FROM "+StateTable+" WHERE tbl = $1), false)", stateKey(t.Table, i, n)).Scan(&done)
	return done, t.wrapNil("read "+StateTable, err)
}

// hasManifests reports whether StateTable exists with its manifest column.
func hasManifests(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'manifest' AND NOT attisdropped)", StateTable).Scan(&ok)
	return ok, err
}

// wrapNil is wrap, nil for nil.
func (t *Target) wrapNil(op string, err error) error {
	if err == nil {
		return nil
	}
	return t.wrap(op, err)
}

// MergeSummary is what Merge published.
type MergeSummary struct {
	Shards       int
	Rows         output.ManifestRows // the shards' counters, added up
	OutputRows   int64               // the table's rows
	ErrorRecords int64               // the merged errors file's
	Errors       string              // the merged errors file
}

// Merge publishes the shards of the target's table. It takes the table's
// lock (ErrInUse while a run or a merge writes it) and every done shard's
// (a shard still running is not done), and refuses, publishing nothing:
// shards not done (output.ErrMissingShards, naming them); shards of
// different jobs or shard counts (output.ErrForeignShard); a manifest
// whose counts disagree with its errors file or its table
// (output.ErrManifestMismatch); an id two shards hold
// (output.ErrIDInTwoShards); a table T that is not a synapse table of
// the shards' settings (ErrRefused). Then it writes the shards' errors
// files into errorsPath, as file merge does, and in one transaction
// replaces T by the union of the shards' tables and drops them and their
// rows of StateTable: a reader sees the old table or the new one.
func Merge(ctx context.Context, t *Target, errorsPath string) (MergeSummary, error) {
	conn, err := dial(ctx, t)
	if err != nil {
		return MergeSummary{}, err
	}
	defer conn.Close(context.Background())
	m := &merger{t: t, conn: conn, ctx: ctx}
	if ok, err := m.lock(t.Table); err != nil || !ok {
		return MergeSummary{}, cmpErr(err, fmt.Errorf("%w: %s: table %s is being written by another run or merge", ErrInUse, t, t.Table))
	}
	if err := m.find(); err != nil {
		return MergeSummary{}, err
	}
	if err := output.CheckShardManifests(ctx, m.ms, m.names); err != nil {
		return MergeSummary{}, err
	}
	if err := m.checkTables(); err != nil {
		return MergeSummary{}, err
	}
	if err := m.checkIDs(); err != nil {
		return MergeSummary{}, err
	}
	sum := MergeSummary{Shards: len(m.ms), Rows: output.SumRows(m.ms), Errors: errorsPath}
	if sum.ErrorRecords, err = output.MergeErrorFiles(ctx, m.ms, m.names, errorsPath); err != nil {
		return sum, err
	}
	for _, n := range m.rows {
		sum.OutputRows += n
	}
	return sum, m.publish()
}

// cmpErr is err if set, else fallback.
func cmpErr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}

// merger is one Merge's session and what it found.
type merger struct {
	t      *Target
	conn   *pgx.Conn
	ctx    context.Context
	n      int
	keys   []string          // the shards' rows of StateTable, by shard
	names  []string          // the same, as messages name them
	ms     []output.Manifest // by shard
	tables []string          // the shards' tables, by shard
	rows   []int64           // their rows
	cols   [][2]string       // their columns (shard 0's; checked the same)
}

// lock takes the advisory lock of a state key for the session.
func (m *merger) lock(key string) (bool, error) {
	var ok bool
	if err := m.conn.QueryRow(m.ctx, "SELECT pg_try_advisory_lock($1)", lockKey(key)).Scan(&ok); err != nil {
		return false, m.t.wrap("lock", err)
	}
	return ok, nil
}

// shardRow is a shard's row of StateTable.
type shardRow struct {
	i, n     int
	key      string
	manifest []byte // nil until the shard is done
}

// shardRows are the table's shards' rows of StateTable.
func (m *merger) shardRows() ([]shardRow, error) {
	ok, err := hasManifests(m.ctx, m.conn)
	if err != nil || !ok {
		return nil, m.t.wrapNil("read "+StateTable, err)
	}
	rows, err := m.conn.Query(m.ctx, "SELECT tbl, manifest FROM "+StateTable+" WHERE starts_with(tbl, $1) ORDER BY tbl", m.t.Table+"/shard-")
	if err != nil {
		return nil, m.t.wrap("read "+StateTable, err)
	}
	key := regexp.MustCompile(`^` + m.t.Table + `/shard-(\d+)-of-(\d+)$`)
	var out []shardRow
	var r shardRow
	_, err = pgx.ForEachRow(rows, []any{&r.key, &r.manifest}, func() error {
		if g := key.FindStringSubmatch(r.key); g != nil {
			r.i, _ = strconv.Atoi(g[1])
			r.n, _ = strconv.Atoi(g[2])
			out = append(out, r)
		}
		return nil
	})
	return out, m.t.wrapNil("read "+StateTable, err)
}

// find reads the manifests of all N shards, each locked: the shards not
// done are named (ErrMissingShards), rows of two shard counts refused.
func (m *merger) find() error {
	found, err := m.shardRows()
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return fmt.Errorf("%w: %s: no shard of table %s has run (no row %s/shard-I-of-N in %s)", output.ErrMissingShards, m.t, m.t.Table, m.t.Table, StateTable)
	}
	counts := map[int][]string{}
	for _, r := range found {
		counts[r.n] = append(counts[r.n], r.key)
	}
	if len(counts) > 1 {
		return fmt.Errorf("%w: %s: %s holds shards of table %s of runs with different shard counts (%s): merge publishes one job; drop the other run's rows and tables (DELETE FROM %s WHERE tbl = '%s/shard-I-of-N'; DROP TABLE %s)",
			output.ErrForeignShard, m.t, StateTable, m.t.Table, describeCounts(counts), StateTable, m.t.Table, m.t.Table+"_synapse_shard_I_of_N")
	}
	m.n = found[0].n
	byShard := map[int]shardRow{}
	for _, r := range found {
		byShard[r.i] = r
	}
	var missing, running []string
	for i := range m.n {
		r, ok := byShard[i]
		if ok && r.manifest != nil {
			locked, err := m.lock(r.key)
			if err != nil {
				return err
			}
			if locked {
				if err := m.add(r); err != nil {
					return err
				}
				continue
			}
			running = append(running, strconv.Itoa(i))
		}
		missing = append(missing, strconv.Itoa(i))
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s: shard %s of %d of table %s not done (no manifest in %s%s): run it again, then merge",
			output.ErrMissingShards, m.t, strings.Join(missing, ", "), m.n, m.t.Table, StateTable, runningNote(running))
	}
	return nil
}

func runningNote(running []string) string {
	if len(running) == 0 {
		return ""
	}
	return "; shard " + strings.Join(running, ", ") + " is running again (--force)"
}

func describeCounts(counts map[int][]string) string {
	var parts []string
	for _, keys := range counts {
		parts = append(parts, strings.Join(keys, ", "))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// add reads a done shard's manifest.
func (m *merger) add(r shardRow) error {
	name := StateTable + " row " + r.key
	man, err := output.DecodeManifest(r.manifest, name)
	if err != nil {
		return fmt.Errorf("%w: %v", output.ErrManifestMismatch, err)
	}
	table := ShardTable(m.t.Table, r.i, r.n)
	if man.Command != "embed" || man.Output != table {
		return fmt.Errorf("%w: %s: a manifest of %s %s; want embed %s", output.ErrForeignShard, name, man.Command, man.Output, table)
	}
	m.keys, m.names, m.ms, m.tables = append(m.keys, r.key), append(m.names, name), append(m.ms, man), append(m.tables, table)
	return nil
}

// checkTables refuses shards' tables that are gone, differ in their
// columns or settings, or hold other rows than their manifests say, and a
// table T of other columns or settings.
func (m *merger) checkTables() error {
	var settings string
	for k, table := range m.tables {
		cols, err := columns(m.ctx, m.conn, table)
		if err != nil {
			return m.t.wrap("check "+table, err)
		}
		if cols == nil {
			return fmt.Errorf("%w: %s: %s says shard %d is done; its table %s is gone: run the shard again (--force)", output.ErrManifestMismatch, m.t, m.names[k], k, table)
		}
		comment, n, err := m.describe(table)
		if err != nil {
			return err
		}
		if k == 0 {
			m.cols, settings = cols, comment
		}
		switch {
		case !slices.Equal(cols, m.cols):
			return fmt.Errorf("%w: %s: table %s has other columns than %s", output.ErrForeignShard, m.t, table, m.tables[0])
		case comment != settings:
			return fmt.Errorf("%w: %s: table %s was written under other settings than %s", output.ErrForeignShard, m.t, table, m.tables[0])
		case n != *m.ms[k].OutputRows:
			return fmt.Errorf("%w: %s: %s says table %s has %d rows; it has %d", output.ErrManifestMismatch, m.t, m.names[k], table, *m.ms[k].OutputRows, n)
		}
		m.rows = append(m.rows, n)
	}
	return m.checkTarget()
}

// describe is a table's comment (its run's settings) and rows.
func (m *merger) describe(table string) (string, int64, error) {
	var comment string
	var n int64
	err := m.conn.QueryRow(m.ctx, "SELECT coalesce(obj_description(to_regclass($1), 'pg_class'), ''), (SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()+")",
		pgx.Identifier{table}.Sanitize()).Scan(&comment, &n)
	if err != nil {
		return "", 0, m.t.wrap("check "+table, err)
	}
	return comment, n, nil
}

// checkTarget refuses a table T that is not a synapse table of the
// shards' columns, or whose rows were made under other settings: as a
// full run does, merge replaces only such a table.
func (m *merger) checkTarget() error {
	if err := m.t.checkReused(m.ctx, m.conn); err != nil {
		return err
	}
	if err := m.t.checkDependents(m.ctx, m.conn); err != nil {
		return err
	}
	cols, err := columns(m.ctx, m.conn, m.t.Table)
	if err != nil || cols == nil {
		return m.t.wrapNil("check table", err)
	}
	var embedding string
	for _, c := range m.cols {
		if c[0] == "embedding" {
			embedding = c[1]
		}
	}
	withText := slices.ContainsFunc(m.cols, func(c [2]string) bool { return c[0] == "text" })
	if err := m.t.compareColumns(cols, embedding, withText); err != nil {
		return err
	}
	var theirs, ours []string
	q := func(table string, dst *[]string) error {
		rows, err := m.conn.Query(m.ctx, "SELECT DISTINCT settings_digest FROM "+pgx.Identifier{table}.Sanitize()+" LIMIT 2")
		if err == nil {
			*dst, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		return err
	}
	if err := errors.Join(q(m.t.Table, &theirs), q(m.tables[0], &ours)); err != nil {
		return m.t.wrap("check settings", err)
	}
	if len(theirs) == 0 || len(ours) == 0 || slices.Equal(theirs, ours) {
		return nil
	}
	return fmt.Errorf("%w: %s: table %s was made under other vector settings (its rows have settings digest %s; the shards' %s): write another table (?table=), or drop it to start over",
		ErrRefused, m.t, m.t.Table, strings.Join(theirs, " and "), ours[0])
}

// checkIDs refuses an id two shards hold: in their errors files (those
// read before they failed) or their tables, as file merge does.
func (m *merger) checkIDs() error {
	ids := output.NewShardIDs(m.names)
	if err := ids.ClaimErrors(m.ctx, m.ms); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	for k, table := range m.tables {
		rows, err := m.conn.Query(m.ctx, "SELECT DISTINCT id FROM "+pgx.Identifier{table}.Sanitize())
		if err != nil {
			return m.t.wrap("read "+table, err)
		}
		var id string
		var claim error
		_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
			claim = ids.Claim(id, k)
			return claim
		})
		if claim != nil {
			return claim
		}
		if err != nil {
			return m.t.wrap("read "+table, err)
		}
	}
	return nil
}

// publish replaces T by the union of the shards' tables, drops them and
// their rows of StateTable, in one transaction: shard 0's table becomes T,
// the others' rows are added to it.
func (m *merger) publish() error {
	t := pgx.Identifier{m.t.Table}.Sanitize()
	err := pgx.BeginFunc(m.ctx, m.conn, func(tx pgx.Tx) error {
		var pkey string
		err := tx.QueryRow(m.ctx, "SELECT conname::text FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p'",
			pgx.Identifier{m.tables[0]}.Sanitize()).Scan(&pkey)
		if err != nil {
			return err
		}
		stmts := []string{
			"DROP TABLE IF EXISTS " + t,
			"ALTER TABLE " + pgx.Identifier{m.tables[0]}.Sanitize() + " RENAME TO " + t,
			"ALTER TABLE " + t + " RENAME CONSTRAINT " + pgx.Identifier{pkey}.Sanitize() + " TO " + pgx.Identifier{m.t.Table + "_pkey"}.Sanitize(),
		}
		for _, table := range m.tables[1:] {
			stg := pgx.Identifier{table}.Sanitize()
			stmts = append(stmts, "INSERT INTO "+t+" SELECT * FROM "+stg, "DROP TABLE "+stg)
		}
		for _, q := range stmts {
			if _, err := tx.Exec(m.ctx, q); err != nil {
				return err
			}
		}
		_, err = tx.Exec(m.ctx, "DELETE FROM "+StateTable+" WHERE tbl = ANY($1)", m.keys)
		return err
	})
	return m.t.wrapNil("publish", err)
}
