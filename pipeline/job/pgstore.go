package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/pgstore"
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/supervise"
)

// checkTimeout bounds the connection of the check before any work.
const checkTimeout = 30 * time.Second

// checkStore refuses, before anything starts, a PostgreSQL output that
// cannot work: a URL or table name that does not parse, a dtype pgvector
// has no type for, options it cannot take, an errors file that cannot be
// written, a server that refuses the login or lacks pgvector's type, a
// table that is not a synapse table.
func (o *EmbedOptions) checkStore(k outKind) error {
	d := o.dest().table()
	if d == nil {
		if o.Sync {
			return configErrorf("--sync: the output is a PostgreSQL table (-o postgresql://…?table=NAME), which is also the previous output; a file output syncs with --previous")
		}
		return nil
	}
	shown := d.String()
	switch {
	case o.Read.Shards > 0 && o.Sync:
		return configErrorf("--sync with --shard (%s): a shard's sync would decide from the table as it was when that shard ran, and only the whole input knows which ids are gone; run the sync unsharded, or shard a full run and merge it", shown)
	case len(o.Previous) > 0 || o.Deleted != "":
		return configErrorf("--previous/--deleted with a PostgreSQL output (%s): the table is the previous output: give --sync", shown)
	}
	t, err := d.target()
	if err != nil {
		return storeError(err)
	}
	if o.Read.Shards > 0 {
		if err := t.CheckShard(o.Read.Shard, o.Read.Shards); err != nil {
			return storeError(err)
		}
	}
	column, _, err := k.table(o)
	if err != nil {
		return storeError(err)
	}
	if err := CheckWritable("--errors", o.errorsPath(), o.Inputs); err != nil {
		return err
	}
	if err := supervise.CheckRuntimeDir(o.Pool.RuntimeDir); err != nil {
		return &ConfigError{err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := pgstore.Check(ctx, t, column, o.WithText, !o.Sync && o.Read.Shards == 0); err != nil {
		return storeError(err)
	}
	return checkStoreShard(ctx, &o.Options, t)
}

// checkStoreShard stops a shard of a PostgreSQL output that is done
// already (its manifest is in the database), unless Force: Force runs it
// again from the start.
func checkStoreShard(ctx context.Context, o *Options, t *pgstore.Target) error {
	if o.Read.Shards == 0 || o.Force {
		return nil
	}
	done, err := pgstore.ShardDone(ctx, t, o.Read.Shard, o.Read.Shards)
	switch {
	case err != nil:
		return storeError(err)
	case done:
		return fmt.Errorf("%w: shard %d of %d of table %s is done, its rows in %s (--force runs it again; synapse merge publishes the shards)",
			ErrShardDone, o.Read.Shard, o.Read.Shards, t.Table, pgstore.ShardTable(t.Table, o.Read.Shard, o.Read.Shards))
	}
	return nil
}

// manifestStore is a store that keeps a shard's manifest itself
// (pgstore.Store: in its row of the state table), recorded by Publish.
type manifestStore interface{ SetManifest(m []byte) }

// recordManifest hands a shard's manifest to the store before the commit
// that records it.
func (r *runner) recordManifest(src any) error {
	m, err := r.manifest(src)
	if err != nil {
		return err
	}
	t, err := pgstore.Parse(r.o.dest().Name())
	if err != nil {
		return storeError(err)
	}
	m.Output = pgstore.ShardTable(t.Table, r.o.Read.Shard, r.o.Read.Shards)
	if !objstore.IsURL(m.Errors) { // merge may run in another directory
		if m.Errors, err = filepath.Abs(m.Errors); err != nil {
			return err
		}
	}
	b, err := output.EncodeManifest(m)
	if err != nil {
		return err
	}
	r.manifests.SetManifest(b)
	return nil
}

// storeShardLine says where a shard of a PostgreSQL output is, and what publishes it.
func storeShardLine(o *Options) []SummaryLine {
	d := o.dest().table()
	if d == nil || o.Read.Shards == 0 {
		return nil
	}
	t, err := d.target()
	if err != nil {
		return nil
	}
	return []SummaryLine{{"shard", fmt.Sprintf("%d of %d: its rows are in table %s, unpublished until synapse merge %s publishes the %d shards",
		o.Read.Shard, o.Read.Shards, pgstore.ShardTable(t.Table, o.Read.Shard, o.Read.Shards), d, o.Read.Shards)}}
}

// storeError makes a refusal of the store a ConfigError (exit 2).
func storeError(err error) error {
	if errors.Is(err, pgstore.ErrRefused) || errors.Is(err, pgstore.ErrInUse) {
		return &ConfigError{err}
	}
	return err
}

// storeOpener is the opener of a PostgreSQL output for a run of settings
// cur, nil for a file output; what it opens is checked against the table.
func (o *EmbedOptions) storeOpener(ctx context.Context, k outKind, dims int, cur vector.Settings) func() (output.Store, error) {
	d := o.dest().table()
	if d == nil {
		return nil
	}
	return func() (output.Store, error) {
		t, err := d.target()
		if err != nil {
			return nil, storeError(err)
		}
		_, sparse, err := k.table(o)
		if err != nil {
			return nil, storeError(err)
		}
		cfg := pgstore.Config{Dims: dims, Dtype: o.Dtype, Digest: cur.Digest(), Settings: cur.JSON(), Sync: o.Sync, WithText: o.WithText,
			Sparse: sparse, Shard: o.Read.Shard, Shards: o.Read.Shards,
			Diff: func(js string) string {
				var prev vector.Settings
				if json.Unmarshal([]byte(js), &prev) != nil {
					return ""
				}
				return cur.Diff(prev)
			}}
		st, err := pgstore.Open(ctx, t, cfg)
		if err != nil {
			return nil, storeError(err)
		}
		return st, nil
	}
}

// openStore opens the PostgreSQL output (resuming its interrupted run when asked).
func (r *runner) openStore(opts output.WriterOptions) error {
	st, err := r.store()
	if err != nil {
		return err
	}
	w, rs, err := output.OpenStore(st, r.o.dest().String(), r.o.Resume, opts)
	if err != nil {
		st.Close()
	}
	if ms, ok := st.(manifestStore); ok && r.o.Read.Shards > 0 {
		r.manifests = ms
	}
	return r.opened(w, rs, err)
}
