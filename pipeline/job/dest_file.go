package job

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/synapse-embed/synapse/io/output"
)

// fileDest is an output file on a local disk: the reference destination.
type fileDest string

func (d fileDest) String() string { return string(d) }

func (d fileDest) Name() string { return string(d) }

// ErrorsPath is OUT.errors.jsonl beside the output (a shard's output is
// its part already).
func (d fileDest) ErrorsPath(int, int) string { return string(d) + ".errors.jsonl" }

// Shard is OUT.shard-I-of-N.EXT.
func (d fileDest) Shard(i, n int) Destination { return fileDest(output.ShardPath(string(d), i, n)) }

func (fileDest) table() *tableDest { return nil }

func (fileDest) IsTable() bool { return false }

func (d fileDest) manifest() string { return output.ManifestPath(string(d)) }

func (d fileDest) manifestExists() (bool, error) {
	_, err := os.Stat(d.manifest())
	return err == nil, nil
}

func (d fileDest) dropManifest() error {
	if err := os.Remove(d.manifest()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// resumeFiles are OUT.partial and its checkpoint beside it.
func (d fileDest) resumeFiles(string) ([]string, error) {
	return []string{output.PartialPath(string(d)), output.CheckpointPath(string(d))}, nil
}

// tempDir is the output's directory: the files stay on its disk.
func (d fileDest) tempDir() string { return filepath.Dir(string(d)) }

func (d fileDest) same(p string) bool { return sameFile(p, string(d)) }
