package dataio

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonlSource reads one JSON Lines file, gzip-compressed or not.
type jsonlSource struct {
	name string
	c    io.Closer
	raw  *countingReader
	br   *bufio.Reader
	opts *ReadOptions
	base int64
	line int   // lines read so far
	recs int64 // records (non-blank lines) read so far
	buf  []byte
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

const jsonlBufSize = 64 << 10

func newJSONL(name string, rc io.ReadCloser, base int64, opts *ReadOptions) (source, error) {
	cr := &countingReader{r: rc}
	s := &jsonlSource{name: name, c: rc, raw: cr, br: bufio.NewReaderSize(cr, jsonlBufSize), opts: opts, base: base}
	if magic, _ := s.br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(s.br)
		if err != nil {
			rc.Close()
			return nil, &FileError{Source: name, RowGroup: -1, Err: fmt.Errorf("gzip: %w", err)}
		}
		s.br = bufio.NewReaderSize(gz, jsonlBufSize)
	}
	return s, nil
}

func (s *jsonlSource) span() int64 { return s.recs }

func (s *jsonlSource) progress() (records, rows, bytes int64) { return s.recs, 0, s.raw.n }

func (s *jsonlSource) close() error { return s.c.Close() }

func (s *jsonlSource) next() (Doc, error) {
	for {
		line, tooLong, err := s.readLine()
		if err == io.EOF {
			return Doc{}, io.EOF
		}
		if err != nil {
			return Doc{}, &FileError{Source: s.name, RowGroup: -1, Line: s.line + 1, Err: err}
		}
		if !tooLong && len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		idx, group := s.base+s.recs, s.base+s.recs-s.recs%GroupRecords
		s.recs++
		if !s.opts.want(idx) {
			continue
		}
		d := Doc{Source: s.name, Line: s.line, Index: idx, Group: group}
		if tooLong {
			return Doc{}, d.Error(ReasonLineTooLong, fmt.Sprintf("line longer than %d bytes", s.opts.MaxLineBytes))
		}
		return s.parse(d, line)
	}
}

// readLine returns the next line without its line ending, whether it was
// longer than MaxLineBytes (then its content is dropped), or io.EOF after
// the last line. A last line without "\n" is a line.
func (s *jsonlSource) readLine() (line []byte, tooLong bool, err error) {
	if cap(s.buf) > 8<<20 {
		s.buf = nil // do not keep a huge line's buffer for the rest of the file
	}
	s.buf = s.buf[:0]
	got := false
	for {
		frag, err := s.br.ReadSlice('\n')
		got = got || len(frag) > 0
		if !tooLong {
			if len(s.buf)+len(frag) > s.opts.MaxLineBytes+2 { // room for "\r\n"
				tooLong, s.buf = true, s.buf[:0]
			} else {
				s.buf = append(s.buf, frag...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && got {
			break
		}
		if err != nil {
			return nil, false, err
		}
		break
	}
	s.line++
	line = bytes.TrimSuffix(bytes.TrimSuffix(s.buf, []byte("\n")), []byte("\r"))
	if s.line == 1 {
		line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")) // UTF-8 byte order mark
	}
	return line, tooLong, nil
}

// parse decodes one non-blank line into d.
func (s *jsonlSource) parse(d Doc, line []byte) (Doc, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil || obj == nil {
		if t := bytes.TrimSpace(line); json.Valid(t) {
			return Doc{}, d.Error(ReasonMalformedJSON, fmt.Sprintf("line is a JSON %s, not an object", jsonKind(t)))
		}
		return Doc{}, d.Error(ReasonMalformedJSON, jsonDetail(err))
	}
	if s.opts.Raw != nil {
		d.Fields = obj
		return d, nil
	}
	id, rerr := s.id(d, obj)
	if rerr != nil {
		return Doc{}, rerr
	}
	d.ID = id
	parts := make([]string, len(s.opts.TextFields))
	for i, f := range s.opts.TextFields {
		raw, ok := obj[f]
		if !ok {
			return Doc{}, d.Error(ReasonMissingField, fmt.Sprintf("no field %q", f))
		}
		var err error
		if parts[i], err = TextValue(d, f, raw); err != nil {
			return Doc{}, err
		}
	}
	return s.opts.document(d, parts)
}

// TextValue is the string in field f's JSON value raw of record d, or the
// RowError that says why it is not one: null_text, not_text, invalid_utf8
// (raw bytes, or an escaped UTF-16 surrogate without its pair, which
// encoding/json would turn into U+FFFD without a word), malformed_json.
func TextValue(d Doc, f string, raw json.RawMessage) (string, error) {
	switch {
	case len(raw) == 0 || raw[0] == 'n':
		return "", d.Error(ReasonNullText, fmt.Sprintf("field %q is null", f))
	case raw[0] != '"':
		return "", d.Error(ReasonNotText, fmt.Sprintf("field %q is a JSON %s, not a string", f, jsonKind(raw)))
	}
	if !utf8.Valid(raw) {
		return "", d.Error(ReasonInvalidUTF8, fmt.Sprintf("field %q: invalid UTF-8 at byte %d of the value", f, invalidAt(raw)))
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", d.Error(ReasonMalformedJSON, jsonDetail(err))
	}
	if strings.ContainsRune(v, utf8.RuneError) {
		if at := loneSurrogate(raw); at >= 0 {
			return "", d.Error(ReasonInvalidUTF8, fmt.Sprintf("field %q: unpaired UTF-16 surrogate escape %s at byte %d of the value",
				f, raw[at:at+6], at))
		}
	}
	return v, nil
}

// id finds the document ID of a JSON object.
func (s *jsonlSource) id(d Doc, obj map[string]json.RawMessage) (string, error) {
	if f := s.opts.IDField; f != "" {
		raw, ok := obj[f]
		if !ok || string(raw) == "null" {
			return "", d.Error(ReasonMissingField, fmt.Sprintf("no ID field %q", f))
		}
		return idValue(d, f, raw)
	}
	for _, f := range []string{"id", "_id"} {
		if raw, ok := obj[f]; ok && string(raw) != "null" {
			return idValue(d, f, raw)
		}
	}
	return indexID(d.Index), nil
}

// idValue is the ID in a string or number JSON value.
func idValue(d Doc, field string, raw json.RawMessage) (string, error) {
	switch {
	case raw[0] == '"':
		var id string
		if err := json.Unmarshal(raw, &id); err != nil {
			return "", d.Error(ReasonBadID, jsonDetail(err))
		}
		return id, nil
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		return string(raw), nil
	}
	return "", d.Error(ReasonBadID, fmt.Sprintf("ID field %q is a JSON %s", field, jsonKind(raw)))
}

// jsonKind names the kind of a JSON value.
func jsonKind(raw []byte) string {
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '"':
		return "string"
	}
	return "number"
}

func jsonDetail(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("json: byte %d: %v", se.Offset, err)
	}
	return "json: " + err.Error()
}

// loneSurrogate is the offset in a JSON string literal of the first \uXXXX
// escape of a UTF-16 surrogate that is not part of a high-low pair, or -1.
func loneSurrogate(lit []byte) int {
	escape := func(i int) (rune, bool) { // the \uXXXX escape at i, if any
		if i+6 > len(lit) || lit[i] != '\\' || lit[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(lit[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		r, ok := escape(i)
		switch {
		case !ok:
			i++ // another escape: skip the escaped byte (\\ in particular)
		case utf16.IsSurrogate(r):
			if lo, ok := escape(i + 6); r < 0xdc00 && ok && lo >= 0xdc00 && lo <= 0xdfff {
				i += 11
				continue
			}
			return i
		default:
			i += 5
		}
	}
	return -1
}

// invalidAt is the offset of the first byte of b that is not valid UTF-8.
func invalidAt(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}
