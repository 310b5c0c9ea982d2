package corpus

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/objstore"
)

// ReadOptions configures a Reader. The zero value reads the "text" field.
type ReadOptions struct {
	TextFields []string // fields joined with "\n"; default ["text"]
	IDField    string   // "" = "id", else "_id", else #INDEX (see ids.go)
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
	// (whole Parquet row groups are skipped without reading); with
	// UniqueIDs they are read, for their ids, and not returned.
	StartIndex int64
	// UniqueIDs makes a document whose id an earlier document of the run
	// has a duplicate_id RowError (see ids.go); the ids cost about
	// IDSetBytes each. Not with Raw.
	UniqueIDs bool
	// Shard and Shards, when Shards > 0 (--shard given, N = 1 too), make this the reader of range
	// shard Shard of Shards (see PlanShard): it reads its part of each
	// file alone, counts indexes and lines from its start, and a row
	// without an id is an error (the row index of a single run is not
	// known to a shard). Parts is the plan (set by Open).
	Shard, Shards int
	Parts         []Part

	MaxLineBytes     int       // longest JSONL line; default 64 MiB
	MaxTextBytes     int       // longest joined text; default and at most math.MaxInt32
	ParquetBatchRows int64     // rows per Parquet read; default 1024
	Stdin            io.Reader // read for the file "-"; default os.Stdin
	// Context, when done, stops an open or a read that waits on a pipe or
	// FIFO (stdin is made cancelable by the caller, see CancelableReader).
	Context   context.Context
	Allocator memory.Allocator // for Parquet reads; default memory.DefaultAllocator

	// Unembedded names fields that are worth embedding (embed's "title"):
	// the first document that has one that is not a TextField (a JSONL
	// object with a non-empty string in it, a row of a Parquet file with
	// such a column) is passed to OnUnembedded, once per field per
	// Reader, so that the run can say how to include it.
	Unembedded   []string
	OnUnembedded func(d Doc, field string)

	fallbacks int64           // documents given #INDEX ids
	noted     map[string]bool // Unembedded fields reported
}

// GroupRecords is the most records of one packing group (record.Doc.Group):
// a group starts at each input file, at each Parquet row group and after
// GroupRecords records.
const GroupRecords = 256

const (
	defaultMaxLine = 64 << 20
	defaultPQBatch = 1024
)

func (o *ReadOptions) fill() error {
	if len(o.TextFields) == 0 {
		o.TextFields = []string{"text"}
	}
	for _, f := range o.TextFields {
		if f == "" {
			return errors.New("empty text field name")
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
	if o.Shards > 0 && (o.Shard < 0 || o.Shard >= o.Shards) {
		return fmt.Errorf("shard %d of %d out of range", o.Shard, o.Shards)
	}
	o.Unembedded = slices.DeleteFunc(slices.Clone(o.Unembedded), func(f string) bool {
		return slices.Contains(o.TextFields, f) || o.Raw != nil || o.OnUnembedded == nil
	})
	o.noted = map[string]bool{}
	if o.UniqueIDs && o.Raw != nil {
		return errors.New("UniqueIDs is for documents, not raw rows")
	}
	return nil
}

// want reports whether the record with this index is to be returned.
func (o *ReadOptions) want(idx int64) bool { return idx >= o.StartIndex }

// part is what the reader reads of file i: the shard's part, or all.
func (o *ReadOptions) part(i int) Part {
	if o.Parts == nil {
		return Part{RowGroup1: -1}
	}
	return o.Parts[i]
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
	// fetched is the bytes read from the file (for a shard's manifest).
	fetched() int64
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
	spans []Span
	// start is ReadOptions.StartIndex: records below it are not returned.
	// With UniqueIDs the sources read them (opts.StartIndex is 0) so that
	// ids holds their ids.
	start int64
	ids   *IDSet
	dups  int64
}

// Span is what a reader read of one input file: its records (good or
// bad), its lines (JSONL, blank ones included) and the bytes it fetched.
type Span struct {
	File      string `json:"file"`
	Records   int64  `json:"records"`
	Lines     int64  `json:"lines,omitempty"`
	BytesRead int64  `json:"bytes_read"`
}

// Open returns a Reader over files; "-" is stdin (JSONL). Files are opened
// one at a time by Next; a .csv or .tsv file (optionally gzip-compressed) is
// CSV or TSV (csv.go), an .arrow file Arrow IPC (arrowin.go), another is Parquet when it starts with "PAR1" and
// JSONL (optionally gzip-compressed) otherwise; an extension InputFormat
// does not know is a FileError.
func Open(files []string, opts ReadOptions) (*Reader, error) {
	if len(files) == 0 {
		return nil, errors.New("no input files")
	}
	stdin := 0
	for _, f := range files {
		if f == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return nil, errors.New("stdin (-) given more than once")
	}
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if opts.Shards > 0 && opts.Parts == nil {
		parts, err := PlanShard(files, opts.Shard, opts.Shards)
		if err != nil {
			return nil, err
		}
		opts.Parts = parts
	}
	r := &Reader{files: files, opts: opts, spans: make([]Span, len(files)), start: opts.StartIndex}
	if opts.UniqueIDs {
		r.ids, r.opts.StartIndex = NewIDSet(), 0
	}
	for i, f := range files {
		r.spans[i].File = f
	}
	return r, nil
}

// Spans returns what the reader read of each file so far.
func (r *Reader) Spans() []Span { return slices.Clone(r.spans) }

// Next returns the next document. A bad record is returned as a *RowError
// (with its Index), a file that cannot be read as a *FileError — call Next
// again to go on with the next file — and the end of the input as io.EOF.
func (r *Reader) Next() (Doc, error) {
	for {
		if r.src == nil {
			if r.i >= len(r.files) {
				return Doc{}, io.EOF
			}
			if r.opts.part(r.i).Skip {
				r.i++
				continue
			}
			src, err := r.open(r.files[r.i])
			if err != nil {
				r.i++
				fe := err.(*FileError)
				if fe.Index = r.base; fe.Index < r.start {
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
			if fe.Index < r.start {
				continue // reported by the run being resumed
			}
			return d, err
		}
		if r.ids == nil {
			return d, err
		}
		if err == nil {
			if first, dup := r.ids.Add(d.ID, d.Index); dup {
				r.dups++
				d, err = Doc{}, duplicateError(d, first)
			}
		}
		if recordIndex(d, err) < r.start {
			continue // done by the run being resumed; read for its id
		}
		return d, err
	}
}

// recordIndex is the Index of what a source returned: a Doc or a RowError.
// A FileError's is the Index the next record would have had. Any other
// error is returned whatever the start.
func recordIndex(d Doc, err error) int64 {
	var re *RowError
	var fe *FileError
	switch {
	case err == nil:
		return d.Index
	case errors.As(err, &re):
		return re.Index
	case errors.As(err, &fe):
		return fe.Index
	}
	return math.MaxInt64
}

// IDStats counts the documents given #INDEX ids and, with UniqueIDs, the
// duplicates found so far, over every record read (a resumed run's
// records before its start included when UniqueIDs is set).
func (r *Reader) IDStats() IDStats { return IDStats{Fallback: r.opts.fallbacks, Duplicates: r.dups} }

func (r *Reader) finishFile() {
	recs, rows, bytes := r.src.progress()
	r.rows += rows
	r.bytes += bytes
	sp := &r.spans[r.i]
	sp.Records, sp.BytesRead = recs, r.src.fetched()
	if ls, ok := r.src.(interface{ lines() int64 }); ok {
		sp.Lines = ls.lines()
	}
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
	part := r.opts.part(r.i)
	if name == "-" {
		return newJSONL(name, io.NopCloser(r.opts.Stdin), r.base, &r.opts, -1, part)
	}
	format, err := InputFormat(name)
	if err != nil {
		return nil, &FileError{Source: name, RowGroup: -1, Err: err}
	}
	switch format {
	case FormatCSV, FormatTSV:
		return r.openCSV(name, format == FormatTSV)
	case FormatArrow:
		return r.openArrow(name)
	}
	if objstore.IsURL(name) {
		return r.openObject(name, part)
	}
	f, stop, err := files.OpenInput(r.opts.Context, name)
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
		}{br, closerFunc(func() error { stop(); return f.Close() })}, r.base, &r.opts, -1, part)
	}
	if IsParquet(f) {
		return newParquet(name, f, r.base, &r.opts, part)
	}
	st, err := f.Stat()
	if err == nil && part.Start > 0 {
		_, err = f.Seek(part.Start-1, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, &FileError{Source: name, RowGroup: -1, Err: err}
	}
	return newJSONL(name, f, r.base, &r.opts, st.Size(), part)
}

// openObject opens an input in a bucket: Parquet by ranged reads (the
// magic, the footer, the column chunks read), JSON Lines by one streaming
// GET from the part's start.
func (r *Reader) openObject(name string, part Part) (source, error) {
	f, err := objstore.Open(r.opts.Context, name)
	if err != nil {
		return nil, &FileError{Source: name, RowGroup: -1, Err: err}
	}
	if hasParquetMagic(f) {
		return newParquet(name, f, r.base, &r.opts, part)
	}
	if part.Start > 0 {
		f.Seek(part.Start-1, io.SeekStart)
	}
	return newJSONL(name, f, r.base, &r.opts, f.Size(), part)
}

// openCSV opens a CSV or TSV input (a file, a pipe or an object, read by
// one streaming GET), which a shard reads whole or not at all.
func (r *Reader) openCSV(name string, tsv bool) (source, error) {
	var rc io.ReadCloser
	if objstore.IsURL(name) {
		f, err := objstore.Open(r.opts.Context, name)
		if err != nil {
			return nil, &FileError{Source: name, RowGroup: -1, Err: err}
		}
		rc = f
	} else {
		f, stop, err := files.OpenInput(r.opts.Context, name)
		if err != nil {
			return nil, &FileError{Source: name, RowGroup: -1, Err: err}
		}
		rc = struct {
			io.Reader
			io.Closer
		}{f, closerFunc(func() error { stop(); return f.Close() })}
	}
	return newCSV(name, rc, r.base, &r.opts, tsv)
}

// openArrow opens an Arrow IPC file (a regular file or an object: it is
// read by ranges, its footer first).
func (r *Reader) openArrow(name string) (source, error) {
	if !objstore.IsURL(name) {
		if st, err := os.Stat(name); err == nil && !st.Mode().IsRegular() {
			return nil, &FileError{Source: name, RowGroup: -1, Err: errors.New("an Arrow IPC input must be a regular file, not a pipe")}
		}
	}
	f, _, err := files.OpenRandom(r.opts.Context, name)
	if err != nil {
		return nil, &FileError{Source: name, RowGroup: -1, Err: err}
	}
	return newArrow(name, f, r.base, &r.opts)
}

// IsParquet reports whether f starts with the Parquet magic and rewinds it.
func IsParquet(f io.ReadSeeker) bool {
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
		if st, err := os.Stat(name); err == nil && !st.Mode().IsRegular() && !objstore.IsURL(name) {
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
// unembedded reports d's Unembedded field f (once per Reader).
func (o *ReadOptions) unembedded(d Doc, f string) {
	if !o.noted[f] {
		o.noted[f] = true
		o.OnUnembedded(d, f)
	}
}

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

// fallbackID is the ID of a record without an ID field: #INDEX (see
// ids.go), which a range shard does not know (it counts from its own start).
func (o *ReadOptions) fallbackID(d Doc) (string, error) {
	if o.Shards > 0 {
		return "", d.Error(ReasonMissingField, "no id field (id, _id): a sharded run needs row ids (name the field with --id-field)")
	}
	o.fallbacks++
	return fallbackIDOf(d.Index), nil
}

type closerFunc func() error

func (c closerFunc) Close() error { return c() }
