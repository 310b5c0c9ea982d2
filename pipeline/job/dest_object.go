package job

import (
	"context"
	"os"

	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/output"
)

// objectDest is an output object in a bucket (s3://BUCKET/KEY), named as a
// file is (its errors file, shard parts and manifest beside it, as keys):
// written at the end in one upload, its resume files local.
type objectDest struct{ fileDest }

func (d objectDest) Shard(i, n int) Destination { return objectDest{d.fileDest.Shard(i, n).(fileDest)} }

func (d objectDest) manifestExists() (bool, error) {
	return objstore.Exists(context.Background(), d.manifest())
}

func (d objectDest) dropManifest() error { return objstore.Remove(context.Background(), d.manifest()) }

// resumeFiles are local, in the checkpoint directory (output.ResumeBase).
func (d objectDest) resumeFiles(checkpointDir string) ([]string, error) {
	base, err := output.ResumeBase(d.Name(), checkpointDir)
	if err != nil {
		return nil, err
	}
	return fileDest(base).resumeFiles("")
}

// tempDir is the system's: an object has no directory.
func (objectDest) tempDir() string { return os.TempDir() }

// same: URLs are keys, compared as strings.
func (d objectDest) same(p string) bool { return p == d.Name() }
