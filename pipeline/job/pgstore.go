package job

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/pgstore"
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/supervise"
)

// ShownOut is the output as messages show it: a PostgreSQL URL without its password.
func ShownOut(out string) string {
	if pgstore.IsURL(out) {
		return pgstore.Redact(out)
	}
	return out
}

// checkTimeout bounds the connection of the check before any work.
const checkTimeout = 30 * time.Second

// checkStore refuses, before anything starts, a PostgreSQL output that
// cannot work: a URL or table name that does not parse, a dtype pgvector
// has no type for, options it cannot take, an errors file that cannot be
// written, a server that refuses the login or lacks pgvector's type, a
// table that is not a synapse table.
func (o *EmbedOptions) checkStore() error {
	if !pgstore.IsURL(o.Out) {
		if o.Sync {
			return configErrorf("--sync: the output is a PostgreSQL table (-o postgresql://…?table=NAME), which is also the previous output; a file output syncs with --previous")
		}
		return nil
	}
	shown := ShownOut(o.Out)
	switch {
	case o.Read.Shards > 0:
		return configErrorf("--shard with a PostgreSQL output (%s): not supported; run without --shard, or write file parts and merge them", shown)
	case len(o.Previous) > 0 || o.Deleted != "":
		return configErrorf("--previous/--deleted with a PostgreSQL output (%s): the table is the previous output: give --sync", shown)
	}
	t, err := pgstore.Parse(o.Out)
	if err != nil {
		return storeError(err)
	}
	column, err := pgstore.ColumnType(o.Dtype, 1)
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
	return storeError(pgstore.Check(ctx, t, column, o.WithText))
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
func (o *EmbedOptions) storeOpener(ctx context.Context, dims int, cur vector.Settings) func() (output.Store, error) {
	if !pgstore.IsURL(o.Out) {
		return nil
	}
	return func() (output.Store, error) {
		t, err := pgstore.Parse(o.Out)
		if err != nil {
			return nil, storeError(err)
		}
		cfg := pgstore.Config{Dims: dims, Dtype: o.Dtype, Digest: cur.Digest(), Settings: cur.JSON(), Sync: o.Sync, WithText: o.WithText,
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
	w, rs, err := output.OpenStore(st, ShownOut(r.o.Out), r.o.Resume, opts)
	if err != nil {
		st.Close()
	}
	return r.opened(w, rs, err)
}
