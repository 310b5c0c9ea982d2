package dataio

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ReadOptions configures a Reader. The zero value reads the "text" field.
type ReadOptions struct {
	TextFields []string // fields joined with "\n"; default ["text"]
	IDField    string   // "" = "id", else "_id", else the decimal Index
	Prefix     string   // put in front of the joined text
	SkipEmpty  bool     // report empty or whitespace-only texts as empty_text
	// Raw returns each row's fields as JSON values (Doc.Fields) instead of
	// an ID and a text: JSONL objects as they are, the Parquet columns
	// named here (any type, nested lists and structs included) converted.
	// TextFields, IDField, Prefix and SkipEmpty are then not used. A row
	// that is not an object, or a string that is not valid UTF-8, is still
	// a RowError.
	Raw []string

	// StartIndex skips records with a smaller Index without parsing them
	// (whole Parquet row groups are skipped without reading).
	StartIndex int64
	// Shard and Shards, when Shards > 1, keep only records with
	// Index % Shards == Shard.
	Shard, Shards int

	MaxLineBytes     int       // longest JSONL line; default 64 MiB
	MaxTextBytes     int       // longest joined text; default and at most math.MaxInt32
	ParquetBatchRows int64     // rows per Parquet read; default 1024
	Stdin            io.Reader // read for the file "-"; default os.Stdin
	// Context, when done, stops an open or a read that waits on a pipe or
	// FIFO (stdin is made cancelable by the caller, see CancelableReader).
	Context   context.Context
	Allocator memory.Allocator // for Parquet reads; default memory.DefaultAllocator
}

// GroupRecords is the most records of one packing group (record.Doc.Group):
// a group starts at each input file, at each Parquet row group and after
// GroupRecords records.
const GroupRecords = 256

const (
	defaultMaxLine   = 64 << 20
	defaultPQBatch   = 1024
	defaultBatchRows = 1024
)

func (o *ReadOptions) fill() error {
	if len(o.TextFields) == 0 {
		o.TextFields = []string{"text"}
	}
	for _, f := range o.TextFields {
		if f == "" {
			return errors.New("dataio: empty text field name")
		}
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = defaultMaxLine
	}
	if o.MaxTextBytes <= 0 || o.MaxTextBytes > math.MaxInt32 {
		o.MaxTextBytes = math.MaxInt32
	}
	if o.ParquetBatchRows <= 0 {
		o.ParquetBatchRows = defaultPQBatch
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Context == nil {
		o.Context = context.Background()
	}
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if o.Shards > 1 && (o.Shard < 0 || o.Shard >= o.Shards) {
		return fmt.Errorf("dataio: shard %d of %d out of range", o.Shard, o.Shards)
	}
	return nil
}

// want reports whether the record with this index is to be returned.
func (o *ReadOptions) want(idx int64) bool {
	if idx < o.StartIndex {
		return false
	}
	return o.Shards <= 1 || idx%int64(o.Shards) == int64(o.Shard)
}

// source is one open input file.
type source interface {
	// next returns the next wanted record: a Doc, a *RowError, a *FileError
	// or io.EOF.
	next() (Doc, error)
	// span is the number of indices the file takes; after a failure it is
	// the number the file would have taken if known.
	span() int64
	// progress returns the records consumed so far in the file and the
	// Parquet rows and JSONL bytes behind them.
	progress() (records, rows, bytes int64)
	close() error
}

// Reader yields the documents of a list of files in order. It is not safe for
// concurrent use.
type Reader struct {
	files []string
	opts  ReadOptions
	i     int
	src   source
	base  int64 // Index of the first record of the current file
	rows  int64 // Parquet rows of the finished files
	bytes int64 // JSONL bytes of the finished files
}

// Open returns a Reader over files; "-" is stdin (JSONL). Files are opened
// one at a time by Next; a file is Parquet when it starts with "PAR1" and
// JSONL (optionally gzip-compressed) otherwise.
func Open(files []string, opts ReadOptions) (*Reader, error) {
	if len(files) == 0 {
		return nil, errors.New("dataio: no input files")
	}
	stdin := 0
	for _, f := range files {
		if f == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return nil, errors.New("dataio: stdin (-) given more than once")
	}
	if err := opts.fill(); err != nil {
		return nil, err
	}
	return &Reader{files: files, opts: opts}, nil
}

// Next returns the next document. A bad record is returned as a *RowError
// (with its Index), a file that cannot be read as a *FileError — call Next
// again to go on with the next file — and the end of the input as io.EOF.
func (r *Reader) Next() (Doc, error) {
	for {
		if r.src == nil {
			if r.i >= len(r.files) {
				return Doc{}, io.EOF
			}
			src, err := r.open(r.files[r.i])
			if err != nil {
				r.i++
				fe := err.(*FileError)
				if fe.Index = r.base; fe.Index < r.opts.StartIndex {
					continue // reported by the run being resumed
				}
				return Doc{}, err
			}
			r.src = src
		}
		d, err := r.src.next()
		if err == io.EOF {
			r.finishFile()
			continue
		}
		if fe, ok := err.(*FileError); ok {
			recs, _, _ := r.src.progress()
			fe.Index = r.base + recs
			r.finishFile()
			if fe.Index < r.opts.StartIndex {
				continue // reported by the run being resumed
			}
		}
		return d, err
	}
}

func (r *Reader) finishFile() {
	_, rows, bytes := r.src.progress()
	r.rows += rows
	r.bytes += bytes
	r.base += r.src.span()
	r.src.close()
	r.src = nil
	r.i++
}

// Progress returns how far the reader has got.
func (r *Reader) Progress() Progress {
	p := Progress{File: r.i, Records: r.base, ParquetRows: r.rows, JSONLBytes: r.bytes}
	if r.src != nil {
		recs, rows, bytes := r.src.progress()
		p.Records += recs
		p.ParquetRows += rows
		p.JSONLBytes += bytes
	}
	return p
}

// Close closes the file being read.
func (r *Reader) Close() error {
	if r.src == nil {
		return nil
	}
	err := r.src.close()
	r.src = nil
	r.i = len(r.files)
	return err
}

func (r *Reader) open(name string) (source, error) {
	if name == "-" {
		return newJSONL(name, io.NopCloser(r.opts.Stdin), r.base, &r.opts)
	}
	f, stop, err := openInput(r.opts.Context, name)
	if err != nil {
		return nil, &FileError{Source: name, RowGroup: -1, Err: err}
	}
	if _, err := f.Seek(0, io.SeekCurrent); err != nil {
		// A pipe or FIFO (e.g. <(zcat x.gz)): look at the magic without
		// consuming it. Parquet needs its footer first, so only JSONL.
		br := bufio.NewReaderSize(f, jsonlBufSize)
		if magic, _ := br.Peek(4); string(magic) == "PAR1" {
			stop()
			f.Close()
			return nil, &FileError{Source: name, RowGroup: -1, Err: errors.New("a Parquet input must be a regular file, not a pipe")}
		}
		return newJSONL(name, struct {
			io.Reader
			io.Closer
		}{br, closerFunc(func() error { stop(); return f.Close() })}, r.base, &r.opts)
	}
	if isParquet(f) {
		return newParquet(name, f, r.base, &r.opts)
	}
	return newJSONL(name, f, r.base, &r.opts)
}

// isParquet reports whether f starts with the Parquet magic and rewinds it.
func isParquet(f *os.File) bool {
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false
	}
	return n == 4 && string(magic[:]) == "PAR1"
}

// Estimate is the size of a run's input, for progress reporting.
type Estimate struct {
	ParquetRows int64 // rows of the Parquet files, from their footers
	JSONLBytes  int64 // bytes of the JSONL files; -1 when stdin is among them
}

// Count estimates the size of files without reading their data. Files that
// cannot be opened count as empty; their errors are joined into the error,
// which does not make the estimate unusable.
func Count(files []string) (Estimate, error) {
	var est Estimate
	var errs []error
	for _, name := range files {
		if name == "-" {
			est.JSONLBytes = -1
			continue
		}
		// A pipe or FIFO is read once, by the Reader: opening it here could
		// consume its first bytes or close a writer's only reader.
		if st, err := os.Stat(name); err == nil && !st.Mode().IsRegular() {
			est.JSONLBytes = -1
			continue
		}
		rows, size, isPQ, err := countFile(name)
		if err != nil {
			errs = append(errs, &FileError{Source: name, RowGroup: -1, Err: err})
			continue
		}
		if isPQ {
			est.ParquetRows += rows
		} else if est.JSONLBytes >= 0 {
			est.JSONLBytes += size
		}
	}
	return est, errors.Join(errs...)
}

// document builds the Doc for record idx from the values of the text
// fields, or the RowError that stands for it.
func (o *ReadOptions) document(d Doc, parts []string) (Doc, error) {
	var b strings.Builder
	n := len(o.Prefix)
	joined := 0
	for _, p := range parts {
		if p != "" {
			n += len(p) + min(joined, 1) // the newline before every part but the first
			joined++
		}
	}
	if n > o.MaxTextBytes {
		return Doc{}, d.Error(ReasonTextTooLong, fmt.Sprintf("text of %d bytes; at most %d", n, o.MaxTextBytes))
	}
	b.Grow(n)
	b.WriteString(o.Prefix)
	first := true
	for _, p := range parts {
		if p == "" {
			continue
		}
		if !first {
			b.WriteByte('\n')
		}
		b.WriteString(p)
		first = false
	}
	d.Text = b.String()
	d.PrefixLen = len(o.Prefix)
	if o.SkipEmpty && strings.TrimSpace(d.Text[d.PrefixLen:]) == "" {
		return Doc{}, d.Error(ReasonEmptyText, "text is empty or whitespace only")
	}
	return d, nil
}

// indexID is the ID of a record without an ID field.
func indexID(idx int64) string { return strconv.FormatInt(idx, 10) }

type closerFunc func() error

func (c closerFunc) Close() error { return c() }
