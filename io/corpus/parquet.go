package corpus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/objstore"
)

// column is a text or ID column of a Parquet file as this run uses it.
type column struct {
	name    string
	leaf    int    // leaf column index; -1 when the column cannot be read
	problem string // reason code every row gets when the column is unusable
	detail  string
	arr     arrow.Array // the column in the current batch
}

// parquetSource reads one Parquet file a row group and a batch at a time.
type parquetSource struct {
	name  string
	f     files.Input
	pf    *file.Reader
	fr    *pqarrow.FileReader
	opts  *ReadOptions
	base  int64
	nrows int64 // rows of the part read: row groups [rg0, rgEnd)
	// firstRow is the file row of the part's first row: record indexes
	// count from it; rgEnd is the row group after the part.
	firstRow int64
	rgEnd    int
	counter  *countingFile

	text   []column
	id     *column // nil: the ID is the Index
	leaves []int
	raw    []column // ReadOptions.Raw: the columns to convert; all leaves are read
	// unembedded are the ReadOptions.Unembedded fields the file has as columns
	unembedded []string

	rg      int   // current row group
	rgStart int64 // file row of the first row of rg
	rgOpen  bool
	rr      pqarrow.RecordReader
	virtual int64 // rows left in rg when no column is read
	// bad, when set, says why row group rg failed; its rows up to badEnd
	// (a file row) are returned as RowErrors.
	bad    string
	badEnd int64
	recLen int
	recPos int
	row    int64 // file row of the next row
}

func newParquet(name string, f files.Input, base int64, opts *ReadOptions, part Part) (src source, err error) {
	fail := func(err error) (source, error) {
		f.Close()
		return nil, &FileError{Source: name, RowGroup: -1, Err: err}
	}
	defer func() {
		if p := recover(); p != nil {
			src, err = fail(fmt.Errorf("parquet: reading footer: panic: %v", p))
		}
	}()
	props := parquet.NewReaderProperties(opts.Allocator)
	props.BufferedStreamEnabled = true
	props.BufferSize = 256 << 10
	if objstore.IsURL(name) {
		props.BufferSize = 8 << 20 // every read is a request: fewer, larger ones
	}
	counter := &countingFile{Input: f}
	pf, err := file.NewParquetReader(counter, file.WithReadProps(props))
	if err != nil {
		return fail(fmt.Errorf("parquet: %w", err))
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: opts.ParquetBatchRows}, opts.Allocator)
	if err != nil {
		pf.Close()
		return fail(fmt.Errorf("parquet: %w", err))
	}
	sc, err := fr.Schema()
	if err != nil {
		pf.Close()
		return fail(fmt.Errorf("parquet: schema: %w", err))
	}
	s := &parquetSource{name: name, f: f, pf: pf, fr: fr, opts: opts, base: base, counter: counter}
	s.selectPart(part)
	s.resolve(sc)
	return s, nil
}

// resolve finds the text and ID columns in the file's schema.
func (s *parquetSource) resolve(sc *arrow.Schema) {
	if s.opts.Raw != nil {
		for _, name := range s.opts.Raw {
			if len(sc.FieldIndices(name)) > 0 {
				s.raw = append(s.raw, column{name: name})
			}
		}
		return
	}
	s.text, s.id, s.unembedded = resolveColumns(sc, s.opts, func(name string, _ int) int {
		return s.pf.MetaData().Schema.ColumnIndexByName(name)
	})
	cols := s.text
	if s.id != nil {
		cols = append(slices.Clip(cols), *s.id)
	}
	seen := map[int]bool{} // the leaves to read, each once: the text columns', then the id's
	for _, c := range cols {
		if c.leaf >= 0 && !seen[c.leaf] {
			seen[c.leaf] = true
			s.leaves = append(s.leaves, c.leaf)
		}
	}
}

// resolveColumns finds opts' text columns, the unembedded ones present and
// the id column (IDField, else id, else _id; nil when neither is there) in
// sc, for Parquet and Arrow IPC alike. leaf gives the index a column is
// read by from its name and schema index (-1: it cannot be read). A missing
// or unusable column is a problem every row reports.
func resolveColumns(sc *arrow.Schema, opts *ReadOptions, leaf func(name string, field int) int) (text []column, id *column, unembedded []string) {
	lookup := func(name string, ok func(arrow.DataType) bool, bad string) column {
		c := column{name: name, leaf: -1}
		idx := sc.FieldIndices(name)
		if len(idx) == 0 {
			c.problem, c.detail = ReasonMissingField, fmt.Sprintf("no column %q", name)
			return c
		}
		dt := sc.Field(idx[0]).Type
		l := leaf(name, idx[0])
		if !ok(dt) || l < 0 {
			c.problem, c.detail = bad, fmt.Sprintf("column %q has type %s", name, dt)
			return c
		}
		c.leaf = l
		return c
	}
	for _, f := range opts.TextFields {
		text = append(text, lookup(f, isText, ReasonNotText))
	}
	for _, f := range opts.Unembedded {
		if len(sc.FieldIndices(f)) > 0 {
			unembedded = append(unembedded, f)
		}
	}
	names := []string{opts.IDField}
	if opts.IDField == "" {
		names = []string{"id", "_id"}
	}
	for _, n := range names {
		if c := lookup(n, isID, ReasonBadID); c.problem != ReasonMissingField || opts.IDField != "" {
			return text, &c, unembedded
		}
	}
	return text, nil, unembedded
}

func isText(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW, arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW:
		return true
	case arrow.DICTIONARY:
		return isText(dt.(*arrow.DictionaryType).ValueType)
	}
	return false
}

func isID(dt arrow.DataType) bool {
	return isText(dt) || arrow.IsInteger(dt.ID())
}

// selectPart sets the row groups to read: the part's, or all.
func (s *parquetSource) selectPart(part Part) {
	meta := s.pf.MetaData()
	s.rgEnd = s.pf.NumRowGroups()
	if part.RowGroup1 >= 0 && part.RowGroup1 < s.rgEnd {
		s.rgEnd = part.RowGroup1
	}
	for g := 0; g < s.rgEnd; g++ {
		n := meta.RowGroup(g).NumRows()
		if g < part.RowGroup0 {
			s.firstRow += n
		} else {
			s.nrows += n
		}
	}
	s.rg = min(part.RowGroup0, s.rgEnd)
	s.rgStart, s.row = s.firstRow, s.firstRow
}

func (s *parquetSource) span() int64 { return s.nrows }

func (s *parquetSource) fetched() int64 { return s.counter.n.Load() }

func (s *parquetSource) progress() (records, rows, bytes int64) {
	return s.row - s.firstRow, s.row - s.firstRow, 0
}

// countingFile counts the bytes the Parquet reader fetches.
type countingFile struct {
	files.Input
	n atomic.Int64
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.Input.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingFile) Read(p []byte) (int, error) {
	n, err := c.Input.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (s *parquetSource) close() error {
	if s.rr != nil {
		s.rr.Release()
		s.rr = nil
	}
	return s.pf.Close() // closes f
}

// errAgain: step made progress without a record to return.
var errAgain = errors.New("again")

func (s *parquetSource) next() (Doc, error) {
	for {
		if d, err := s.step(); err != errAgain {
			return d, err
		}
	}
}

// step reads one row, or the next batch: the row's Doc or RowError,
// io.EOF at the end of the part, or errAgain. A row group that cannot be
// decoded makes each of its rows not yet returned a corrupt_row_group
// RowError naming the group and its rows; the next group is read as usual.
func (s *parquetSource) step() (d Doc, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.failGroup(fmt.Errorf("panic while decoding: %v", p))
			d, err = Doc{}, errAgain
		}
	}()
	if s.bad != "" {
		return s.badRow()
	}
	if s.recPos >= s.recLen {
		more, err := s.nextBatch()
		switch {
		case err != nil:
			s.failGroup(err)
			return Doc{}, errAgain
		case !more:
			return Doc{}, io.EOF
		}
		return Doc{}, errAgain
	}
	i := s.recPos
	s.recPos++
	row := s.row
	idx := s.base + row - s.firstRow
	if !s.opts.want(idx) {
		s.row++
		return Doc{}, errAgain
	}
	d, err = s.rowDoc(i, Doc{Source: s.name, Row: row, Index: idx, Group: s.groupOf(row)})
	s.row++ // after: a panic in rowDoc leaves this row to failGroup
	return d, err
}

// groupOf is the packing group of the record of file row row.
func (s *parquetSource) groupOf(row int64) int64 {
	return s.base + s.rgStart - s.firstRow + (row-s.rgStart)/GroupRecords*GroupRecords
}

// failGroup gives up the current row group after err: the rows of it not
// yet returned become RowErrors (badRow).
func (s *parquetSource) failGroup(err error) {
	func() {
		defer func() { recover() }() // a reader that failed may fail again on release
		if s.rr != nil {
			s.rr.Release()
		}
	}()
	s.rr, s.rgOpen, s.recPos, s.recLen, s.virtual = nil, false, 0, 0, 0
	s.badEnd = s.rgStart + s.pf.MetaData().RowGroup(s.rg).NumRows()
	s.bad = fmt.Sprintf("row group %d (rows %d-%d of the file, %d rows) cannot be decoded: %v",
		s.rg, s.rgStart, s.badEnd-1, s.badEnd-s.rgStart, err)
}

// badRow returns the RowError of the next row of a failed row group, and
// moves to the next group after its last.
func (s *parquetSource) badRow() (Doc, error) {
	if s.row >= s.badEnd {
		s.bad = ""
		s.rgStart, s.rg = s.badEnd, s.rg+1
		s.row = s.rgStart
		return Doc{}, errAgain
	}
	row := s.row
	s.row++
	idx := s.base + row - s.firstRow
	if !s.opts.want(idx) {
		return Doc{}, errAgain
	}
	d := Doc{Source: s.name, Row: row, Index: idx, Group: s.groupOf(row)}
	return Doc{}, d.Error(ReasonCorruptRows, s.bad)
}

// nextBatch makes the next batch of rows current; false at the end of the file.
func (s *parquetSource) nextBatch() (bool, error) {
	meta := s.pf.MetaData()
	for {
		if s.rgOpen {
			if more, err := s.batchInGroup(); more || err != nil {
				return more, err
			}
			s.rgOpen = false
			end := s.rgStart + meta.RowGroup(s.rg).NumRows()
			if s.row != end {
				return false, fmt.Errorf("parquet: read %d rows, the footer says %d", s.row-s.rgStart, end-s.rgStart)
			}
			s.rgStart, s.rg = end, s.rg+1
		}
		if s.rg >= s.rgEnd {
			return false, nil
		}
		n := meta.RowGroup(s.rg).NumRows()
		if n == 0 || s.base+s.rgStart-s.firstRow+n <= s.opts.StartIndex {
			s.row = s.rgStart + n
			s.rgStart, s.rg = s.rgStart+n, s.rg+1
			continue
		}
		if err := s.openGroup(n); err != nil {
			return false, err
		}
	}
}

func (s *parquetSource) openGroup(n int64) error {
	s.rgOpen = true
	leaves := s.leaves
	if len(s.raw) > 0 {
		leaves = nil // every column: nested ones have many leaves
	} else if len(s.leaves) == 0 {
		s.virtual = n
		return nil
	}
	rr, err := s.fr.GetRecordReader(context.Background(), leaves, []int{s.rg})
	if err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	s.rr = rr
	return nil
}

// batchInGroup makes the next batch of the open row group current.
func (s *parquetSource) batchInGroup() (bool, error) {
	s.recPos, s.recLen = 0, 0
	if s.rr == nil {
		n := min(s.virtual, s.opts.ParquetBatchRows)
		s.virtual -= n
		s.recLen = int(n)
		return n > 0, nil
	}
	if s.rr.Next() {
		rec := s.rr.RecordBatch()
		s.recLen = int(rec.NumRows())
		for i := range s.text {
			s.text[i].arr = columnOf(rec, &s.text[i])
		}
		if s.id != nil {
			s.id.arr = columnOf(rec, s.id)
		}
		for i := range s.raw {
			s.raw[i].arr = columnOf(rec, &s.raw[i])
		}
		return true, nil
	}
	err := s.rr.Err()
	s.rr.Release()
	s.rr = nil
	if err != nil {
		return false, fmt.Errorf("parquet: %w", err)
	}
	return false, nil
}

func columnOf(rec arrow.RecordBatch, c *column) arrow.Array {
	if c.problem != "" {
		return nil
	}
	return rec.Column(rec.Schema().FieldIndices(c.name)[0])
}

// rowDoc builds the Doc of row i of the current batch.
func (s *parquetSource) rowDoc(i int, d Doc) (Doc, error) {
	if s.opts.Raw != nil {
		return s.rawDoc(i, d)
	}
	if s.id == nil {
		id, err := s.opts.fallbackID(d)
		if err != nil {
			return Doc{}, err
		}
		d.ID = id
	} else if id, err := s.idAt(i, d); err != nil {
		return Doc{}, err
	} else {
		d.ID = id
	}
	return s.opts.columnsDoc(d, s.text, s.unembedded, i)
}

func (s *parquetSource) idAt(i int, d Doc) (string, error) {
	c := s.id
	if c.problem != "" {
		return "", d.Error(c.problem, c.detail)
	}
	if c.arr.IsNull(i) {
		return "", d.Error(ReasonBadID, fmt.Sprintf("ID column %q is null", c.name))
	}
	if arrow.IsInteger(c.arr.DataType().ID()) {
		return c.arr.ValueStr(i), nil
	}
	v, _ := textAt(c.arr, i)
	if !utf8.ValidString(v) {
		return "", d.Error(ReasonBadID, fmt.Sprintf("ID column %q: invalid UTF-8 at byte %d", c.name, invalidAt([]byte(v))))
	}
	return checkID(d, c.name, strings.Clone(v))
}

// textAt returns value i of a string-like array without copying it, and
// false when it is null.
func textAt(arr arrow.Array, i int) (string, bool) {
	if arr.IsNull(i) {
		return "", false
	}
	switch a := arr.(type) {
	case *array.String:
		return a.Value(i), true
	case *array.LargeString:
		return a.Value(i), true
	case *array.StringView:
		return a.Value(i), true
	case *array.Binary:
		return a.ValueString(i), true
	case *array.LargeBinary:
		return a.ValueString(i), true
	case *array.BinaryView:
		return a.ValueString(i), true
	case *array.Dictionary:
		return textAt(a.Dictionary(), a.GetValueIndex(i))
	}
	panic(fmt.Sprintf("textAt on %s", arr.DataType()))
}

// countFile returns the row count of a Parquet file or the size of any other.
func countFile(name string) (rows, size int64, isPQ bool, err error) {
	f, size, err := files.OpenRandom(context.Background(), name)
	if err != nil {
		return 0, 0, false, err
	}
	defer f.Close()
	if !hasParquetMagic(f) {
		return 0, size, false, nil
	}
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return 0, 0, true, fmt.Errorf("parquet: %w", err)
	}
	rows = pf.NumRows()
	return rows, 0, true, pf.Close()
}

// hasParquetMagic reports whether f starts with "PAR1", by one ranged read.
func hasParquetMagic(f io.ReaderAt) bool {
	var magic [4]byte
	n, _ := f.ReadAt(magic[:], 0)
	return n == 4 && string(magic[:]) == "PAR1"
}

// columnsDoc builds d from row i of the text columns of a columnar batch
// (Parquet's, Arrow's): each column's value, refused when the column is
// missing, null or not UTF-8, joined and copied out of the batch; the
// unembedded fields are recorded.
func (o *ReadOptions) columnsDoc(d Doc, text []column, unembedded []string, i int) (Doc, error) {
	parts := make([]string, len(text))
	for k := range text {
		c := &text[k]
		if c.problem != "" {
			return Doc{}, d.Error(c.problem, c.detail)
		}
		v, valid := textAt(c.arr, i)
		if !valid {
			return Doc{}, d.Error(ReasonNullText, fmt.Sprintf("column %q is null", c.name))
		}
		if !utf8.ValidString(v) {
			return Doc{}, d.Error(ReasonInvalidUTF8, fmt.Sprintf("column %q: invalid UTF-8 at byte %d", c.name, invalidAt([]byte(v))))
		}
		parts[k] = v
	}
	for _, f := range unembedded {
		o.unembedded(d, f)
	}
	return o.document(d, parts) // copies the values out of the batch
}
