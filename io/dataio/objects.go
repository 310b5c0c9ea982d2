package dataio

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/readlimit"
)

// Object storage. Every path the package reads or writes may be an
// s3://bucket/key URL (package objstore): inputs are read by ranged GETs
// (Parquet: the footer, then the column chunks of the row groups read) or
// one streaming GET (JSON Lines); outputs are multipart uploads completed
// last, so that nothing appears under the key before the output is whole.
// The resume files of an output in a bucket are local (see
// WriterOptions.CheckpointDir).

// inputFile is an input open for reading: a local *os.File or an object.
type inputFile interface {
	io.Reader
	io.ReaderAt
	io.Seeker
	io.Closer
}

// openRandom opens a regular file or an object for reading, with its size.
func openRandom(ctx context.Context, name string) (inputFile, int64, error) {
	if objstore.IsURL(name) {
		f, err := objstore.Open(ctx, name)
		if err != nil {
			return nil, 0, err
		}
		return f, f.Size(), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// readFile reads a whole small file or object of at most limit bytes
// (readlimit); a larger one is refused with readlimit.ErrTooLarge.
func readFile(ctx context.Context, name string, limit int64) ([]byte, error) {
	if !objstore.IsURL(name) {
		return readlimit.ReadFile(name, limit)
	}
	f, err := objstore.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.Size() > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, more than %d (the limit for this file)", name, readlimit.ErrTooLarge, f.Size(), limit)
	}
	return readlimit.Read(f, name, limit)
}

// sinkFile is where an output file's bytes go: a local temporary file or
// an object upload.
type sinkFile interface {
	io.Writer
	Name() string
	// finish makes the bytes durable: for an upload, it completes it (the
	// object appears).
	finish() error
	abort()
}

// localFile is a sinkFile written to a local temporary file.
type localFile struct{ *os.File }

func (f localFile) finish() error { return errors.Join(f.Sync(), f.Close()) }
func (f localFile) abort()        { f.Close() }

// upload is a sinkFile written to an object.
type upload struct{ *objstore.Upload }

func (u upload) finish() error { return u.Commit() }
func (u upload) abort()        { u.Abort() }

// output is an output file being written: finish, then publish, make it
// appear at its path. A local file is written to a temporary file created
// exclusively beside it (createTemp: PATH.tmp-synapse-PID-RANDOM) and
// renamed; an object is uploaded and appears when the upload completes
// (finish), so publish has nothing left to do.
type output struct {
	sinkFile
	path, tmp string
}

// createOutput starts writing the output file path.
func createOutput(ctx context.Context, path string) (*output, error) {
	if objstore.IsURL(path) {
		u, err := objstore.Create(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("dataio: %w", err)
		}
		return &output{sinkFile: upload{u}, path: path}, nil
	}
	f, err := createTemp(path)
	if err != nil {
		return nil, err
	}
	return &output{sinkFile: localFile{f}, path: path, tmp: f.Name()}, nil
}

// publish renames a finished local output into place.
func (o *output) publish() error {
	if o.tmp == "" {
		return nil
	}
	return publish(o.tmp, o.path)
}

// discard aborts the output and removes what it left.
func (o *output) discard() {
	o.abort()
	if o.tmp != "" {
		os.Remove(o.tmp)
	}
}

// writeFileAtomicAny writes a small file atomically: locally through a
// temporary file and a rename, in a bucket by one PUT.
func writeFileAtomicAny(ctx context.Context, path string, b []byte) error {
	if objstore.IsURL(path) {
		if err := objstore.WriteFile(ctx, path, b); err != nil {
			return fmt.Errorf("dataio: %w", err)
		}
		return nil
	}
	return writeFileAtomic(path, b)
}

// copyOut copies the first n bytes of the local file src into the output dst.
func copyOut(ctx context.Context, src, dst string, n int64) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("dataio: %w", err)
	}
	defer in.Close()
	out, err := createOutput(ctx, dst)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	_, err = io.CopyN(bw, in, n)
	if err = errors.Join(err, bw.Flush()); err == nil {
		err = out.finish()
	}
	if err != nil {
		out.discard()
		return fmt.Errorf("dataio: copy %s to %s: %w", src, dst, err)
	}
	return out.publish()
}

// globAny expands a local glob, or one in a bucket (its matches sorted);
// no match is no error.
func globAny(ctx context.Context, pattern string) ([]string, error) {
	if !objstore.IsURL(pattern) {
		return filepath.Glob(pattern)
	}
	found, err := objstore.Expand(ctx, pattern)
	if err != nil && objstore.NoMatch(err) {
		return nil, nil
	}
	return found, err
}

// removeAny removes a local file or an object, ignoring its absence.
func removeAny(ctx context.Context, path string) error {
	if objstore.IsURL(path) {
		return objstore.Remove(ctx, path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// OutputFile is a file being written that appears at its path only when
// Commit succeeds: a local file is written beside it and renamed, an
// object is a multipart upload completed by Commit. One goroutine owns it.
type OutputFile struct {
	out *output
	bw  *bufio.Writer
}

// CreateOutput starts writing path (a local path or an s3:// URL).
func CreateOutput(ctx context.Context, path string) (*OutputFile, error) {
	out, err := createOutput(ctx, path)
	if err != nil {
		return nil, err
	}
	return &OutputFile{out: out, bw: bufio.NewWriterSize(out, 1<<20)}, nil
}

// Write buffers p.
func (f *OutputFile) Write(p []byte) (int, error) { return f.bw.Write(p) }

// Commit makes the file appear at its path; on failure nothing does.
func (f *OutputFile) Commit() error {
	err := f.bw.Flush()
	if err == nil {
		err = f.out.finish()
	}
	if err != nil {
		f.out.discard()
		return fmt.Errorf("dataio: write %s: %w", f.out.path, err)
	}
	return f.out.publish()
}

// Abort drops the file.
func (f *OutputFile) Abort() { f.out.discard() }

// OpenReader opens a local file or an object (one streaming GET) for
// reading from its start: a run file, qrels, queries.
func OpenReader(ctx context.Context, name string) (io.ReadCloser, error) {
	if objstore.IsURL(name) {
		return objstore.Open(ctx, name)
	}
	return os.Open(name)
}
