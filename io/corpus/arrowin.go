package corpus

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/synapse-embed/synapse/io/files"
)

// arrowSource reads one Arrow IPC file (the file format, with a footer:
// .arrow, .feather v2) a record batch at a time, with the column rules of
// Parquet (parquet.go): string or binary text columns, a string or integer
// id column. Its Row is the row in the file. A shard takes the file whole
// (KindArrow). Raw rows (rerank) are not read from Arrow files.
type arrowSource struct {
	name    string
	f       files.Input
	counter *countingFile
	r       *ipc.FileReader
	opts    *ReadOptions
	base    int64

	text       []column
	id         *column // nil: the ID is the Index (or a shard's error)
	unembedded []string

	batch          int // the next record batch
	recPos, recLen int
	row            int64 // file row of the next row
}

func newArrow(name string, f files.Input, base int64, opts *ReadOptions) (src source, err error) {
	fail := func(err error) (source, error) {
		f.Close()
		return nil, &FileError{Source: name, RowGroup: -1, Err: err}
	}
	defer func() {
		if p := recover(); p != nil {
			src, err = fail(fmt.Errorf("arrow: reading footer: panic: %v", p))
		}
	}()
	if opts.Raw != nil {
		return fail(fmt.Errorf("rows of an Arrow IPC file are read as documents only (embed, generate): give Parquet or JSON Lines"))
	}
	counter := &countingFile{Input: f}
	r, err := ipc.NewFileReader(counter, ipc.WithAllocator(opts.Allocator))
	if err != nil {
		return fail(fmt.Errorf("arrow: %w", err))
	}
	s := &arrowSource{name: name, f: f, counter: counter, r: r, opts: opts, base: base}
	s.resolve(r.Schema())
	return s, nil
}

// resolve finds the text and id columns in the schema (a missing one is a
// problem every row reports, as for Parquet): a column is read by its
// schema index.
func (s *arrowSource) resolve(sc *arrow.Schema) {
	s.text, s.id, s.unembedded = resolveColumns(sc, s.opts, func(_ string, field int) int { return field })
}

func (s *arrowSource) span() int64 { return s.row }

func (s *arrowSource) fetched() int64 { return s.counter.n.Load() }

func (s *arrowSource) progress() (records, rows, bytes int64) { return s.row, 0, s.counter.n.Load() }

func (s *arrowSource) close() error {
	s.r.Close()
	return s.f.Close()
}

func (s *arrowSource) next() (d Doc, err error) {
	defer func() {
		if p := recover(); p != nil {
			d, err = Doc{}, &FileError{Source: s.name, RowGroup: -1, Err: fmt.Errorf("arrow: record batch %d: panic while decoding: %v", s.batch-1, p)}
		}
	}()
	for {
		if s.recPos >= s.recLen {
			if s.batch >= s.r.NumRecords() {
				return Doc{}, io.EOF
			}
			if err := s.load(); err != nil {
				return Doc{}, &FileError{Source: s.name, RowGroup: -1, Err: err}
			}
			continue
		}
		i := s.recPos
		s.recPos++
		row := s.row
		s.row++
		idx := s.base + row
		if !s.opts.want(idx) {
			continue
		}
		d := Doc{Source: s.name, Row: row, Index: idx, Group: s.base + row/GroupRecords*GroupRecords}
		return s.rowDoc(i, d)
	}
}

// load makes the next record batch current.
func (s *arrowSource) load() error {
	rec, err := s.r.RecordBatch(s.batch) // owned by the reader until the next call
	if err != nil {
		return fmt.Errorf("arrow: record batch %d: %w", s.batch, err)
	}
	s.batch++
	s.recPos, s.recLen = 0, int(rec.NumRows())
	for k := range s.text {
		if s.text[k].leaf >= 0 {
			s.text[k].arr = rec.Column(s.text[k].leaf)
		}
	}
	if s.id != nil && s.id.leaf >= 0 {
		s.id.arr = rec.Column(s.id.leaf)
	}
	return nil
}

// rowDoc builds the Doc of row i of the current batch.
func (s *arrowSource) rowDoc(i int, d Doc) (Doc, error) {
	id, err := s.idAt(i, d)
	if err != nil {
		return Doc{}, err
	}
	d.ID = id
	return s.opts.columnsDoc(d, s.text, s.unembedded, i)
}

// idAt is row i's id (the rule: ids.go).
func (s *arrowSource) idAt(i int, d Doc) (string, error) {
	c := s.id
	switch {
	case c == nil:
		return s.opts.fallbackID(d)
	case c.problem != "":
		return "", d.Error(c.problem, c.detail)
	case c.arr.IsNull(i):
		return "", d.Error(ReasonBadID, fmt.Sprintf("ID column %q is null", c.name))
	case arrow.IsInteger(c.arr.DataType().ID()):
		return c.arr.ValueStr(i), nil
	}
	v, _ := textAt(c.arr, i)
	if !utf8.ValidString(v) {
		return "", d.Error(ReasonBadID, fmt.Sprintf("ID column %q: invalid UTF-8 at byte %d", c.name, invalidAt([]byte(v))))
	}
	return checkID(d, c.name, strings.Clone(v))
}
