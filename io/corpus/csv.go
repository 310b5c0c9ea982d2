package corpus

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// csvSource reads one CSV or TSV file, gzip-compressed or not: a header
// row names the columns, every later record is a row. Quoting is RFC 4180
// (encoding/csv): a quoted field may hold the delimiter, "" and newlines.
// A TSV file is read with the same quoting, tabs for commas.
//
// A CSV file is never split by byte range: a newline inside a quoted field
// makes a byte offset ambiguous, so a range shard takes the file whole
// (PlanShard: KindCSV).
type csvSource struct {
	name string
	c    io.Closer
	raw  *countingReader
	r    *csv.Reader
	lim  *recordLimit
	opts *ReadOptions
	base int64
	recs int64 // records (rows after the header) read so far
	line int   // the last line read

	header     []string
	col        map[string]int
	text       []int // column of each TextField; -1 when the file has none
	id         int   // the id column; -1: none (idName says which is missing)
	idName     string
	unembedded []int // columns of the Unembedded fields the file has
	uNames     []string

	group   int64
	inGroup int
}

// newCSV reads a CSV (comma) or TSV (tab) stream and its header row.
func newCSV(name string, rc io.ReadCloser, base int64, opts *ReadOptions, tsv bool) (source, error) {
	cr := &countingReader{r: rc}
	s := &csvSource{name: name, c: rc, raw: cr, opts: opts, base: base, group: -1}
	fail := func(err error) (source, error) {
		rc.Close()
		return nil, &FileError{Source: name, RowGroup: -1, Line: s.line, Err: err}
	}
	r, lim, err := csvReader(cr, tsv, int64(opts.MaxLineBytes))
	if err != nil {
		return fail(err)
	}
	s.r, s.lim = r, lim
	header, err := r.Read()
	if err == io.EOF {
		return s, nil // an empty file: no rows
	}
	if err != nil {
		return fail(fmt.Errorf("header row: %w", err))
	}
	s.line, _ = r.FieldPos(0)
	if err := s.resolve(header); err != nil {
		return fail(err)
	}
	return s, nil
}

// csvReader is the encoding/csv reader of a stream: gunzipped when it
// starts with the gzip magic, without a UTF-8 byte order mark, and with a
// limit on one record's bytes (see recordLimit).
func csvReader(r io.Reader, tsv bool, maxRecord int64) (*csv.Reader, *recordLimit, error) {
	lim := &recordLimit{r: r, max: maxRecord}
	br := bufio.NewReaderSize(lim, jsonlBufSize)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		lim = &recordLimit{r: gz, max: maxRecord}
		br = bufio.NewReaderSize(lim, jsonlBufSize)
	}
	if bom, _ := br.Peek(3); string(bom) == "\xef\xbb\xbf" {
		br.Discard(3)
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1 // checked against the header, as a row error
	if tsv {
		// The same strict quoting as CSV: with lazy quotes, a field that
		// starts with a quote but is not quoted ("Hi" she said) would run
		// on to the next closing quote, rows later, without an error.
		cr.Comma = '\t'
	}
	return cr, lim, nil
}

// recordLimit bounds the bytes encoding/csv reads for one record (which
// it would otherwise hold whole: an unterminated quote takes the rest of
// the file): more than max (and the read buffer) since begin is an error,
// as a JSON Lines line longer than ReadOptions.MaxLineBytes is.
type recordLimit struct {
	r          io.Reader
	n, start   int64
	max        int64
	line, from int // for the message: the line the record starts on
}

func (l *recordLimit) begin(line int) { l.start, l.from = l.n, line }

func (l *recordLimit) Read(p []byte) (int, error) {
	if l.max > 0 && l.n-l.start > l.max+jsonlBufSize {
		return 0, fmt.Errorf("the record from line %d is longer than %d bytes (an unterminated quote?): the rest of the file is not read", l.from, l.max)
	}
	k, err := l.r.Read(p)
	l.n += int64(k)
	return k, err
}

// resolve names the columns of the header and finds the fields the run uses.
func (s *csvSource) resolve(header []string) error {
	s.header = append([]string(nil), header...)
	s.col = make(map[string]int, len(header))
	for i, h := range header {
		if !utf8.ValidString(h) {
			return fmt.Errorf("header row: column %d: invalid UTF-8", i+1)
		}
		if _, dup := s.col[h]; dup {
			return fmt.Errorf("header row: column %q twice", h)
		}
		s.col[h] = i
	}
	find := func(f string) int {
		if i, ok := s.col[f]; ok {
			return i
		}
		return -1
	}
	for _, f := range s.opts.TextFields {
		s.text = append(s.text, find(f))
	}
	for _, f := range s.opts.Unembedded {
		if i := find(f); i >= 0 {
			s.unembedded, s.uNames = append(s.unembedded, i), append(s.uNames, f)
		}
	}
	s.id, s.idName = -1, s.opts.IDField
	if s.idName != "" {
		s.id = find(s.idName)
		return nil
	}
	for _, f := range []string{"id", "_id"} {
		if i := find(f); i >= 0 {
			s.id, s.idName = i, f
			break
		}
	}
	return nil
}

func (s *csvSource) span() int64 { return s.recs }

func (s *csvSource) lines() int64 { return int64(s.line) }

func (s *csvSource) fetched() int64 { return s.raw.n }

func (s *csvSource) progress() (records, rows, bytes int64) { return s.recs, 0, s.raw.n }

func (s *csvSource) close() error { return s.c.Close() }

func (s *csvSource) next() (Doc, error) {
	if s.header == nil {
		return Doc{}, io.EOF
	}
	for {
		if err := s.opts.Context.Err(); err != nil {
			return Doc{}, err
		}
		s.lim.begin(s.line + 1)
		rec, err := s.r.Read()
		if err == io.EOF {
			return Doc{}, io.EOF
		}
		var pe *csv.ParseError
		if err != nil && !errors.As(err, &pe) {
			return Doc{}, &FileError{Source: s.name, RowGroup: -1, Line: s.line + 1, Err: err}
		}
		idx := s.base + s.recs
		s.recs++
		if s.inGroup == GroupRecords || s.group < 0 {
			s.group, s.inGroup = idx, 0
		}
		s.inGroup++
		d := Doc{Source: s.name, Index: idx, Group: s.group}
		if pe != nil {
			d.Line, s.line = pe.StartLine, pe.Line
		} else {
			d.Line, _ = s.r.FieldPos(0)
			last, _ := s.r.FieldPos(len(rec) - 1)
			s.line = last + strings.Count(rec[len(rec)-1], "\n") // a quoted last field may span lines
		}
		if !s.opts.want(idx) {
			continue
		}
		if pe != nil {
			return Doc{}, d.Error(ReasonMalformedCSV, fmt.Sprintf("line %d, column %d: %v", pe.Line, pe.Column, pe.Err))
		}
		if len(rec) != len(s.header) {
			return Doc{}, d.Error(ReasonMalformedCSV, fmt.Sprintf("row has %d fields; the header has %d", len(rec), len(s.header)))
		}
		return s.parse(d, rec)
	}
}

// parse makes the Doc of one record.
func (s *csvSource) parse(d Doc, rec []string) (Doc, error) {
	if s.opts.Raw != nil {
		return s.rawFields(d, rec)
	}
	id, err := s.docID(d, rec)
	if err != nil {
		return Doc{}, err
	}
	d.ID = id
	parts := make([]string, len(s.text))
	for i, c := range s.text {
		f := s.opts.TextFields[i]
		if c < 0 {
			return Doc{}, d.Error(ReasonMissingField, fmt.Sprintf("no column %q", f))
		}
		if v := rec[c]; !utf8.ValidString(v) {
			return Doc{}, d.Error(ReasonInvalidUTF8, fmt.Sprintf("field %q: invalid UTF-8 at byte %d of the value", f, invalidAt([]byte(v))))
		}
		parts[i] = rec[c]
	}
	for k, c := range s.unembedded {
		if rec[c] != "" {
			s.opts.unembedded(d, s.uNames[k])
		}
	}
	return s.opts.document(d, parts)
}

// docID is the record's id (the rule: ids.go); CSV has no null, so an
// empty field is an empty id (bad_id).
func (s *csvSource) docID(d Doc, rec []string) (string, error) {
	if s.id < 0 && s.opts.IDField != "" {
		return "", d.Error(ReasonMissingField, fmt.Sprintf("no ID column %q", s.opts.IDField))
	}
	if s.id < 0 {
		return s.opts.fallbackID(d)
	}
	v := rec[s.id]
	if !utf8.ValidString(v) {
		return "", d.Error(ReasonBadID, fmt.Sprintf("ID field %q: invalid UTF-8 at byte %d", s.idName, invalidAt([]byte(v))))
	}
	return checkID(d, s.idName, v)
}

// rawFields returns every column of the record as a JSON string.
func (s *csvSource) rawFields(d Doc, rec []string) (Doc, error) {
	d.Fields = make(map[string]json.RawMessage, len(rec))
	for i, v := range rec {
		if !utf8.ValidString(v) {
			return Doc{}, d.Error(ReasonInvalidUTF8, fmt.Sprintf("field %q: invalid UTF-8 at byte %d of the value", s.header[i], invalidAt([]byte(v))))
		}
		b, err := json.Marshal(v)
		if err != nil {
			return Doc{}, d.Error(ReasonMalformedCSV, err.Error())
		}
		d.Fields[s.header[i]] = b
	}
	return d, nil
}
