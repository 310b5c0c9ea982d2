package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/io/objstore"
)

// Paths in object storage (s3://bucket/key) are accepted wherever a file
// is read or written; see package objstore and docs/s3.md.

// checkpointDirFlag is the --checkpoint-dir of the job commands.
func checkpointDirFlag() cli.Flag {
	return &cli.StringFlag{Name: "checkpoint-dir", EnvVars: []string{"SYNAPSE_CHECKPOINT_DIR"},
		Usage:       "`DIR` for the resume files of an output in a bucket (s3://...): the partial output and its checkpoint stay local, the bucket only ever holds finished outputs; --resume needs the same DIR",
		DefaultText: "$XDG_CACHE_HOME/synapse/checkpoints"}
}

// expandObjects replaces every s3:// glob (s3://b/corpus/*.parquet) or
// prefix (s3://b/corpus/) among names with the objects it names, in sorted
// order, and checks that every object exists, before any work: a missing
// object or bucket, or credentials the server refuses, is a usage error
// (exit 2) naming it; a server that cannot be reached is exit 1.
func expandObjects(ctx context.Context, what string, names []string) ([]string, error) {
	var out []string
	for _, name := range names {
		if err := objstore.CheckScheme(name); err != nil {
			return nil, usagef("%s: %v", what, err)
		}
		if !objstore.IsURL(name) {
			out = append(out, name)
			continue
		}
		urls, err := objstore.Expand(ctx, name)
		if err == nil {
			for _, u := range urls {
				if err = statObject(ctx, u); err != nil {
					break
				}
			}
		}
		switch {
		case err != nil && (objstore.Permanent(err) || objstore.NoMatch(err)):
			return nil, usagef("%s: %v", what, err)
		case err != nil:
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, urls...)
	}
	return out, nil
}

// statObject checks that the object at url exists and can be read.
func statObject(ctx context.Context, url string) error {
	_, err := objstore.Stat(ctx, url)
	return err
}

// printObjectStore adds the object storage line to a summary when the run
// used a bucket.
func printObjectStore(w io.Writer) {
	if !objstore.Used() {
		return
	}
	s := objstore.Snapshot()
	fmt.Fprintf(w, "%-14s %d requests (%d retried after transient failures), %s fetched, %s uploaded\n",
		"object store", s.Requests, s.Retries, byteCount(s.BytesFetched), byteCount(s.BytesSent))
}

// byteCount is n in B, KiB, MiB or GiB.
func byteCount(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// checkObjectBucket checks, before any work, the bucket of an output
// path that is a URL ("" and local paths pass).
func checkObjectBucket(ctx context.Context, what, name string) error {
	if !objstore.IsURL(name) {
		return nil
	}
	err := objstore.CheckBucket(ctx, name)
	switch {
	case err != nil && objstore.Permanent(err):
		return usagef("%s: %v", what, err)
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// fetchModel copies a model in a bucket — a GGUF or .onnx object, or an
// ONNX model directory given as a prefix ending in "/" — into a private
// temporary directory for `models add`, which stores its own copy of what
// it adds; cleanup removes the copy. A local ref is returned as it is.
func fetchModel(ctx context.Context, ref string) (local string, cleanup func(), err error) {
	if err := objstore.CheckScheme(ref); err != nil {
		return "", nil, usagef("models add: %v", err)
	}
	if !objstore.IsURL(ref) {
		return ref, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "synapse-model-*")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	dir := strings.HasSuffix(ref, "/")
	var keys []string
	if dir {
		keys, err = objstore.List(ctx, ref)
		if err == nil && len(keys) == 0 {
			err = fmt.Errorf("%s: %w", ref, objstore.ErrNoMatch)
		}
	} else {
		keys = []string{ref}
	}
	for _, k := range keys {
		if err != nil {
			break
		}
		rel := path.Base(k)
		if dir {
			rel = strings.TrimPrefix(k, ref)
		}
		err = download(ctx, k, filepath.Join(tmp, "model", filepath.FromSlash(rel)))
	}
	if err != nil {
		cleanup()
		if objstore.Permanent(err) || objstore.NoMatch(err) {
			return "", nil, usagef("models add: %v", err)
		}
		return "", nil, fmt.Errorf("models add: %w", err)
	}
	if dir {
		return filepath.Join(tmp, "model"), cleanup, nil
	}
	return filepath.Join(tmp, "model", path.Base(ref)), cleanup, nil
}

// download copies an object to a new local file (0600), streaming.
func download(ctx context.Context, url, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	in, err := objstore.Open(ctx, url)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err = errors.Join(err, out.Close()); err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	return nil
}
