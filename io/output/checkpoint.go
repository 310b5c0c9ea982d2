package output

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/readlimit"
)

// ResumeState tells the caller of OpenCheckpointed where the run stands.
type ResumeState struct {
	Resumed   bool  // a previous run's work was found and kept
	NextIndex int64 // records with a smaller Index are done
	// ReplayFrom is the packing group (record.Doc.Group) of the last record
	// written: read from there and replay up to NextIndex (pipeline.Config.Replay).
	ReplayFrom   int64
	Rows         int64 // rows already written
	ErrorRecords int64 // error records already written
	// State is WriterOptions.State's value at the checkpoint (JSON), nil
	// for a fresh run.
	State json.RawMessage
}

// Paths of the resume files of an output (its ResumeBase), for messages and cleanup.
func PartialPath(out string) string    { return out + ".partial" }
func CheckpointPath(out string) string { return out + ".checkpoint" }

// ResumeBase is the name the resume files of the output (or errors file)
// out are named after: out itself for a local file, whose resume files lie
// beside it; for an object, a local file in dir (DefaultCheckpointDir when
// ""), named by a digest of the URL and the key's base name. A bucket
// holds no resume files: its objects are the finished outputs only.
func ResumeBase(out, dir string) (string, error) {
	if !objstore.IsURL(out) {
		return out, nil
	}
	if dir == "" {
		d, err := DefaultCheckpointDir()
		if err != nil {
			return "", err
		}
		dir = d
	}
	sum := sha256.Sum256([]byte(out))
	return filepath.Join(dir, hex.EncodeToString(sum[:8])+"-"+path.Base(out)), nil
}

// CheckpointDirEnv overrides the default checkpoint directory.
const CheckpointDirEnv = "SYNAPSE_CHECKPOINT_DIR"

// DefaultCheckpointDir is where the resume files of outputs in a bucket
// live by default: $SYNAPSE_CHECKPOINT_DIR, else synapse/checkpoints in
// the user's cache directory ($XDG_CACHE_HOME, else ~/.cache).
func DefaultCheckpointDir() (string, error) {
	if d := os.Getenv(CheckpointDirEnv); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no directory for the resume files of an output in a bucket (give --checkpoint-dir): %w", err)
	}
	return filepath.Join(d, "synapse", "checkpoints"), nil
}

// PrepareCheckpointDir makes the directory of a resume base (0700: the
// partial outputs are the user's data) and checks it is writable.
func PrepareCheckpointDir(base string) error {
	dir := filepath.Dir(base)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("checkpoint directory: %w", err)
	}
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		return fmt.Errorf("checkpoint directory %s is not writable: %w", dir, err)
	}
	return nil
}

// checkpointFile is the content of OUT.checkpoint.
type checkpointFile struct {
	Version      int   `json:"version"`
	NextIndex    int64 `json:"next_index"`
	ReplayFrom   int64 `json:"replay_from"`
	Rows         int64 `json:"rows"`
	Batches      int64 `json:"batches"`
	BatchRows    int   `json:"batch_rows"`
	StreamBytes  int64 `json:"stream_bytes"`
	ErrorRecords int64 `json:"error_records"`
	ErrorsBytes  int64 `json:"errors_bytes"`
	// OpenRows and OpenRecords are the rows and records of the record
	// batch still open, its rows in pieces marked open (openBatch) at the
	// end of the stream: a checkpoint taken by time (version 3).
	OpenRows    int `json:"open_rows,omitempty"`
	OpenRecords int `json:"open_records,omitempty"`
	// Guard is WriterOptions.ResumeGuard of the run that wrote the files.
	Guard map[string]string `json:"guard,omitempty"`
	// State is WriterOptions.State's value (the caller's counters).
	State json.RawMessage `json:"state,omitempty"`
}

// checkpointVersion is the version written; version 2 (no open batch)
// is read too.
const checkpointVersion = 3

// checkpointer keeps the resume files of a checkpointed Writer.
type checkpointer struct {
	path    string // OUT.checkpoint
	partial string // OUT.partial
	errPart string // ERRORS.partial
	stream  *streamSink
}

// OpenCheckpointed starts a run writing to out that can be resumed after
// it is killed, or resumes the run whose resume files are beside out. opts
// (and BatchRows, dims and metadata in particular) must be those of the
// interrupted run; otherwise the error wraps ErrResumeMismatch and the
// resume files are left alone (Discard them to start over). See the
// package documentation for the files and the guarantees.
func OpenCheckpointed(out string, opts WriterOptions) (*Writer, ResumeState, error) {
	w, err := newWriter(out, opts)
	if err != nil {
		return nil, ResumeState{}, err
	}
	base, errBase, err := resumeBases(out, w.errPath, opts.CheckpointDir)
	if err != nil {
		w.bld.Release()
		return nil, ResumeState{}, err
	}
	c := &checkpointer{path: CheckpointPath(base), partial: PartialPath(base), errPart: errBase + ".partial"}
	w.ckpt = c
	cp, err := readCheckpoint(c.path)
	var st ResumeState
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = c.start(w)
	case err == nil:
		st, err = c.resume(w, cp)
	}
	if err != nil {
		c.abort()
		if w.errs != nil {
			w.errs.abort()
		}
		w.bld.Release()
		return nil, ResumeState{}, err
	}
	w.sink = c.stream
	// Holding the output's lock: a dead run's temporary files can go (an
	// output in a bucket has none; its stale uploads go at commit).
	for _, final := range []string{out, w.errPath, c.path} {
		if objstore.IsURL(final) {
			continue
		}
		if _, err := files.RemoveStaleTemps(final); err != nil {
			w.Abort()
			return nil, ResumeState{}, err
		}
	}
	return w, st, nil
}

// resumeBases are the resume bases of an output and its errors file, their
// directories made.
func resumeBases(out, errPath, dir string) (string, string, error) {
	base, err := ResumeBase(out, dir)
	if err != nil {
		return "", "", err
	}
	errBase, err := ResumeBase(errPath, dir)
	if err != nil {
		return "", "", err
	}
	for _, b := range []string{base, errBase} {
		if b != out && b != errPath {
			if err := PrepareCheckpointDir(b); err != nil {
				return "", "", err
			}
		}
	}
	return base, errBase, nil
}

func readCheckpoint(path string) (checkpointFile, error) {
	var cp checkpointFile
	b, err := readlimit.ReadFile(path, readlimit.State)
	if errors.Is(err, readlimit.ErrTooLarge) || errors.Is(err, readlimit.ErrNotRegular) { // no run writes such a checkpoint
		return cp, fmt.Errorf("%w: %w", ErrCheckpointCorrupt, err)
	}
	if err != nil {
		return cp, fmt.Errorf("checkpoint: %w", err)
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		return cp, fmt.Errorf("%w: %s: %v", ErrCheckpointCorrupt, path, err)
	}
	if cp.Version != checkpointVersion && cp.Version != 2 {
		return cp, fmt.Errorf("%w: %s: version %d; want %d", ErrCheckpointCorrupt, path, cp.Version, checkpointVersion)
	}
	return cp, nil
}

// start begins a fresh run: empty resume files and a checkpoint at 0.
func (c *checkpointer) start(w *Writer) error {
	f, err := openLocked(c.partial)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return err
	}
	c.stream = &streamSink{f: f, bw: bufio.NewWriterSize(f, 1<<20), mem: w.opts.Allocator}
	p := ipc.GetSchemaPayload(w.schema, w.opts.Allocator)
	_, err = p.WritePayload(c.stream)
	p.Release()
	if err != nil {
		return fmt.Errorf("write %s: %w", c.partial, err)
	}
	ef, err := openLocked(c.errPart)
	if err != nil {
		return err
	}
	w.errs = &errorLog{f: ef, bw: bufio.NewWriter(ef)}
	if err := ef.Truncate(0); err != nil {
		return err
	}
	return c.save(w)
}

// resume cuts the resume files back to the checkpoint, checks them and
// positions the writer after the last completed document.
func (c *checkpointer) resume(w *Writer, cp checkpointFile) (ResumeState, error) {
	if cp.BatchRows != w.opts.BatchRows {
		return ResumeState{}, fmt.Errorf("%w: batch rows %d; the partial output has %d", ErrResumeMismatch, w.opts.BatchRows, cp.BatchRows)
	}
	if err := compareGuard(cp.Guard, w.opts.ResumeGuard); err != nil {
		return ResumeState{}, err
	}
	f, err := openLocked(c.partial)
	if err != nil {
		return ResumeState{}, err
	}
	c.stream = &streamSink{f: f, bw: bufio.NewWriterSize(f, 1<<20), mem: w.opts.Allocator, bytes: cp.StreamBytes}
	if err := cutTo(f, cp.StreamBytes); err != nil {
		return ResumeState{}, err
	}
	if err := verifyStream(f, cp, w.schema, w.opts.Allocator); err != nil {
		return ResumeState{}, err
	}
	if _, err := os.Lstat(c.errPart); err != nil {
		return ResumeState{}, fmt.Errorf("%w: %v", ErrCheckpointCorrupt, err)
	}
	ef, err := openLocked(c.errPart)
	if err != nil {
		return ResumeState{}, err
	}
	w.errs = &errorLog{f: ef, bw: bufio.NewWriter(ef), bytes: cp.ErrorsBytes, records: cp.ErrorRecords}
	if err := cutTo(ef, cp.ErrorsBytes); err != nil {
		return ResumeState{}, err
	}
	w.last, w.group, w.rows, w.batches = cp.NextIndex-1, cp.ReplayFrom, cp.Rows, cp.Batches
	w.openRows, w.pendingRecs, w.savedRows = cp.OpenRows, cp.OpenRecords, cp.Rows
	return ResumeState{Resumed: true, NextIndex: cp.NextIndex, ReplayFrom: cp.ReplayFrom, Rows: cp.Rows,
		ErrorRecords: cp.ErrorRecords, State: cp.State}, nil
}

// openLocked opens (creating) a resume file and takes an exclusive lock on
// it, so that two runs cannot write the same output.
func openLocked(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, inUse(path, err)
	}
	return f, nil
}

// ErrInUse: another run is writing the same output or errors file. Two
// runs must not share one (the second would destroy the first's rows), so
// the second is refused; it is not retried (exit 2) because running it
// after the first would overwrite the first's files.
var ErrInUse = errors.New("in use by another run")

func inUse(path string, err error) error {
	return fmt.Errorf("%s is %w (two runs must not share an output or errors file): %v", path, ErrInUse, err)
}

// cutTo truncates f to n bytes, which it must have, and seeks to the end.
func cutTo(f *os.File, n int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < n {
		return fmt.Errorf("%w: %s has %d bytes; the checkpoint says %d", ErrCheckpointCorrupt, f.Name(), st.Size(), n)
	}
	if err := f.Truncate(n); err != nil {
		return err
	}
	if _, err := f.Seek(n, io.SeekStart); err != nil {
		return err
	}
	return nil
}

// verifyStream reads the valid prefix of the partial stream back and checks
// it against the checkpoint and the schema of this run.
func verifyStream(f *os.File, cp checkpointFile, sc *arrow.Schema, mem memory.Allocator) error {
	r, err := ipc.NewReader(bufio.NewReaderSize(io.NewSectionReader(f, 0, cp.StreamBytes), 1<<20), ipc.WithAllocator(mem))
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCheckpointCorrupt, f.Name(), err)
	}
	defer r.Release()
	got := r.Schema()
	if !got.Metadata().Equal(sc.Metadata()) { // before the columns: the options that changed them are named here
		if err := compareGuard(metadataMap(got.Metadata()), metadataMap(sc.Metadata())); err != nil {
			return err
		}
	}
	if !got.Equal(sc) {
		return fmt.Errorf("%w: the partial output has schema\n%s\nthis run has\n%s", ErrResumeMismatch, got, sc)
	}
	var rows, batches int64
	for r.Next() {
		rows += r.RecordBatch().NumRows()
		batches++
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCheckpointCorrupt, f.Name(), err)
	}
	if rows != cp.Rows || batches != cp.Batches {
		return fmt.Errorf("%w: %s has %d rows in %d batches; the checkpoint says %d in %d",
			ErrCheckpointCorrupt, f.Name(), rows, batches, cp.Rows, cp.Batches)
	}
	return nil
}

// save makes everything written so far durable and records it.
func (c *checkpointer) save(w *Writer) error {
	if err := c.stream.sync(); err != nil {
		return err
	}
	if err := w.errs.sync(); err != nil {
		return err
	}
	cp := checkpointFile{Version: checkpointVersion, NextIndex: w.last + 1, ReplayFrom: w.group, Rows: w.rows,
		Batches: w.batches, BatchRows: w.opts.BatchRows, StreamBytes: c.stream.bytes, ErrorRecords: w.errs.records,
		ErrorsBytes: w.errs.bytes, Guard: w.opts.ResumeGuard, OpenRows: w.openRows, OpenRecords: w.pendingRecs}
	if w.opts.State != nil {
		state, err := json.Marshal(w.opts.State())
		if err != nil {
			return fmt.Errorf("checkpoint state: %w", err)
		}
		cp.State = state
	}
	b, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := files.WriteLocalFileAtomic(c.path, b); err != nil {
		return err
	}
	w.savedRows, w.lastSave = w.rows, w.opts.Now()
	return nil
}

// commit converts the partial stream into the final file, copies the
// errors out, makes both appear (the errors file first, the output last)
// and removes the resume files. A kill at any point before the removal
// leaves a resumable run behind; an output in a bucket is an upload that
// completes last, so an interrupted commit leaves no object under its key.
func (c *checkpointer) commit(w *Writer) error {
	w.errs.abort() // synced by the last save
	defer c.stream.abort()
	started := time.Now()
	dst, err := files.CreateSink(w.opts.Context, w.out)
	if err != nil {
		return err
	}
	sink, err := newFinalSink(dst, w.opts.Format, w.schema, w.opts.Allocator)
	if err != nil {
		return err
	}
	if err := c.convert(w, sink); err != nil {
		sink.abort()
		return err
	}
	if err := files.CopyOut(w.opts.Context, c.errPart, w.errPath, w.errs.bytes); err != nil {
		sink.abort()
		return err
	}
	if err := sink.finish(); err != nil {
		return err
	}
	if testHookBeforePublish != nil {
		testHookBeforePublish()
	}
	if err := dst.Publish(); err != nil {
		return err
	}
	if objstore.IsURL(w.out) {
		// An earlier attempt killed mid-upload left its parts behind.
		objstore.AbortStale(w.opts.Context, w.out, started)
	}
	if err := errors.Join(os.Remove(c.path), os.Remove(c.errPart), os.Remove(c.partial)); err != nil {
		return fmt.Errorf("remove resume files: %w", err)
	}
	return nil
}

// testHookBeforePublish, when set by a test, runs when the final output is
// complete in its temporary file and not yet renamed into place.
var testHookBeforePublish func()

func (c *checkpointer) convert(w *Writer, sink *finalSink) error {
	r, err := ipc.NewReader(bufio.NewReaderSize(io.NewSectionReader(c.stream.f, 0, c.stream.bytes), 1<<20),
		ipc.WithAllocator(w.opts.Allocator))
	if err != nil {
		return fmt.Errorf("read %s: %w", c.partial, err)
	}
	defer r.Release()
	var open []arrow.RecordBatch // the pieces of the batch being joined
	defer func() { releaseAll(open) }()
	for r.Next() {
		rec := r.RecordBatch()
		if isOpenPiece(rec) {
			rec.Retain()
			open = append(open, rec)
			continue
		}
		if len(open) == 0 {
			if err := sink.write(rec); err != nil {
				return err
			}
			continue
		}
		rec.Retain()
		open = append(open, rec)
		joined, err := joinBatches(w.schema, open, w.opts.Allocator)
		releaseAll(open)
		open = nil
		if err != nil {
			return fmt.Errorf("read %s: %w", c.partial, err)
		}
		err = sink.write(joined)
		joined.Release()
		if err != nil {
			return err
		}
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("read %s: %w", c.partial, err)
	}
	if len(open) > 0 { // Commit ends the batch: never the case
		return fmt.Errorf("read %s: %w: the stream ends inside a record batch", c.partial, ErrCheckpointCorrupt)
	}
	return nil
}

// isOpenPiece reports a piece of a record batch cut by a checkpoint.
func isOpenPiece(rec arrow.RecordBatch) bool {
	m, ok := rec.(arrow.RecordBatchWithMetadata)
	if !ok {
		return false
	}
	md := m.Metadata()
	return md.FindKey(openBatch.Keys()[0]) >= 0
}

// joinBatches is one record batch of the rows of recs, in order: the
// batch an uninterrupted run writes (its Arrow bytes are the same).
func joinBatches(sc *arrow.Schema, recs []arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, sc.NumFields())
	defer func() { releaseAll(cols) }()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	parts := make([]arrow.Array, len(recs))
	for j := range cols {
		for i, r := range recs {
			parts[i] = r.Column(j)
		}
		col, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, err
		}
		cols[j] = col
	}
	return array.NewRecordBatch(sc, cols, rows), nil
}

func releaseAll[T interface{ Release() }](xs []T) {
	for _, x := range xs {
		if any(x) != nil {
			x.Release()
		}
	}
}

// abort closes the resume files, keeping them for a later resume.
func (c *checkpointer) abort() {
	if c.stream != nil {
		c.stream.abort()
	}
}

// Discard aborts the run and removes its resume files too, so that the next
// OpenCheckpointed starts over.
func (w *Writer) Discard() error {
	w.Abort()
	if _, ok := w.ckpt.(*checkpointer); !ok {
		return nil
	}
	return RemoveResumeFiles(w.out, w.errPath, w.opts.CheckpointDir)
}

// RemoveResumeFiles removes the resume files of out (errPath "" = the
// default errors path; dir is WriterOptions.CheckpointDir). Files that do
// not exist are not an error; files a running writer holds are not
// removed: that is an error naming the file.
func RemoveResumeFiles(out, errPath, dir string) error {
	if errPath == "" {
		errPath = out + ".errors.jsonl"
	}
	out, errPath, err := resumeBases(out, errPath, dir)
	if err != nil {
		return err
	}
	// Deleting a locked file would succeed and let a second run write
	// beside the first: hold the lock while removing.
	for _, p := range []string{PartialPath(out), errPath + ".partial"} {
		if f, err := os.OpenFile(p, os.O_RDWR|syscall.O_NOFOLLOW, 0); err == nil {
			defer f.Close()
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				return inUse(p, err)
			}
		}
	}
	var errs []error
	for _, p := range []string{CheckpointPath(out), PartialPath(out), errPath + ".partial"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return nil
}

// streamSink appends record batches to the partial Arrow IPC stream.
type streamSink struct {
	f     *os.File
	bw    *bufio.Writer
	mem   memory.Allocator
	bytes int64 // bytes of the stream written so far
}

func (s *streamSink) write(rec arrow.RecordBatch) error {
	p, err := ipc.GetRecordBatchPayload(rec, ipc.WithAllocator(s.mem))
	if err != nil {
		return fmt.Errorf("encode batch: %w", err)
	}
	_, err = p.WritePayload(s)
	p.Release()
	if err != nil {
		return fmt.Errorf("write %s: %w", s.f.Name(), err)
	}
	return nil
}

// Write counts the bytes of the stream (Payload.WritePayload does not
// count the body).
func (s *streamSink) Write(b []byte) (int, error) {
	n, err := s.bw.Write(b)
	s.bytes += int64(n)
	return n, err
}

func (s *streamSink) sync() error {
	if err := errors.Join(s.bw.Flush(), s.f.Sync()); err != nil {
		return fmt.Errorf("sync %s: %w", s.f.Name(), err)
	}
	return nil
}

func (s *streamSink) finish() error { return s.sync() }

func (s *streamSink) abort() { s.f.Close() }

// UnionKeys returns the keys of was and now together, each once, sorted.
func UnionKeys[V any](was, now map[string]V) []string {
	keys := make([]string, 0, len(was)+len(now))
	for k := range was {
		keys = append(keys, k)
	}
	for k := range now {
		if _, ok := was[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// compareGuard names every key, in sorted order, whose value differs
// between the interrupted run (was) and this one (now): a *MismatchError,
// nil when none does.
func compareGuard(was, now map[string]string) error {
	var e MismatchError
	for _, k := range UnionKeys(was, now) {
		a, inWas := was[k]
		b, inNow := now[k]
		if inWas != inNow || a != b {
			e.Diffs = append(e.Diffs, Mismatch{Key: k, Was: a, Now: b, InWas: inWas, InNow: inNow})
		}
	}
	if len(e.Diffs) == 0 {
		return nil
	}
	return &e
}

func metadataMap(md arrow.Metadata) map[string]string {
	m := make(map[string]string, md.Len())
	for i, k := range md.Keys() {
		m[k] = md.Values()[i]
	}
	return m
}
