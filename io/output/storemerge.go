package output

import (
	"context"
	"fmt"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/objstore"
)

// The part of a merge that does not depend on where the parts are, for a
// store whose shards keep their rows in its own tables and their
// manifests in its own rows (io/pgstore): the store reads the manifests,
// checks its tables and publishes them; these are Merge's checks of the
// manifests, its id rule and its merged errors file. names[k] is where
// shard k's manifest is kept (for messages); a manifest's Errors is an
// absolute path or an object's URL.

// CheckShardManifests refuses manifests that are not all one job's, do not
// cover the inputs without gap or overlap (ErrForeignShard), or whose
// counts disagree with each other or with their errors files
// (ErrManifestMismatch), as Merge does. ms are in shard order, all N.
func CheckShardManifests(ctx context.Context, ms []Manifest, names []string) error {
	if err := checkManifests(ms, names); err != nil {
		return err
	}
	return checkCounts(ctx, ms, names)
}

// SumRows adds up the shards' record counters.
func SumRows(ms []Manifest) ManifestRows {
	var r ManifestRows
	for _, m := range ms {
		r.Read, r.OK, r.Failed = r.Read+m.Rows.Read, r.OK+m.Rows.OK, r.Failed+m.Rows.Failed
		r.Items, r.Tokens, r.FileErrors = r.Items+m.Rows.Items, r.Tokens+m.Rows.Tokens, r.FileErrors+m.Rows.FileErrors
		r.Partial, r.ItemFailures = r.Partial+m.Rows.Partial, r.ItemFailures+m.Rows.ItemFailures
	}
	return r
}

// ShardIDs finds an id that two shards hold (ErrIDInTwoShards; the rule
// is in mergeids.go): memory IDSetBytes per distinct id.
type ShardIDs struct{ p *partIDs }

// NewShardIDs is an empty set for the shards whose manifests are kept at names.
func NewShardIDs(names []string) *ShardIDs { return &ShardIDs{newPartIDs(names)} }

// ClaimErrors claims the ids of every shard's error rows that were read
// before they failed.
func (s *ShardIDs) ClaimErrors(ctx context.Context, ms []Manifest) error {
	for k, m := range ms {
		if err := s.p.claimErrors(ctx, objstore.Beside(s.p.paths[k], m.Errors), k); err != nil {
			return err
		}
	}
	return nil
}

// Claim records that shard k holds id (one of its output rows' ids).
func (s *ShardIDs) Claim(id string, k int) error { return s.p.claim(id, k) }

// MergeErrorFiles writes the shards' errors files into out, one after the
// other, with the single run's record indexes and JSONL lines, as Merge
// does; out appears whole or not at all. It returns the records written.
func MergeErrorFiles(ctx context.Context, ms []Manifest, names []string, out string) (int64, error) {
	if !objstore.IsURL(out) {
		if _, err := files.RemoveStaleTemps(out); err != nil {
			return 0, fmt.Errorf("merge: %w", err)
		}
	}
	return mergeErrors(ms, names, MergeOptions{Errors: out, Context: ctx})
}
