// Package pgstore writes an embedding run's chunks into a PostgreSQL table
// with pgvector (the output -o postgresql://…): it connects, checks the
// server and the table, COPYs each batch in binary and commits it with the
// run's checkpoint, and publishes the run in one transaction. It runs in
// the module.
//
// # Tables
//
// The table T (?table=T in the URL, default "chunks") has the columns
//
//	id text, chunk integer, chunk_id text PRIMARY KEY (ID#CHUNK),
//	embedding vector(D) | halfvec(D) | bit(D) | sparsevec(V), doc_hash bytea, settings_digest text
//
// and the run's vector settings (vector.Settings JSON) as its comment. A
// run writes into T_synapse_staging and keeps its checkpoint in the row of
// T in synapse_state; each batch's COPY and the checkpoint are one
// transaction, so the committed rows and the checkpoint always agree. A full
// run publishes by dropping T and renaming the staging table in its place;
// a sync run (Config.Sync) writes only new and changed documents, lists
// the unchanged ones it kept in T_synapse_keep, and publishes by deleting
// from T the documents written again or gone and inserting the staging
// rows, in one transaction. A session advisory lock on T keeps a second
// run off the same table.
//
// # Shards
//
// Shard I of N (--shard I/N) writes T_synapse_shard_I_of_N, keeps its
// checkpoint in the row "T/shard-I-of-N" of synapse_state and holds an
// advisory lock of its own, so the shards of a job run together while a
// second run of one shard is kept off. It publishes nothing: when done it
// records its manifest (output.Manifest: counts, inputs, settings digest,
// its errors file) in the manifest column of its row. Merge checks that
// all N are done and are one job's, that no id is in two shards, writes
// the merged errors file, then publishes in one transaction: T replaced by
// the union of the shards' tables, which go with their rows. A sharded
// run is a full run: --sync with --shard is refused (docs/postgres.md).
package pgstore

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/synapse-embed/synapse/io/vector"
)

// ErrRefused wraps every failure that running again unchanged cannot mend:
// a malformed URL, a rejected login, a server without the vector type the
// dtype needs, a table of other columns or settings. The CLI exits 2.
var ErrRefused = errors.New("refused")

// DefaultTable is the table of a URL without ?table=.
const DefaultTable = "chunks"

// StateTable holds one row per table a run is writing: its checkpoint.
const StateTable = "synapse_state"

// IsURL reports whether out names a PostgreSQL output.
func IsURL(out string) bool {
	return strings.HasPrefix(out, "postgresql://") || strings.HasPrefix(out, "postgres://")
}

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

// Target is a parsed output URL.
type Target struct {
	Table    string
	config   *pgx.ConnConfig
	password string // for scrubbing messages: never printed
	redacted string
}

// Parse reads a libpq URL (its missing parts from the PG* environment
// variables, as libpq does) and its table parameter.
func Parse(out string) (*Target, error) {
	u, err := url.Parse(out)
	if err != nil {
		return nil, fmt.Errorf("%w: the output URL does not parse (a password with reserved characters must be percent-encoded, or given in PGPASSWORD)", ErrRefused)
	}
	t := &Target{Table: DefaultTable, redacted: Redact(out)}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil { // url.Query would drop the pair silently
		return nil, fmt.Errorf("%w: %s: its parameters do not parse: %v", ErrRefused, t.redacted, err)
	}
	if err := checkParams(q, t.redacted); err != nil {
		return nil, err
	}
	if v, ok := q["table"]; ok {
		t.Table = v[0]
		q.Del("table")
		u.RawQuery = q.Encode()
	}
	if !tableName.MatchString(t.Table) {
		return nil, fmt.Errorf("%w: %s: table %q: want a lowercase name of letters, digits and _ (at most 40), not starting with a digit", ErrRefused, t.redacted, t.Table)
	}
	if why := reserved(t.Table); why != "" {
		return nil, fmt.Errorf("%w: %s: table %q is reserved: %s; name another table", ErrRefused, t.redacted, t.Table, why)
	}
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrRefused, t.redacted, scrub(err.Error(), passwordOf(u)))
	}
	t.config, t.password = cfg, cfg.Password
	return t, nil
}

func passwordOf(u *url.URL) string {
	if p, ok := u.User.Password(); ok {
		return p
	}
	if p := u.Query().Get("password"); p != "" {
		return p
	}
	return os.Getenv("PGPASSWORD")
}

// String is the URL with its password replaced by xxxxx.
func (t *Target) String() string { return t.redacted }

// Redact is out with any password (user info or ?password=) replaced by
// xxxxx: the only form of an output URL that synapse prints.
func Redact(out string) string {
	u, err := url.Parse(out)
	if err != nil {
		return "postgresql://(a URL that does not parse)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// scrub removes a password from a message, should a library have put it there.
func scrub(msg, password string) string {
	if password == "" {
		return msg
	}
	return strings.ReplaceAll(msg, password, "xxxxx")
}

// ErrorsPath is the errors file of a PostgreSQL output without --errors:
// TABLE.errors.jsonl in the working directory.
func ErrorsPath(out string) string { return tableOf(out) + ".errors.jsonl" }

// ShardErrorsPath is the errors file of shard i of n of a PostgreSQL
// output without --errors: TABLE.shard-I-of-N.errors.jsonl in the working
// directory.
func ShardErrorsPath(out string, i, n int) string {
	return fmt.Sprintf("%s.shard-%d-of-%d.errors.jsonl", tableOf(out), i, n)
}

func tableOf(out string) string {
	if u, err := url.Parse(out); err == nil && u.Query().Get("table") != "" {
		return u.Query().Get("table")
	}
	return DefaultTable
}

// ShardTable is the staging table of shard i of n of table:
// TABLE_synapse_shard_I_of_N.
func ShardTable(table string, i, n int) string {
	return fmt.Sprintf("%s_synapse_shard_%d_of_%d", table, i, n)
}

// stateKey is the row of StateTable of shard i of n of table.
func stateKey(table string, i, n int) string { return fmt.Sprintf("%s/shard-%d-of-%d", table, i, n) }

// maxIdentifier is the longest name PostgreSQL keeps (NAMEDATALEN - 1);
// a longer one is cut.
const maxIdentifier = 63

// CheckShard refuses shard i of n of the target's table when the name of
// its staging table would be cut.
func (t *Target) CheckShard(i, n int) error {
	if name := ShardTable(t.Table, i, n); len(name) > maxIdentifier {
		return fmt.Errorf("%w: %s: --shard %d/%d: the shard's table %s is longer than PostgreSQL's %d bytes: name a shorter table (?table=)",
			ErrRefused, t, i, n, name, maxIdentifier)
	}
	return nil
}

// ColumnType is the column type of an embedding of dtype d and dims D:
// vector(D) for float32, halfvec(D) for float16, bit(D) for binary and
// ubinary (the same sign bits); other dtypes are refused.
func ColumnType(d vector.Dtype, dims int) (string, error) {
	switch d {
	case vector.Float32, "":
		return fmt.Sprintf("vector(%d)", dims), nil
	case vector.Float16:
		return fmt.Sprintf("halfvec(%d)", dims), nil
	case vector.Binary, vector.UBinary:
		return fmt.Sprintf("bit(%d)", dims), nil
	}
	return "", fmt.Errorf("%w: --dtype %s: pgvector has no %s type (a PostgreSQL output takes float32 as vector, float16 as halfvec, binary or ubinary as bit)", ErrRefused, d, d)
}

// SparseColumnType is the column type of sparse vectors over a vocabulary
// of vocab terms: pgvector's sparsevec(vocab).
func SparseColumnType(vocab int) string { return fmt.Sprintf("sparsevec(%d)", vocab) }

// SparseMaxNonZero is the most non-zero values pgvector's sparsevec holds
// (SPARSEVEC_MAX_NNZ): a sparse run into a table keeps at most this many
// terms a chunk (--sparse-top-k).
const SparseMaxNonZero = 16000

// typeOf is the pgvector type a column type needs.
func typeOf(column string) string {
	name, _, _ := strings.Cut(column, "(")
	return name
}
