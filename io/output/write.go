package output

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/record"
)

// defaultBatchRows is WriterOptions.BatchRows when unset: the rows of one
// record batch, and of one checkpoint.
const defaultBatchRows = 1024

// Format is an output file format.
type Format string

const (
	FormatArrow   Format = "arrow"   // Arrow IPC file
	FormatParquet Format = "parquet" // Parquet, one row group per batch
	FormatJSONL   Format = "jsonl"   // JSON Lines, one object per row, keys in schema order
	FormatTREC    Format = "trec"    // TREC run: "qid Q0 docid rank score tag" (rerank outputs)
)

// FormatOf is the format an output path's extension selects: .arrow (or
// .ipc, .feather), .parquet (or .pq), .jsonl (or .ndjson), .trec (or .run).
// An unknown extension is an error naming it.
func FormatOf(path string) (Format, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".arrow", ".ipc", ".feather":
		return FormatArrow, nil
	case ".parquet", ".pq":
		return FormatParquet, nil
	case ".jsonl", ".ndjson":
		return FormatJSONL, nil
	case ".trec", ".run":
		return FormatTREC, nil
	default:
		return "", fmt.Errorf("%w: %q (from %s): want .arrow, .parquet, .jsonl or .trec", ErrUnknownFormat, ext, path)
	}
}

// NewSchema is a schema with meta as its metadata, keys sorted.
func NewSchema(fields []arrow.Field, meta map[string]string) *arrow.Schema {
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = meta[k]
	}
	md := arrow.NewMetadata(keys, vals)
	return arrow.NewSchema(fields, &md)
}

// Rows are the output rows of one input record.
type Rows interface {
	// Len is the number of rows.
	Len() int
	// AppendTo appends the rows to a builder of the writer's schema. It
	// checks the rows before it appends any: an error leaves b unchanged.
	AppendTo(b *array.RecordBuilder) error
}

// WriterOptions configures a Writer.
type WriterOptions struct {
	Schema     *arrow.Schema    // the output's columns and metadata; required
	Format     Format           // "" = FormatOf(out)
	BatchRows  int              // rows per record batch (cut at record ends); default 1024
	ErrorsPath string           // default out + ".errors.jsonl"
	Allocator  memory.Allocator // default memory.DefaultAllocator

	// ResumeGuard holds facts about the inputs (sizes, modification
	// times) that a resume must find unchanged. OpenCheckpointed keeps them
	// in the checkpoint, not in the output, and refuses a resume whose
	// guard differs (ErrResumeMismatch naming the key).
	ResumeGuard map[string]string
	// State, if set, is called at every checkpoint; its JSON value is kept
	// in the checkpoint and returned by a resume (ResumeState.State): the
	// caller's counters of the records written so far.
	State func() any
	// OnError, if set, is told the reason of every error record written
	// (for metrics).
	OnError func(reason string)
	// CheckpointDir is where OpenCheckpointed keeps the resume files of an
	// output (or errors file) in a bucket (see ResumeBase); "" =
	// DefaultCheckpointDir. A local output keeps them beside it.
	CheckpointDir string
	// Context bounds the uploads of outputs in a bucket; default
	// context.Background().
	Context context.Context
	// CheckpointEvery, if positive, also takes a checkpoint when this long
	// has passed since the last one (a checkpointed writer only): the rows
	// of the record batch still open go to the partial stream as a piece
	// marked open, and Commit joins the pieces of one batch again, so the
	// output's batches (and bytes) are those of a run that never
	// checkpointed early. 0: a checkpoint every BatchRows rows only.
	CheckpointEvery time.Duration
	// Now is the clock of CheckpointEvery; default time.Now.
	Now func() time.Time
}

// Writer writes the rows and error records of a run. One goroutine owns it.
type Writer struct {
	out, errPath string
	opts         WriterOptions
	schema       *arrow.Schema
	bld          *array.RecordBuilder
	pending      int   // rows in bld: not yet in the stream
	openRows     int   // rows of the open batch already in the stream, as open pieces
	pendingRecs  int   // records put since the last batch ended
	last         int64 // Index of the last record Put; -1 before the first
	group        int64 // Group of the last record Put
	rows         int64
	batches      int64     // batches in the sink (for a checkpointed writer: pieces, open ones too)
	savedRows    int64     // rows in the last checkpoint
	lastSave     time.Time // when the last checkpoint was taken

	sink   batchSink // where batches go while the run lasts
	errs   *errorLog
	ckpt   *checkpointer // nil unless made by OpenCheckpointed
	tmp    string        // final output, written aside
	errTmp string        // errors file, written aside (Create only)
	closed bool
}

// batchSink receives the record batches of a run.
type batchSink interface {
	write(arrow.RecordBatch) error
	finish() error // flush, fsync and close
	abort()        // close without caring about the content
}

// Create starts a run writing to out; nothing appears at out or at the
// errors path before Commit.
func Create(out string, opts WriterOptions) (*Writer, error) {
	w, err := newWriter(out, opts)
	if err != nil {
		return nil, err
	}
	if objstore.IsURL(out) || objstore.IsURL(w.errPath) {
		w.bld.Release()
		return nil, fmt.Errorf("create %s: an output in a bucket is written by OpenCheckpointed", out)
	}
	dst, err := files.CreateSink(w.opts.Context, out)
	if err != nil {
		w.bld.Release()
		return nil, err
	}
	w.tmp = dst.Temp()
	if w.sink, err = newFinalSink(dst, w.opts.Format, w.schema, w.opts.Allocator); err != nil {
		w.bld.Release()
		return nil, err
	}
	f, err := files.CreateTemp(w.errPath)
	if err != nil {
		w.sink.abort() // removes w.tmp
		w.bld.Release()
		return nil, err
	}
	w.errs, w.errTmp = &errorLog{f: f, bw: bufio.NewWriter(f)}, f.Name()
	return w, nil
}

func newWriter(out string, opts WriterOptions) (*Writer, error) {
	if opts.Schema == nil {
		return nil, fmt.Errorf("create %s: no schema", out)
	}
	if opts.Format == "" {
		f, err := FormatOf(out)
		if err != nil {
			return nil, err
		}
		opts.Format = f
	}
	if err := checkFormat(opts.Format, opts.Schema); err != nil {
		return nil, fmt.Errorf("create %s: %w", out, err)
	}
	if opts.BatchRows <= 0 {
		opts.BatchRows = defaultBatchRows
	}
	if opts.ErrorsPath == "" {
		opts.ErrorsPath = out + ".errors.jsonl"
	}
	if opts.Allocator == nil {
		opts.Allocator = memory.DefaultAllocator
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Writer{out: out, errPath: opts.ErrorsPath, opts: opts, schema: opts.Schema,
		bld: array.NewRecordBuilder(opts.Allocator, opts.Schema), last: -1, lastSave: opts.Now()}, nil
}

// Schema returns the schema of the output.
func (w *Writer) Schema() *arrow.Schema { return w.schema }

// Rows returns the number of rows put so far (with a resumed run's).
func (w *Writer) Rows() int64 { return w.rows }

// NextIndex is the Index after the last record Put: where a resume of
// the last checkpoint starts after a Checkpoint.
func (w *Writer) NextIndex() int64 { return w.last + 1 }

// CheckpointedRows returns the rows the last checkpoint holds (with a
// resumed run's): what a resume keeps if the run stops now.
func (w *Writer) CheckpointedRows() int64 { return w.savedRows }

// ErrorRecords returns the number of error records written so far.
func (w *Writer) ErrorRecords() int64 { return w.errs.records }

// Put adds the result of the input record with the given Index and packing
// group: its rows (nil for none) and its error records. Records must come
// in increasing Index. After a failed Put the writer should be aborted.
func (w *Writer) Put(index, group int64, rows Rows, errs []*record.RowError) error {
	if w.closed {
		return ErrClosed
	}
	if index <= w.last {
		return fmt.Errorf("%w: index %d after %d", ErrOutOfOrder, index, w.last)
	}
	if rows != nil {
		if err := rows.AppendTo(w.bld); err != nil {
			return err
		}
		w.pending += rows.Len()
		w.rows += int64(rows.Len())
	}
	for _, e := range errs {
		if err := w.errs.write(e); err != nil {
			return err
		}
		if w.opts.OnError != nil {
			w.opts.OnError(e.Reason)
		}
	}
	w.last, w.group = index, group
	w.pendingRecs++
	// A batch ends after the record that fills it; a checkpoint is also
	// taken when only error records advanced. Both depend on the input
	// alone, so a resumed run cuts the batches an uninterrupted one does.
	if w.openRows+w.pending >= w.opts.BatchRows || w.pendingRecs >= w.opts.BatchRows {
		return w.flush()
	}
	if w.ckpt != nil && w.opts.CheckpointEvery > 0 && w.opts.Now().Sub(w.lastSave) >= w.opts.CheckpointEvery {
		return w.Checkpoint()
	}
	return nil
}

// openBatch marks a piece of a record batch that a checkpoint cut before
// the batch was full: Commit joins it with the pieces after it, up to and
// with the next piece not so marked.
var openBatch = arrow.NewMetadata([]string{"synapse.open_batch"}, []string{"1"})

// Checkpoint makes every row and error record Put so far durable and
// records it, without ending the record batch (see
// WriterOptions.CheckpointEvery). A writer made by Create has no
// checkpoints: Checkpoint does nothing.
func (w *Writer) Checkpoint() error {
	if w.closed {
		return ErrClosed
	}
	if w.ckpt == nil {
		return nil
	}
	if w.pending > 0 {
		if err := w.writePiece(true); err != nil {
			return err
		}
	}
	return w.ckpt.save(w)
}

// writePiece writes the rows in the builder to the sink, marked as an open
// piece or not.
func (w *Writer) writePiece(open bool) error {
	rec := w.bld.NewRecordBatch()
	if open {
		marked := array.NewRecordBatchWithMetadata(w.schema, rec.Columns(), rec.NumRows(), openBatch)
		rec.Release()
		rec = marked
	}
	n := w.pending
	w.pending = 0
	err := w.sink.write(rec)
	rec.Release()
	if err != nil {
		return err
	}
	w.batches++
	if open {
		w.openRows += n
	}
	return nil
}

// PutFileError writes a file-level failure to the errors file, in its place
// among the records: all records before fe.Index must have been Put.
func (w *Writer) PutFileError(fe *record.FileError) error {
	if w.closed {
		return ErrClosed
	}
	if fe.Index <= w.last {
		return fmt.Errorf("%w: file error at index %d after record %d", ErrOutOfOrder, fe.Index, w.last)
	}
	if w.opts.OnError != nil {
		w.opts.OnError(record.ReasonFileError)
	}
	return w.errs.writeJSON(fileErrorJSONOf(fe))
}

// flush ends the record batch: it writes the pending rows (and a
// checkpoint). A batch whose rows are all in open pieces already ends with
// an empty piece, not marked.
func (w *Writer) flush() error {
	if w.pending > 0 || w.openRows > 0 {
		if err := w.writePiece(false); err != nil {
			return err
		}
	}
	w.openRows, w.pendingRecs = 0, 0
	if w.ckpt != nil {
		return w.ckpt.save(w)
	}
	return nil
}

// Commit writes what is pending, makes the output and errors files appear
// at their paths and, for a checkpointed writer, removes the resume files.
func (w *Writer) Commit() error {
	if w.closed {
		return ErrClosed
	}
	w.closed = true
	defer w.bld.Release()
	if err := w.flush(); err != nil {
		w.abortFiles()
		return err
	}
	if w.ckpt != nil {
		return w.ckpt.commit(w)
	}
	if err := w.sink.finish(); err != nil {
		w.abortFiles()
		return err
	}
	if err := w.errs.finish(); err != nil {
		w.abortFiles()
		return err
	}
	return files.RenameDurably(w.errTmp, w.errPath, w.tmp, w.out)
}

// Abort stops the run and removes its temporary files. A checkpointed
// writer keeps its resume files (see Discard). Abort after Commit does
// nothing.
func (w *Writer) Abort() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.bld.Release()
	w.abortFiles()
	return nil
}

func (w *Writer) abortFiles() {
	if w.sink != nil {
		w.sink.abort()
	}
	if w.errs != nil {
		w.errs.abort()
	}
	if w.ckpt != nil {
		w.ckpt.abort()
		return
	}
	os.Remove(w.tmp)
	os.Remove(w.errTmp)
}

// errorLog writes error records as JSON Lines.
type errorLog struct {
	f       *os.File
	bw      *bufio.Writer
	bytes   int64 // bytes written so far
	records int64
}

func (l *errorLog) write(e *record.RowError) error { return l.writeJSON(rowErrorJSONOf(e)) }

func (l *errorLog) writeJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("error record: %w", err)
	}
	b = append(b, '\n')
	if _, err := l.bw.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", l.f.Name(), err)
	}
	l.bytes += int64(len(b))
	l.records++
	return nil
}

func (l *errorLog) sync() error {
	if err := errors.Join(l.bw.Flush(), l.f.Sync()); err != nil {
		return fmt.Errorf("sync %s: %w", l.f.Name(), err)
	}
	return nil
}

func (l *errorLog) finish() error {
	return errors.Join(l.sync(), l.f.Close())
}

func (l *errorLog) abort() { l.f.Close() }
