package corpus

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

	// pos is the offset of the next line (uncompressed files); lines that
	// start at end or later are another shard's (end 0: no end). block is
	// the file's BlockSize (0 for compressed files and pipes): a packing
	// group starts in every block.
	pos, end, block int64
	group           int64 // Index of the first record of the current packing group
	groupBlock      int64
	inGroup         int
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

// newJSONL reads a JSON Lines stream. size is the file's size (-1 for a
// pipe) and part what of it to read: a plain file is read from part.Start
// (already seeked to, less one byte when Start > 0) to the end of the last
// line that starts before part.End.
func newJSONL(name string, rc io.ReadCloser, base int64, opts *ReadOptions, size int64, part Part) (source, error) {
	cr := &countingReader{r: rc}
	s := &jsonlSource{name: name, c: rc, raw: cr, br: bufio.NewReaderSize(cr, jsonlBufSize), opts: opts, base: base, groupBlock: -1}
	if magic, _ := s.br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(s.br)
		if err != nil {
			rc.Close()
			return nil, &FileError{Source: name, RowGroup: -1, Err: fmt.Errorf("gzip: %w", err)}
		}
		s.br = bufio.NewReaderSize(gz, jsonlBufSize)
		return s, nil
	}
	if size >= 0 {
		s.block, s.end = BlockSize(size), part.End
	}
	if part.Start > 0 {
		if err := s.skipPartialLine(part.Start); err != nil {
			rc.Close()
			return nil, &FileError{Source: name, RowGroup: -1, Err: err}
		}
	}
	return s, nil
}

// skipPartialLine positions the source at the first line that starts at
// start or later: the byte before start is read; unless it ends a line,
// the rest of that line belongs to the previous shard.
func (s *jsonlSource) skipPartialLine(start int64) error {
	s.pos = start - 1
	c, err := s.br.ReadByte()
	if err != nil {
		return fmt.Errorf("read at byte %d: %w", s.pos, err)
	}
	s.pos++
	for c != '\n' {
		frag, err := s.br.ReadSlice('\n')
		s.pos += int64(len(frag))
		if err == bufio.ErrBufferFull {
			if cerr := s.opts.Context.Err(); cerr != nil {
				return cerr
			}
			continue
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		break
	}
	return nil
}

// place returns the packing group of the record starting at lineStart with
// index idx: a group starts in every block and after GroupRecords records.
func (s *jsonlSource) place(idx, lineStart int64) int64 {
	blk := int64(0)
	if s.block > 0 {
		blk = lineStart / s.block
	}
	if blk != s.groupBlock || s.inGroup == GroupRecords {
		s.group, s.groupBlock, s.inGroup = idx, blk, 0
	}
	s.inGroup++
	return s.group
}

func (s *jsonlSource) span() int64 { return s.recs }

func (s *jsonlSource) lines() int64 { return int64(s.line) }

func (s *jsonlSource) fetched() int64 { return s.raw.n }

func (s *jsonlSource) progress() (records, rows, bytes int64) { return s.recs, 0, s.raw.n }

func (s *jsonlSource) close() error { return s.c.Close() }

func (s *jsonlSource) next() (Doc, error) {
	for {
		if err := s.opts.Context.Err(); err != nil { // endless blank lines
			return Doc{}, err
		}
		if s.end > 0 && s.pos >= s.end {
			return Doc{}, io.EOF // the next line is the next shard's
		}
		lineStart := s.pos
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
		idx := s.base + s.recs
		group := s.place(idx, lineStart)
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
		s.pos += int64(len(frag))
		if !tooLong {
			if len(s.buf)+len(frag) > s.opts.MaxLineBytes+2 { // room for "\r\n"
				tooLong, s.buf = true, s.buf[:0]
			} else {
				s.buf = append(s.buf, frag...)
			}
		}
		if err == bufio.ErrBufferFull {
			// An endless line (/dev/zero) is read, and dropped, until
			// the run is cancelled: check between buffers.
			if cerr := s.opts.Context.Err(); cerr != nil {
				return nil, false, cerr
			}
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
	if s.line == 1 && s.pos == int64(len(s.buf)) { // the file's first line
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
	for _, f := range s.opts.Unembedded {
		if raw := obj[f]; len(raw) > 2 && raw[0] == '"' {
			s.opts.unembedded(d, f)
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

// id finds the document ID of a JSON object (the rule is in ids.go).
func (s *jsonlSource) id(d Doc, obj map[string]json.RawMessage) (string, error) {
	if f := s.opts.IDField; f != "" {
		raw, ok := obj[f]
		if !ok {
			return "", d.Error(ReasonMissingField, fmt.Sprintf("no ID field %q", f))
		}
		return docID(d, f, raw)
	}
	for _, f := range []string{"id", "_id"} {
		if raw, ok := obj[f]; ok {
			return docID(d, f, raw)
		}
	}
	return s.opts.fallbackID(d)
}

// docID is a document's ID in field's JSON value: not null, not empty, not
// of the form #N.
func docID(d Doc, field string, raw json.RawMessage) (string, error) {
	id, err := idValue(d, field, raw)
	if err != nil {
		return "", err
	}
	return checkID(d, field, id)
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
	case string(raw) == "null":
		return "", d.Error(ReasonBadID, fmt.Sprintf("ID field %q is null", field))
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
