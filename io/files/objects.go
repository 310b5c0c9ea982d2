package files

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
type Input interface {
	io.Reader
	io.ReaderAt
	io.Seeker
	io.Closer
}

// openRandom opens a regular file or an object for reading, with its size.
func OpenRandom(ctx context.Context, name string) (Input, int64, error) {
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
func ReadFile(ctx context.Context, name string, limit int64) ([]byte, error) {
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

// Sink is an output file being written: Finish, then Publish, make it
// appear at its path. A local file is written to a temporary file created
// exclusively beside it (CreateTemp: PATH.tmp-synapse-PID-RANDOM) and
// renamed; an object is uploaded and appears when the upload completes
// (Finish), so Publish has nothing left to do.
type Sink struct {
	sinkFile
	path, tmp string
}

// Path is where the sink's file appears.
func (o *Sink) Path() string { return o.path }

// Temp is the local temporary file being written, or "" for an object.
func (o *Sink) Temp() string { return o.tmp }

// Finish flushes what was written: a local file is synced and closed, an
// object's upload completed.
func (o *Sink) Finish() error { return o.finish() }

// CreateSink starts writing the output file path.
func CreateSink(ctx context.Context, path string) (*Sink, error) {
	if objstore.IsURL(path) {
		u, err := objstore.Create(ctx, path)
		if err != nil {
			return nil, err
		}
		return &Sink{sinkFile: upload{u}, path: path}, nil
	}
	f, err := CreateTemp(path)
	if err != nil {
		return nil, err
	}
	return &Sink{sinkFile: localFile{f}, path: path, tmp: f.Name()}, nil
}

// Publish renames a finished local output into place.
func (o *Sink) Publish() error {
	if o.tmp == "" {
		return nil
	}
	return RenameDurably(o.tmp, o.path)
}

// Discard aborts the output and removes what it left.
func (o *Sink) Discard() {
	o.abort()
	if o.tmp != "" {
		os.Remove(o.tmp)
	}
}

// writeFileAtomicAny writes a small file atomically: locally through a
// temporary file and a rename, in a bucket by one PUT.
func WriteFileAtomic(ctx context.Context, path string, b []byte) error {
	if objstore.IsURL(path) {
		if err := objstore.WriteFile(ctx, path, b); err != nil {
			return err
		}
		return nil
	}
	return WriteLocalFileAtomic(path, b)
}

// copyOut copies the first n bytes of the local file src into the output dst.
func CopyOut(ctx context.Context, src, dst string, n int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := CreateSink(ctx, dst)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	_, err = io.CopyN(bw, in, n)
	if err = errors.Join(err, bw.Flush()); err == nil {
		err = out.finish()
	}
	if err != nil {
		out.Discard()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return out.Publish()
}

// globAny expands a local glob, or one in a bucket (its matches sorted);
// no match is no error.
func Glob(ctx context.Context, pattern string) ([]string, error) {
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
func Remove(ctx context.Context, path string) error {
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
	out *Sink
	bw  *bufio.Writer
}

// CreateOutput starts writing path (a local path or an s3:// URL).
func CreateOutput(ctx context.Context, path string) (*OutputFile, error) {
	out, err := CreateSink(ctx, path)
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
		f.out.Discard()
		return fmt.Errorf("write %s: %w", f.out.path, err)
	}
	return f.out.Publish()
}

// Abort drops the file.
func (f *OutputFile) Abort() { f.out.Discard() }

// OpenReader opens a local file or an object (one streaming GET) for
// reading from its start: a run file, qrels, queries.
func OpenReader(ctx context.Context, name string) (io.ReadCloser, error) {
	if objstore.IsURL(name) {
		return objstore.Open(ctx, name)
	}
	return os.Open(name)
}

// publish renames each temporary file to its final name (the last pair
// last) and syncs the directories.
func RenameDurably(pairs ...string) error {
	for i := 0; i < len(pairs); i += 2 {
		if err := os.Rename(pairs[i], pairs[i+1]); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		if err := syncDir(filepath.Dir(pairs[i+1])); err != nil {
			return err
		}
	}
	return nil
}

// syncDir fsyncs a directory so that renames in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// writeFileAtomic writes path through a temporary file, fsync and rename.
func WriteLocalFileAtomic(path string, b []byte) error {
	f, err := CreateTemp(path)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	return RenameDurably(f.Name(), path)
}
