package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/synapse-embed/synapse/io/vector"
)

// Config is what a run writes: the table's shape and its settings.
type Config struct {
	Dims     int
	Dtype    vector.Dtype
	column   string // ColumnType's answer: vector(D), halfvec(D) or bit(D)
	Digest   string // the run's settings digest (vector.Settings.Digest)
	Settings string // the run's settings JSON, kept as the table's comment
	Sync     bool   // the table is the previous output (see the package doc)
	// Shard and Shards: with Shards > 0 the run is shard Shard of Shards
	// (--shard I/N): it writes its own staging table and checkpoint row
	// and, when done, records its manifest instead of publishing.
	Shard, Shards int
	WithText      bool // the table has a text column: each chunk's text (--with-text)
	// Sparse: the run writes sparse vectors (--vectors sparse) over a
	// vocabulary of Dims terms, as sparsevec(Dims) (SparseColumnType).
	Sparse bool
	// Diff names the first difference between the table's settings (its
	// comment) and the run's; nil: the digests are compared only.
	Diff func(tableSettings string) string
}

// Store is an open PostgreSQL output. One goroutine owns it.
type Store struct {
	t       *Target
	cfg     Config
	key     string // the run's row in StateTable (stateKey)
	stage   string // the run's staging table
	done    []byte // a shard's manifest, recorded by Publish (SetManifest)
	conn    *pgx.Conn
	ctx     context.Context
	exists  bool                // T exists
	known   map[string][32]byte // sync: T's documents and their doc_hash
	pending [][]any             // rows written since the last Save
	kept    [][]any             // sync: ids kept since the last Save
	deleted int64               // documents the sync's publish deleted
}

// Connect logs in and checks the server has pgvector with the type
// column needs; the connection is the caller's to close.
func Connect(ctx context.Context, t *Target, column string) (*pgx.Conn, error) {
	conn, err := dial(ctx, t)
	if err != nil {
		return nil, err
	}
	var ext string
	err = conn.QueryRow(ctx, "SELECT coalesce((SELECT extversion FROM pg_extension WHERE extname = 'vector'), '')").Scan(&ext)
	if err != nil {
		conn.Close(ctx)
		return nil, t.wrap("connect", err)
	}
	if ext == "" {
		conn.Close(ctx)
		return nil, fmt.Errorf("%w: %s: the database has no extension vector (pgvector): CREATE EXTENSION vector", ErrRefused, t)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT to_regtype($1) IS NOT NULL", typeOf(column)).Scan(&ok); err != nil {
		conn.Close(ctx)
		return nil, t.wrap("connect", err)
	}
	if !ok {
		conn.Close(ctx)
		return nil, fmt.Errorf("%w: %s: pgvector %s has no type %s (halfvec, bit and sparsevec need pgvector 0.7)", ErrRefused, t, ext, typeOf(column))
	}
	return conn, nil
}

// dial logs in.
func dial(ctx context.Context, t *Target) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, t.config)
	if err != nil {
		return nil, t.wrap("connect", err)
	}
	return conn, nil
}

// Check is the check before any work: the login, pgvector and its type
// for column, and, when T exists, that its columns are a synapse table's
// (their embedding type is checked by Open, once the dims are known).
//
// The tables synapse would reuse must be the connecting role's, with no
// trigger, rule or policy (checkReused); unless replaces is false (--sync
// keeps the table; a shard replaces nothing, its merge does), no view may
// depend on the table.
func Check(ctx context.Context, t *Target, column string, withText, replaces bool) error {
	conn, err := Connect(ctx, t, column)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := t.checkReused(ctx, conn); err != nil {
		return err
	}
	if replaces {
		if err := t.checkDependents(ctx, conn); err != nil {
			return err
		}
	}
	cols, err := columns(ctx, conn, t.Table)
	if err != nil {
		return t.wrap("check table", err)
	}
	if cols == nil {
		return nil
	}
	return t.compareColumns(cols, "", withText)
}

// Open connects, takes the table's lock and checks the table against cfg:
// a table of other columns, embedding type or settings is refused.
func Open(ctx context.Context, t *Target, cfg Config) (*Store, error) {
	var err error
	if cfg.Sparse {
		cfg.column, err = SparseColumnType(cfg.Dims), nil
	} else if cfg.column, err = ColumnType(cfg.Dtype, cfg.Dims); err != nil {
		return nil, err
	}
	conn, err := Connect(ctx, t, cfg.column)
	if err != nil {
		return nil, err
	}
	s := &Store{t: t, cfg: cfg, conn: conn, ctx: ctx, key: t.Table, stage: t.Table + stagingSuffix}
	if cfg.Shards > 0 {
		s.key, s.stage = stateKey(t.Table, cfg.Shard, cfg.Shards), ShardTable(t.Table, cfg.Shard, cfg.Shards)
	}
	if err := s.open(); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return s, nil
}

func (s *Store) open() error {
	var locked bool
	if err := s.conn.QueryRow(s.ctx, "SELECT pg_try_advisory_lock($1)", lockKey(s.key)).Scan(&locked); err != nil {
		return s.t.wrap("lock", err)
	}
	if !locked && s.cfg.Shards > 0 {
		return fmt.Errorf("%w: %s: shard %d of %d of table %s is being written by another run", ErrInUse, s.t, s.cfg.Shard, s.cfg.Shards, s.t.Table)
	}
	if !locked {
		return fmt.Errorf("%w: %s: table %s is being written by another run", ErrInUse, s.t, s.t.Table)
	}
	if err := s.t.checkReused(s.ctx, s.conn); err != nil { // again, under the lock
		return err
	}
	cols, err := columns(s.ctx, s.conn, s.t.Table)
	if err != nil {
		return s.t.wrap("check table", err)
	}
	s.exists = cols != nil
	if s.exists {
		if err := s.t.compareColumns(cols, s.cfg.column, s.cfg.WithText); err != nil {
			return err
		}
		if err := s.checkSettings(); err != nil {
			return err
		}
	}
	if err := ensureState(s.ctx, s.conn); err != nil {
		return s.t.wrap("create "+StateTable, err)
	}
	if s.cfg.Sync && s.exists {
		return s.loadKnown()
	}
	return nil
}

// ErrInUse: another run holds the table's lock.
var ErrInUse = errors.New("in use")

// ensureState creates StateTable, or adds the manifest column a table of
// an older synapse lacks, under a lock: runs that start together (the
// shards of a job) would otherwise race to create it.
func ensureState(ctx context.Context, conn *pgx.Conn) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey(StateTable)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+StateTable+" (tbl text PRIMARY KEY, checkpoint bytea NOT NULL, manifest bytea)")
		if err != nil {
			return err
		}
		var has bool
		err = tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'manifest' AND NOT attisdropped)", StateTable).Scan(&has)
		if err == nil && !has {
			_, err = tx.Exec(ctx, "ALTER TABLE "+StateTable+" ADD COLUMN manifest bytea")
		}
		return err
	})
}

func lockKey(table string) int64 {
	h := fnv.New64a()
	h.Write([]byte("synapse pgstore " + table))
	return int64(h.Sum64())
}

// want are the columns of a table, in order; embedding "" = any type.
// With withText a text column follows chunk_id.
func want(embedding string, withText bool) [][2]string {
	cols := [][2]string{{"id", "text"}, {"chunk", "integer"}, {"chunk_id", "text"}}
	if withText {
		cols = append(cols, [2]string{"text", "text"})
	}
	return append(cols, [2]string{"embedding", embedding}, [2]string{"doc_hash", "bytea"}, [2]string{"settings_digest", "text"})
}

// names are the column names of want.
func names(cols [][2]string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c[0]
	}
	return out
}

// columns are a table's columns and their types; nil when it does not exist.
func columns(ctx context.Context, conn *pgx.Conn, table string) ([][2]string, error) {
	rows, err := conn.Query(ctx, `SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, pgx.Identifier{table}.Sanitize())
	if err != nil {
		return nil, err
	}
	var cols [][2]string
	for rows.Next() {
		var c [2]string
		if err := rows.Scan(&c[0], &c[1]); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

func (t *Target) compareColumns(got [][2]string, embedding string, withText bool) error {
	w := want(embedding, withText)
	var have []string
	for _, c := range got {
		have = append(have, c[0]+" "+c[1])
	}
	bad := len(got) != len(w)
	for i := 0; !bad && i < len(w); i++ {
		bad = got[i][0] != w[i][0] || (w[i][1] != "" && got[i][1] != w[i][1])
	}
	if !bad {
		return nil
	}
	if embedding == "" {
		embedding = "vector(D)"
	}
	text, hint := "", ":"
	if withText {
		text = ", text text"
	}
	hasText := slices.ContainsFunc(got, func(c [2]string) bool { return c[0] == "text" })
	switch {
	case hasText && !withText && len(got) == len(w)+1:
		hint = "; it was written with --with-text: give --with-text, or"
	case !hasText && withText && len(got) == len(w)-1:
		hint = "; it was written without --with-text: leave out --with-text, or"
	}
	return fmt.Errorf("%w: %s: table %s has the columns (%s), not a synapse table's (id text, chunk integer, chunk_id text%s, embedding %s, doc_hash bytea, settings_digest text)%s name another table (?table=)",
		ErrRefused, t, t.Table, strings.Join(have, ", "), text, embedding, hint)
}

// checkSettings refuses a table whose rows were made under other settings.
func (s *Store) checkSettings() error {
	var comment string
	var digests []string
	err := s.conn.QueryRow(s.ctx, "SELECT coalesce(obj_description(to_regclass($1), 'pg_class'), '')",
		pgx.Identifier{s.t.Table}.Sanitize()).Scan(&comment)
	if err == nil {
		var rows pgx.Rows
		rows, err = s.conn.Query(s.ctx, "SELECT DISTINCT settings_digest FROM "+s.ident("")+" LIMIT 2")
		if err == nil {
			digests, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
	}
	if err != nil {
		return s.t.wrap("check settings", err)
	}
	if len(digests) == 0 || (len(digests) == 1 && digests[0] == s.cfg.Digest) {
		return nil
	}
	why := "its rows have settings digest " + strings.Join(digests, " and ") + "; this run's is " + s.cfg.Digest
	if s.cfg.Diff != nil && comment != "" {
		if d := s.cfg.Diff(comment); d != "" {
			why = d
		}
	}
	return fmt.Errorf("%w: %s: table %s was made under other vector settings (%s): write another table (?table=), or drop it to start over",
		ErrRefused, s.t, s.t.Table, why)
}

// loadKnown reads T's documents for a sync.
func (s *Store) loadKnown() error {
	rows, err := s.conn.Query(s.ctx, "SELECT id, min(doc_hash) FROM "+s.ident("")+" GROUP BY id")
	if err != nil {
		return s.t.wrap("read table", err)
	}
	s.known = map[string][32]byte{}
	var id string
	var h []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &h}, func() error {
		var k [32]byte
		copy(k[:], h)
		s.known[id] = k
		return nil
	})
	if err != nil {
		return s.t.wrap("read table", err)
	}
	return nil
}

// Holds reports whether the table (a sync's previous output) holds the
// document id, and with the doc_hash hash.
func (s *Store) Holds(id string, hash [32]byte) (known, same bool) {
	h, ok := s.known[id]
	return ok, ok && h == hash
}

// Known is the documents the table held when a sync began.
func (s *Store) Known() int { return len(s.known) }

// Syncing reports a sync run.
func (s *Store) Syncing() bool { return s.cfg.Sync }

// ident is T with a suffix, quoted.
func (s *Store) ident(suffix string) string { return pgx.Identifier{s.t.Table + suffix}.Sanitize() }

const (
	stagingSuffix = "_synapse_staging"
	keepSuffix    = "_synapse_keep"
)

// wrap is a failure of op: a rejected login or a permission is refused
// (ErrRefused), anything else (a lost connection, a killed server) is
// retryable. The message never holds the password.
func (t *Target) wrap(op string, err error) error {
	msg := scrub(err.Error(), t.password)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "28") || pe.Code == "42501" || pe.Code == "3D000" || pe.Code == "23505") {
		return fmt.Errorf("%w: %s: %s: %s", ErrRefused, t, op, msg)
	}
	return fmt.Errorf("%s: %s: %w", t, op, errors.New(msg))
}

// Close ends the session (releasing the lock); the staging table and the
// checkpoint stay for a resume.
func (s *Store) Close() {
	s.conn.Close(context.Background())
}

// Checkpoint is the interrupted run's checkpoint and the rows it committed
// to the staging table; nil when none.
func (s *Store) Checkpoint() ([]byte, int64, error) {
	var cp []byte
	err := s.conn.QueryRow(s.ctx, "SELECT checkpoint FROM "+StateTable+" WHERE tbl = $1", s.key).Scan(&cp)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, s.t.wrap("read checkpoint", err)
	}
	var n int64
	if err := s.conn.QueryRow(s.ctx, "SELECT count(*) FROM "+pgx.Identifier{s.stage}.Sanitize()).Scan(&n); err != nil {
		return nil, 0, s.t.wrap("read staging table", err)
	}
	return cp, n, nil
}

// Start discards an interrupted run (its staging tables and checkpoint)
// and begins one whose checkpoint is cp.
func (s *Store) Start(cp []byte) error {
	cols := make([]string, 0, 7)
	for _, c := range want(s.cfg.column, s.cfg.WithText) {
		cols = append(cols, pgx.Identifier{c[0]}.Sanitize()+" "+c[1]+" NOT NULL")
	}
	stg := pgx.Identifier{s.stage}.Sanitize()
	pkey := "CONSTRAINT " + s.ident(stagingSuffix+"_pkey") + " "
	if s.cfg.Shards > 0 {
		pkey = "" // PostgreSQL names it; merge looks it up (a long shard table's name + _pkey would be cut)
	}
	stmts := []string{
		"DROP TABLE IF EXISTS " + stg + ", " + s.ident(keepSuffix),
		"CREATE TABLE " + stg + " (" + strings.Join(cols, ", ") + ", " + pkey + "PRIMARY KEY (chunk_id))",
		"COMMENT ON TABLE " + stg + " IS " + quote(s.cfg.Settings),
	}
	if s.cfg.Shards > 0 {
		stmts[0] = "DROP TABLE IF EXISTS " + stg // T_synapse_keep is the unsharded sync's
	}
	if s.cfg.Sync {
		stmts = append(stmts, "CREATE TABLE "+s.ident(keepSuffix)+" (id text NOT NULL)")
	}
	err := pgx.BeginFunc(s.ctx, s.conn, func(tx pgx.Tx) error {
		for _, q := range stmts {
			if _, err := tx.Exec(s.ctx, q); err != nil {
				return err
			}
		}
		_, err := tx.Exec(s.ctx, "INSERT INTO "+StateTable+" (tbl, checkpoint) VALUES ($1, $2) ON CONFLICT (tbl) DO UPDATE SET checkpoint = $2, manifest = NULL", s.key, cp)
		return err
	})
	if err != nil {
		return s.t.wrap("start", err)
	}
	return nil
}

// quote is a string literal (standard_conforming_strings, PostgreSQL's default since 9.1).
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Keep records, in a sync, an input document the table holds unchanged:
// it is not deleted at publish. It becomes durable with the next Save.
func (s *Store) Keep(id string) { s.kept = append(s.kept, []any{id}) }

// Save commits the rows written and the ids kept since the last Save,
// with the checkpoint cp, in one transaction.
func (s *Store) Save(cp []byte) error {
	err := pgx.BeginFunc(s.ctx, s.conn, func(tx pgx.Tx) error {
		if len(s.pending) > 0 {
			cols := names(want(s.cfg.column, s.cfg.WithText))
			if _, err := tx.CopyFrom(s.ctx, pgx.Identifier{s.stage}, cols, pgx.CopyFromRows(s.pending)); err != nil {
				return err
			}
		}
		if len(s.kept) > 0 {
			if _, err := tx.CopyFrom(s.ctx, pgx.Identifier{s.t.Table + keepSuffix}, []string{"id"}, pgx.CopyFromRows(s.kept)); err != nil {
				return err
			}
		}
		_, err := tx.Exec(s.ctx, "UPDATE "+StateTable+" SET checkpoint = $2 WHERE tbl = $1", s.key, cp)
		return err
	})
	if err != nil {
		return s.t.wrap("commit batch", err)
	}
	s.pending, s.kept = s.pending[:0], s.kept[:0]
	return nil
}

// Publish makes the run's rows the table's, in one transaction, and ends
// the run (its staging tables and checkpoint go). A shard publishes
// nothing: it records its manifest (SetManifest) in its row of
// StateTable, which makes it done; synapse merge publishes the shards.
func (s *Store) Publish() error {
	if s.cfg.Shards > 0 {
		return s.recordDone()
	}
	t, stg, keep := s.ident(""), s.ident(stagingSuffix), s.ident(keepSuffix)
	var stmts []string
	if s.cfg.Sync && s.exists {
		stmts = []string{
			"SELECT count(DISTINCT id) FROM " + t + " t WHERE NOT EXISTS (SELECT 1 FROM " + keep + " k WHERE k.id = t.id) AND NOT EXISTS (SELECT 1 FROM " + stg + " s WHERE s.id = t.id)",
			"DELETE FROM " + t + " t WHERE NOT EXISTS (SELECT 1 FROM " + keep + " k WHERE k.id = t.id)",
			"INSERT INTO " + t + " SELECT * FROM " + stg,
			"COMMENT ON TABLE " + t + " IS " + quote(s.cfg.Settings),
			"DROP TABLE " + stg + ", " + keep,
		}
	} else {
		stmts = []string{
			"DROP TABLE IF EXISTS " + t + ", " + keep,
			"ALTER TABLE " + stg + " RENAME TO " + t,
			"ALTER TABLE " + t + " RENAME CONSTRAINT " + s.ident(stagingSuffix+"_pkey") + " TO " + s.ident("_pkey"),
		}
	}
	err := pgx.BeginFunc(s.ctx, s.conn, func(tx pgx.Tx) error {
		for i, q := range stmts {
			if i == 0 && s.cfg.Sync && s.exists {
				if err := tx.QueryRow(s.ctx, q).Scan(&s.deleted); err != nil {
					return err
				}
				continue
			}
			if _, err := tx.Exec(s.ctx, q); err != nil {
				return err
			}
		}
		_, err := tx.Exec(s.ctx, "DELETE FROM "+StateTable+" WHERE tbl = $1", s.t.Table)
		return err
	})
	if err != nil {
		return s.t.wrap("publish", err)
	}
	return nil
}

// Deleted is the documents of the table a sync's publish deleted because
// the input no longer holds them.
func (s *Store) Deleted() int64 { return s.deleted }

// SetManifest gives a shard the manifest its Publish records.
func (s *Store) SetManifest(m []byte) { s.done = m }

// recordDone records a shard's manifest in its row: the shard is done.
func (s *Store) recordDone() error {
	if s.done == nil {
		return fmt.Errorf("pgstore: shard %d of %d of table %s: publish without a manifest", s.cfg.Shard, s.cfg.Shards, s.t.Table)
	}
	tag, err := s.conn.Exec(s.ctx, "UPDATE "+StateTable+" SET manifest = $2 WHERE tbl = $1", s.key, s.done)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("its row %q of %s is gone", s.key, StateTable)
	}
	if err != nil {
		return s.t.wrap("record the shard done", err)
	}
	return nil
}
