package job

import (
	"context"
	"os"

	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/output"
)

// objectDest is an output object in a bucket (s3://BUCKET/KEY): written at
// the end in one upload, its resume files local (output.ResumeBase).
type objectDest string

func (d objectDest) String() string { return string(d) }

func (d objectDest) Name() string { return string(d) }

func (d objectDest) ErrorsPath(int, int) string { return string(d) + ".errors.jsonl" }

func (d objectDest) Shard(i, n int) Destination { return objectDest(output.ShardPath(string(d), i, n)) }

func (objectDest) table() *tableDest { return nil }

func (objectDest) IsTable() bool { return false }

func (d objectDest) manifest() string { return output.ManifestPath(string(d)) }

func (d objectDest) manifestExists() (bool, error) {
	return objstore.Exists(context.Background(), d.manifest())
}

func (d objectDest) dropManifest() error { return objstore.Remove(context.Background(), d.manifest()) }

// resumeFiles are local, in the checkpoint directory (output.ResumeBase).
func (d objectDest) resumeFiles(checkpointDir string) ([]string, error) {
	base, err := output.ResumeBase(string(d), checkpointDir)
	if err != nil {
		return nil, err
	}
	return []string{output.PartialPath(base), output.CheckpointPath(base)}, nil
}

// tempDir is the system's: an object has no directory.
func (objectDest) tempDir() string { return os.TempDir() }

// same: URLs are keys, compared as strings.
func (d objectDest) same(p string) bool { return p == string(d) }
