package dataio

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Format is an output file format.
type Format string

const (
	FormatArrow   Format = "arrow"   // Arrow IPC file
	FormatParquet Format = "parquet" // Parquet, one row group per batch
)

// FormatOf is the format an output path selects: Parquet for ".parquet" and
// ".pq", the Arrow IPC file format otherwise.
func FormatOf(path string) Format {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet", ".pq":
		return FormatParquet
	}
	return FormatArrow
}

// Column names of the output schema.
const (
	ColID         = "id"
	ColChunk      = "chunk"
	ColTokenStart = "token_start"
	ColTokenEnd   = "token_end"
	ColCharStart  = "char_start"
	ColCharEnd    = "char_end"
	ColNTokens    = "n_tokens"
	ColEmbedding  = "embedding"
)

// Schema is the output schema: one row per chunk, the embedding a
// fixed_size_list<float32>[dims]; meta is stored as schema metadata with its
// keys sorted.
func Schema(dims int, meta map[string]string) *arrow.Schema {
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
	i32 := func(name string) arrow.Field { return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int32} }
	return arrow.NewSchema([]arrow.Field{
		{Name: ColID, Type: arrow.BinaryTypes.String},
		i32(ColChunk), i32(ColTokenStart), i32(ColTokenEnd), i32(ColCharStart), i32(ColCharEnd), i32(ColNTokens),
		{Name: ColEmbedding, Type: arrow.FixedSizeListOfNonNullable(int32(dims), arrow.PrimitiveTypes.Float32)},
	}, &md)
}

// Row is one output row: one chunk of a document and its embedding.
type Row struct {
	ID                   string
	Chunk                int32 // 0-based chunk number in the document
	TokenStart, TokenEnd int32 // token range of the chunk
	CharStart, CharEnd   int32 // byte range of the chunk in the joined text
	NTokens              int32
	Embedding            []float32 // exactly Dims values
}

// WriterOptions configures a Writer.
type WriterOptions struct {
	Dims       int               // embedding size; required
	Metadata   map[string]string // schema metadata: model, digest, pooling, chunking, version...
	Format     Format            // "" = FormatOf(out)
	BatchRows  int               // rows per record batch (cut at document ends); default 1024
	ErrorsPath string            // default out + ".errors.jsonl"
	Allocator  memory.Allocator  // default memory.DefaultAllocator

	// ResumeGuard holds facts about the inputs (sizes, modification
	// times) that a resume must find unchanged. OpenCheckpointed keeps them
	// in the checkpoint, not in the output, and refuses a resume whose
	// guard differs (ErrResumeMismatch naming the key).
	ResumeGuard map[string]string
}

// Writer writes the rows and error records of a run. One goroutine owns it.
type Writer struct {
	out, errPath string
	opts         WriterOptions
	schema       *arrow.Schema
	bld          *array.RecordBuilder
	pending      int
	last         int64 // Index of the last document Put; -1 before the first
	rows         int64
	batches      int64

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
	pid := strconv.Itoa(os.Getpid())
	w.tmp, w.errTmp = out+".tmp-"+pid, w.errPath+".tmp-"+pid
	if w.sink, err = newFinalSink(w.tmp, w.opts.Format, w.schema, w.opts.Allocator); err != nil {
		w.bld.Release()
		return nil, err
	}
	if w.errs, err = createErrorLog(w.errTmp); err != nil {
		w.sink.abort()
		os.Remove(w.tmp)
		w.bld.Release()
		return nil, err
	}
	return w, nil
}

func newWriter(out string, opts WriterOptions) (*Writer, error) {
	if opts.Dims <= 0 {
		return nil, fmt.Errorf("dataio: create %s: dims %d; want > 0", out, opts.Dims)
	}
	if opts.Format == "" {
		opts.Format = FormatOf(out)
	}
	if opts.Format != FormatArrow && opts.Format != FormatParquet {
		return nil, fmt.Errorf("dataio: create %s: unknown format %q", out, opts.Format)
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
	sc := Schema(opts.Dims, opts.Metadata)
	return &Writer{out: out, errPath: opts.ErrorsPath, opts: opts, schema: sc,
		bld: array.NewRecordBuilder(opts.Allocator, sc), last: -1}, nil
}

// Schema returns the schema of the output.
func (w *Writer) Schema() *arrow.Schema { return w.schema }

// Rows returns the number of rows put so far (with a resumed run's).
func (w *Writer) Rows() int64 { return w.rows }

// Put adds the result of the document with the given Index: its rows, in
// chunk order, and its error records. Documents must come in increasing
// Index; ones without rows or errors may be left out. After a failed Put
// the writer should be aborted.
func (w *Writer) Put(index int64, rows []Row, errs []*RowError) error {
	if w.closed {
		return ErrClosed
	}
	if index <= w.last {
		return fmt.Errorf("%w: index %d after %d", ErrOutOfOrder, index, w.last)
	}
	for _, r := range rows {
		if len(r.Embedding) != w.opts.Dims {
			return fmt.Errorf("dataio: put %d chunk %d: embedding has %d values; want %d", index, r.Chunk, len(r.Embedding), w.opts.Dims)
		}
	}
	for _, e := range errs {
		if err := w.errs.write(e); err != nil {
			return err
		}
	}
	for _, r := range rows {
		w.append(r)
	}
	w.last = index
	if w.pending >= w.opts.BatchRows {
		return w.flush()
	}
	return nil
}

// PutFileError writes a file-level failure to the errors file, in its place
// among the documents: all documents before fe.Index must have been Put.
func (w *Writer) PutFileError(fe *FileError) error {
	if w.closed {
		return ErrClosed
	}
	if fe.Index <= w.last {
		return fmt.Errorf("%w: file error at index %d after document %d", ErrOutOfOrder, fe.Index, w.last)
	}
	return w.errs.writeJSON(fileErrorJSONOf(fe))
}

func (w *Writer) append(r Row) {
	f := w.bld.Fields()
	f[0].(*array.StringBuilder).Append(r.ID)
	for i, v := range [...]int32{r.Chunk, r.TokenStart, r.TokenEnd, r.CharStart, r.CharEnd, r.NTokens} {
		f[1+i].(*array.Int32Builder).Append(v)
	}
	lb := f[7].(*array.FixedSizeListBuilder)
	lb.Append(true)
	lb.ValueBuilder().(*array.Float32Builder).AppendValues(r.Embedding, nil)
	w.pending++
	w.rows++
}

// flush writes the pending rows as one batch (and a checkpoint).
func (w *Writer) flush() error {
	if w.pending > 0 {
		rec := w.bld.NewRecordBatch()
		w.pending = 0
		err := w.sink.write(rec)
		rec.Release()
		if err != nil {
			return err
		}
		w.batches++
	}
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
	return publish(w.errTmp, w.errPath, w.tmp, w.out)
}

// publish renames each temporary file to its final name (the last pair
// last) and syncs the directories.
func publish(pairs ...string) error {
	for i := 0; i < len(pairs); i += 2 {
		if err := os.Rename(pairs[i], pairs[i+1]); err != nil {
			return fmt.Errorf("dataio: commit: %w", err)
		}
		if err := syncDir(filepath.Dir(pairs[i+1])); err != nil {
			return err
		}
	}
	return nil
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

// finalSink writes the output file in its final format.
type finalSink struct {
	f   *os.File
	bw  *bufio.Writer
	ipc *ipc.FileWriter
	pq  *pqarrow.FileWriter
}

func newFinalSink(path string, format Format, sc *arrow.Schema, mem memory.Allocator) (*finalSink, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dataio: %w", err)
	}
	s := &finalSink{f: f, bw: bufio.NewWriterSize(f, 1<<20)}
	if format == FormatParquet {
		props := parquet.NewWriterProperties(parquet.WithAllocator(mem),
			parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(false),
			parquet.WithMaxRowGroupLength(1<<20))
		s.pq, err = pqarrow.NewFileWriter(sc, s.bw, props,
			pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(mem)))
	} else {
		s.ipc, err = ipc.NewFileWriter(s.bw, ipc.WithSchema(sc), ipc.WithAllocator(mem))
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("dataio: %s: %w", path, err)
	}
	return s, nil
}

func (s *finalSink) write(rec arrow.RecordBatch) error {
	var err error
	if s.pq != nil {
		err = s.pq.Write(rec)
	} else {
		err = s.ipc.Write(rec)
	}
	if err != nil {
		return fmt.Errorf("dataio: write %s: %w", s.f.Name(), err)
	}
	return nil
}

func (s *finalSink) finish() error {
	var err error
	if s.pq != nil {
		err = s.pq.Close()
	} else {
		err = s.ipc.Close()
	}
	err = errors.Join(err, s.bw.Flush(), s.f.Sync(), s.f.Close())
	if err != nil {
		return fmt.Errorf("dataio: finish %s: %w", s.f.Name(), err)
	}
	return nil
}

func (s *finalSink) abort() {
	if s.pq != nil {
		s.pq.Close()
	} else {
		s.ipc.Close()
	}
	s.f.Close()
}

// errorLog writes error records as JSON Lines.
type errorLog struct {
	f       *os.File
	bw      *bufio.Writer
	bytes   int64 // bytes written so far
	records int64
}

func createErrorLog(path string) (*errorLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dataio: %w", err)
	}
	return &errorLog{f: f, bw: bufio.NewWriter(f)}, nil
}

func (l *errorLog) write(e *RowError) error { return l.writeJSON(rowErrorJSONOf(e)) }

func (l *errorLog) writeJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("dataio: error record: %w", err)
	}
	b = append(b, '\n')
	if _, err := l.bw.Write(b); err != nil {
		return fmt.Errorf("dataio: write %s: %w", l.f.Name(), err)
	}
	l.bytes += int64(len(b))
	l.records++
	return nil
}

func (l *errorLog) sync() error {
	if err := errors.Join(l.bw.Flush(), l.f.Sync()); err != nil {
		return fmt.Errorf("dataio: sync %s: %w", l.f.Name(), err)
	}
	return nil
}

func (l *errorLog) finish() error {
	return errors.Join(l.sync(), l.f.Close())
}

func (l *errorLog) abort() { l.f.Close() }

// syncDir fsyncs a directory so that renames in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("dataio: sync dir: %w", err)
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return fmt.Errorf("dataio: sync dir %s: %w", dir, err)
	}
	return nil
}
