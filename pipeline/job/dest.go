package job

import (
	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/pgstore"
)

// Destination is a job's output (-o) parsed once: a local file
// (dest_file.go, the reference to copy), an object in a bucket
// (dest_object.go) or a PostgreSQL table (dest_table.go). It knows what
// the job and the command line would otherwise work out from the URL's
// prefix: how people see it, its default errors file, a shard's output,
// the shard manifest, where the resume files and temporary files go.
// ParseDest is the only place that tells them apart
// (docs/architecture.md, "Adding a destination").
type Destination interface {
	// String is the output as messages show it (a password scrubbed).
	String() string
	// ErrorsPath is the errors file when --errors is not given, for shard
	// i of n (n = 0: not sharded).
	ErrorsPath(i, n int) string
	// Shard is the output of shard i of n.
	Shard(i, n int) Destination
	// Name is the output as given (what opens it).
	Name() string
	// IsTable reports whether the output is a PostgreSQL table.
	IsTable() bool
	// table is the PostgreSQL table, nil for a file or an object.
	table() *tableDest
	// manifest is where a shard's manifest goes ("" when the table keeps
	// it); done tells whether it exists, drop removes it.
	manifest() string
	manifestExists() (bool, error)
	dropManifest() error
	// resumeFiles are the files a run keeps to resume (checkpointDir:
	// --checkpoint-dir); an error when they cannot be named.
	resumeFiles(checkpointDir string) ([]string, error)
	// tempDir is where the run's local temporary files go.
	tempDir() string
	// same reports whether p names the output.
	same(p string) bool
}

// ParseDest parses an output: the only test of its URL's prefix.
func ParseDest(out string) Destination {
	switch {
	case pgstore.IsURL(out):
		return &tableDest{url: out}
	case objstore.IsURL(out):
		return objectDest{fileDest(out)}
	}
	return fileDest(out)
}

// dest is the job's output.
func (o *Options) dest() Destination { return ParseDest(o.Out) }
