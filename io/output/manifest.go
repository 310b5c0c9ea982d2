package output

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/readlimit"
)

// Manifest is a range shard's commit marker, written beside its part
// (OUT.shard-I-of-N.json) after the part itself: a shard whose manifest
// exists is done. It holds what `synapse merge` checks and needs.
type Manifest struct {
	Version int    `json:"version"`
	Command string `json:"command"` // embed, rerank, generate
	Shard   int    `json:"shard"`
	Shards  int    `json:"shards"`
	Output  string `json:"output"` // the part file
	Errors  string `json:"errors"` // the part's errors file
	// Counters of the shard's records (the job's pipeline.Counters).
	Rows         ManifestRows `json:"rows"`
	ErrorRecords int64        `json:"error_records"`
	// OutputRows is the rows of the part; merge refuses a manifest without
	// it (one written before it was kept).
	OutputRows *int64 `json:"output_rows"`
	// Inputs are every input file of the run, what this shard's part of
	// each was and what it read of it.
	Inputs []ManifestInput `json:"inputs"`
	// IndexNumbering is "shard" when record indexes and JSONL lines count
	// from the shard's start (merge makes them global), "global" when they
	// are the single run's already (a rerank over a run file).
	IndexNumbering string `json:"index_numbering"`
	ModelDigest    string `json:"model_digest"`
	// SettingsDigest covers the output's metadata but the shard: every
	// shard of one job has the same.
	SettingsDigest string  `json:"settings_digest"`
	SynapseVersion string  `json:"synapse_version"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
}

// ManifestRows are a shard's record counters.
type ManifestRows struct {
	Read    int64 `json:"read"`
	OK      int64 `json:"ok"`
	Failed  int64 `json:"failed"`
	Partial int64 `json:"partial,omitempty"` // of Failed: records with items written too
	Items   int64 `json:"items"`
	// ItemFailures are the items in the errors file.
	ItemFailures int64 `json:"item_failures,omitempty"`
	Tokens       int64 `json:"tokens"`
	FileErrors   int64 `json:"file_errors"`
}

// ManifestInput is one input file in a manifest.
type ManifestInput struct {
	corpus.Part
	Records   int64 `json:"records"`
	Lines     int64 `json:"lines,omitempty"`
	BytesRead int64 `json:"bytes_read"`
	// Version is the input's version when the shard started, and still
	// when it ended (the shard fails otherwise): merge refuses shards that
	// read different versions of one input. nil in a manifest of an older
	// synapse.
	Version *files.Version `json:"version"`
	// ReadSHA256 is "sha256:<hex>" of what the shard's part covers of a
	// local file, read again when the shard ended: bytes [Start, End) of
	// plain JSON Lines, the whole file of gzip JSON Lines and Parquet; ""
	// for a part of no bytes, and for an object (its ETag is its version).
	ReadSHA256 string `json:"read_sha256,omitempty"`
}

const manifestVersion = 1

// ShardPath is OUT with ".shard-I-of-N" before its extension.
func ShardPath(out string, i, n int) string {
	ext := filepath.Ext(out)
	return fmt.Sprintf("%s.shard-%d-of-%d%s", strings.TrimSuffix(out, ext), i, n, ext)
}

// ManifestPath is the manifest of a part: the part's path with ".json" for
// its extension.
func ManifestPath(part string) string {
	return strings.TrimSuffix(part, filepath.Ext(part)) + ".json"
}

// WriteManifest writes m atomically to path (in a bucket: by one PUT).
func WriteManifest(path string, m Manifest) error {
	return WriteManifestContext(context.Background(), path, m)
}

// WriteManifestContext is WriteManifest with a context for a bucket's requests.
func WriteManifestContext(ctx context.Context, path string, m Manifest) error {
	b, err := EncodeManifest(m)
	if err != nil {
		return err
	}
	return files.WriteFileAtomic(ctx, path, b)
}

// EncodeManifest is m as a manifest file holds it, its version set: also
// what a store keeps of a done shard (io/pgstore).
func EncodeManifest(m Manifest) ([]byte, error) {
	m.Version = manifestVersion
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// DecodeManifest reads a manifest EncodeManifest wrote; name (its file,
// or where a store keeps it) is for messages.
func DecodeManifest(b []byte, name string) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("manifest %s: %w", name, err)
	}
	if m.Version != manifestVersion {
		return m, fmt.Errorf("manifest %s: version %d; want %d", name, m.Version, manifestVersion)
	}
	return m, nil
}

// ReadManifest reads a manifest.
func ReadManifest(path string) (Manifest, error) { return readManifest(context.Background(), path) }

func readManifest(ctx context.Context, path string) (Manifest, error) {
	b, err := files.ReadFile(ctx, path, readlimit.State)
	if err != nil {
		return Manifest{}, fmt.Errorf("manifest: %w", err)
	}
	return DecodeManifest(b, path)
}
