package job

import (
	"path/filepath"

	"github.com/synapse-embed/synapse/io/pgstore"
)

// tableDest is a PostgreSQL table with pgvector
// (postgresql://…?table=NAME): written by synapse embed only, a shard's
// rows in a table of their own that merge publishes (see pgstore.go).
type tableDest struct{ url string }

// String is the URL without its password.
func (d *tableDest) String() string { return pgstore.Redact(d.url) }

func (d *tableDest) Name() string { return d.url }

// ErrorsPath is TABLE.errors.jsonl (a shard's TABLE.shard-I-of-N…) in the
// working directory.
func (d *tableDest) ErrorsPath(i, n int) string {
	if n > 0 {
		return pgstore.ShardErrorsPath(d.url, i, n)
	}
	return pgstore.ErrorsPath(d.url)
}

// Shard is the table itself: a shard writes the table's shard table.
func (d *tableDest) Shard(int, int) Destination { return d }

func (d *tableDest) table() *tableDest { return d }

func (*tableDest) IsTable() bool { return true }

// manifest: the table keeps it (pgstore.Store.SetManifest); a shard run
// again starts over in the table.
func (*tableDest) manifest() string { return "" }

func (*tableDest) manifestExists() (bool, error) { return false, nil }

func (*tableDest) dropManifest() error { return nil }

// resumeFiles: none; the table holds the run's state.
func (*tableDest) resumeFiles(string) ([]string, error) { return nil, nil }

// tempDir is the working directory's (never used: --previous is refused).
func (d *tableDest) tempDir() string { return filepath.Dir(d.url) }

func (*tableDest) same(string) bool { return false }

// target parses the table's URL.
func (d *tableDest) target() (*pgstore.Target, error) { return pgstore.Parse(d.url) }
