package corpus

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// QueryOptions configure reading query–candidate lists for reranking from
// JSONL or Parquet rows of two shapes, told apart row by row:
//
//   - grouped: one row per query, {query_id, query, candidates: [{id, text,
//     title?, score?}, …]} (a list<struct> column in Parquet);
//   - flat pairs: one row per pair, {query_id, query, doc_id, text,
//     title?, score?}; consecutive rows of one file with the same query id
//     form one list.
type QueryOptions struct {
	QueryIDField    string   // default "query_id"
	QueryField      string   // default "query"
	CandidatesField string   // default "candidates"
	DocIDField      string   // default "id" in a candidate, "doc_id" in a flat row
	DocTextFields   []string // joined with "\n"; default: "title" if present, then "text"
	ScoreField      string   // default "score"; optional in every row
	// Read holds the reader's settings (Stdin, Context, StartIndex, line
	// limits, Shard and Shards, which select whole queries).
	Read ReadOptions
}

func (o *QueryOptions) fill() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.QueryIDField, "query_id")
	def(&o.QueryField, "query")
	def(&o.CandidatesField, "candidates")
	def(&o.ScoreField, "score")
}

// QueryReader yields the queries of a list of files in order; see
// QueryOptions. A query's Index is its first row's; packing groups start at
// every file and after GroupRecords queries. A bad row inside a list of flat
// pairs fails in that list (its candidate is an error); one before any list
// is an error record of its own.
type QueryReader struct {
	r        *Reader
	opts     QueryOptions
	cur      *Query // a flat list being gathered
	next     []any  // records ready: Query, *RowError or *FileError
	done     bool
	group    int64 // Index of the first record of the current packing group
	inGroup  int
	source   string
	rowGroup int64 // the reader's group of the last grouped row
	fatal    error // the run cannot go on (ErrShardFlatPairs)
	// ids holds the query ids so far: a later query with one of them is
	// a duplicate_id. The records before start (a resumed run's) are read
	// for their ids and not returned.
	ids   *IDSet
	start int64
}

// OpenQueries returns a QueryReader over files.
func OpenQueries(files []string, opts QueryOptions) (*QueryReader, error) {
	opts.fill()
	ro := opts.Read
	start := ro.StartIndex
	ro.StartIndex = 0
	ro.Raw = []string{opts.QueryIDField, opts.QueryField, opts.CandidatesField, opts.ScoreField, "title", "text", "id", "doc_id"}
	if opts.DocIDField != "" {
		ro.Raw = append(ro.Raw, opts.DocIDField)
	}
	ro.Raw = append(ro.Raw, opts.DocTextFields...)
	r, err := Open(files, ro)
	if err != nil {
		return nil, err
	}
	return &QueryReader{r: r, opts: opts, group: -1, ids: NewIDSet(), start: start}, nil
}

// Progress returns how far the reader has got.
func (q *QueryReader) Progress() Progress { return q.r.Progress() }

// Spans returns what the reader read of each file (see Reader.Spans).
func (q *QueryReader) Spans() []Span { return q.r.Spans() }

// ErrShardFlatPairs: flat pairs cannot be range-sharded, since a query's
// rows may straddle the shards' parts.
var ErrShardFlatPairs = errors.New("a sharded rerank needs one row per query (grouped candidates) or --run; flat pairs can straddle shards")

// Close closes the file being read.
func (q *QueryReader) Close() error { return q.r.Close() }

// Next returns the next query, a *RowError, a *FileError or io.EOF. A
// query whose id an earlier query has is returned with Err duplicate_id
// (its candidates are not scored), and a candidate whose document id is
// an earlier candidate's of the same query is a duplicate_id error.
func (q *QueryReader) Next() (Query, error) {
	for {
		for len(q.next) > 0 {
			rec := q.next[0]
			q.next = q.next[1:]
			out, err, _ := q.emit(rec)
			if err == nil {
				q.checkIDs(&out)
			}
			if recordIndex(out.Doc, err) < q.start {
				continue // done by the run being resumed; read for its id
			}
			return out, err
		}
		if q.fatal != nil {
			return Query{}, q.fatal
		}
		if q.done {
			return Query{}, io.EOF
		}
		q.step()
	}
}

// checkIDs marks a query whose id an earlier one has, and candidates
// repeated in its list.
func (q *QueryReader) checkIDs(out *Query) {
	if out.Err == nil {
		if first, dup := q.ids.Add(out.ID, out.Index); dup {
			out.Err = duplicateError(out.Doc, first)
			out.Err.Detail = fmt.Sprintf("query %s", out.Err.Detail)
		}
	}
	markDuplicateCandidates(out)
}

// markDuplicateCandidates makes a candidate whose document id an earlier
// candidate of q has a duplicate_id error: a query scores a document once.
func markDuplicateCandidates(q *Query) {
	seen := make(map[string]int, len(q.Cands))
	for k := range q.Cands {
		c := &q.Cands[k]
		if c.Err != nil {
			continue
		}
		if first, ok := seen[c.ID]; ok {
			c.Err = q.CandidateError(k, ReasonDuplicateID, fmt.Sprintf("document %q is candidate %d of this query already", c.ID, first))
			continue
		}
		seen[c.ID] = k
	}
}

// emit places a ready record in its packing group: a grouped row keeps
// the reader's group (which starts at every shard unit), a flat list and a
// bad row between lists get one counted here.
func (q *QueryReader) emit(rec any) (Query, error, bool) {
	switch r := rec.(type) {
	case *FileError:
		return Query{}, r, true
	case *RowError:
		r.Group = q.place(r.Index, r.Source, -1)
		return Query{}, r, true
	case flatQuery:
		r.Group = q.place(r.Index, r.Source, -1)
		return r.Query, nil, true
	case Query:
		r.Group = q.place(r.Index, r.Source, r.Group)
		return r, nil, true
	}
	panic("unexpected record")
}

// place counts a record into packing groups: a new one at each file, at
// each of the reader's groups (rowGroup, -1 for none) and after
// GroupRecords records.
func (q *QueryReader) place(idx int64, source string, rowGroup int64) int64 {
	if q.group < 0 || source != q.source || q.inGroup == GroupRecords || (rowGroup >= 0 && rowGroup != q.rowGroup) {
		q.group, q.inGroup, q.source = idx, 0, source
	}
	q.rowGroup = rowGroup
	q.inGroup++
	return q.group
}

// flatQuery is a list gathered from flat pairs.
type flatQuery struct{ Query }

// step reads one row and files it.
func (q *QueryReader) step() {
	d, err := q.r.Next()
	var re *RowError
	var fe *FileError
	switch {
	case errors.Is(err, io.EOF):
		q.flush()
		q.done = true
	case errors.As(err, &fe):
		q.flush()
		q.next = append(q.next, fe)
	case errors.As(err, &re):
		if q.cur != nil && q.cur.Source == re.Source {
			k := len(q.cur.Cands)
			q.cur.Cands = append(q.cur.Cands, Candidate{Source: re.Source, Line: re.Line, Row: re.Row, Index: re.Index})
			q.cur.Cands[k].Err = q.cur.CandidateError(k, re.Reason, re.Detail)
			return
		}
		q.flush()
		q.next = append(q.next, re)
	case err != nil:
		q.flush()
		q.next = append(q.next, &FileError{Source: "", RowGroup: -1, Err: err})
	case d.Fields[q.opts.CandidatesField] != nil:
		q.flush()
		q.next = append(q.next, q.grouped(d))
	default:
		q.flat(d)
	}
}

func (q *QueryReader) flush() {
	if q.cur != nil {
		q.next = append(q.next, flatQuery{*q.cur})
		q.cur = nil
	}
}

// query reads the query id and text of a row into a Query.
func (q *QueryReader) query(d Doc) Query {
	qr := Query{Doc: Doc{Source: d.Source, Line: d.Line, Row: d.Row, Index: d.Index}}
	raw, ok := d.Fields[q.opts.QueryIDField]
	if !ok || string(raw) == "null" {
		qr.Err = d.Error(ReasonMissingField, fmt.Sprintf("no query id field %q", q.opts.QueryIDField))
		return qr
	}
	id, err := idValue(d, q.opts.QueryIDField, raw)
	if err == nil && id == "" {
		err = d.Error(ReasonBadID, fmt.Sprintf("query id field %q is empty", q.opts.QueryIDField))
	}
	if err != nil {
		qr.Err = err.(*RowError)
		return qr
	}
	qr.ID = id
	qr.Text, qr.Err = requiredText(qr.Doc, d.Fields, q.opts.QueryField)
	if qr.Err != nil {
		qr.Err.ID = id
	}
	return qr
}

// requiredText is field f's non-blank text, or why there is none.
func requiredText(d Doc, fields map[string]json.RawMessage, f string) (string, *RowError) {
	raw, ok := fields[f]
	if !ok {
		return "", d.Error(ReasonMissingField, fmt.Sprintf("no field %q", f))
	}
	v, err := TextValue(d, f, raw)
	if err != nil {
		return "", err.(*RowError)
	}
	if strings.TrimSpace(v) == "" {
		return "", d.Error(ReasonEmptyText, fmt.Sprintf("field %q is empty or whitespace only", f))
	}
	return v, nil
}

// grouped turns a row holding a candidate list into its Query.
func (q *QueryReader) grouped(d Doc) Query {
	qr := q.query(d)
	var list []json.RawMessage
	if err := json.Unmarshal(d.Fields[q.opts.CandidatesField], &list); err != nil {
		qr.Err = d.Error(ReasonMalformedJSON, fmt.Sprintf("field %q is not a list of objects: %v", q.opts.CandidatesField, err))
		qr.Err.ID = qr.ID
		return qr
	}
	idField := q.opts.DocIDField
	if idField == "" {
		idField = "id"
	}
	for k, raw := range list {
		qr.Cands = append(qr.Cands, Candidate{Source: d.Source, Line: d.Line, Row: d.Row, Index: d.Index})
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			qr.Cands[k].Err = qr.CandidateError(k, ReasonMalformedJSON, fmt.Sprintf("candidate %d is not an object", k))
			continue
		}
		q.candidate(&qr, k, obj, idField)
	}
	return qr
}

// flat adds a flat pair's row to the list it continues, or starts a list.
func (q *QueryReader) flat(d Doc) {
	if q.opts.Read.Shards > 0 {
		q.fatal = fmt.Errorf("%w (%s:%d)", ErrShardFlatPairs, d.Source, d.Line)
		return
	}
	head := q.query(d)
	if q.cur == nil || q.cur.Source != d.Source || head.ID == "" || q.cur.ID != head.ID {
		q.flush()
		q.cur = &head
	}
	k := len(q.cur.Cands)
	q.cur.Cands = append(q.cur.Cands, Candidate{Source: d.Source, Line: d.Line, Row: d.Row, Index: d.Index})
	switch {
	case head.Err != nil && q.cur != &head:
		// A later row of the list whose own query fields are bad.
		q.cur.Cands[k].Err = q.cur.CandidateError(k, head.Err.Reason, head.Err.Detail)
	default:
		idField := q.opts.DocIDField
		if idField == "" {
			idField = "doc_id"
		}
		q.candidate(q.cur, k, d.Fields, idField)
	}
}

// candidate fills candidate k of qr from its JSON fields.
func (q *QueryReader) candidate(qr *Query, k int, obj map[string]json.RawMessage, idField string) {
	c := &qr.Cands[k]
	at := Doc{Source: c.Source, Line: c.Line, Row: c.Row, Index: c.Index, ID: qr.ID}
	fail := func(e *RowError) { c.Err = qr.CandidateError(k, e.Reason, e.Detail) }
	raw, ok := obj[idField]
	if !ok || string(raw) == "null" {
		fail(at.Error(ReasonMissingField, fmt.Sprintf("no document id field %q", idField)))
		return
	}
	id, err := idValue(at, idField, raw)
	if err == nil && id == "" {
		err = at.Error(ReasonBadID, fmt.Sprintf("document id field %q is empty", idField))
	}
	if err != nil {
		fail(err.(*RowError))
		return
	}
	c.ID = id
	if s, ok := obj[q.opts.ScoreField]; ok && string(s) != "null" {
		f, err := strconv.ParseFloat(string(s), 32)
		if err != nil {
			fail(at.Error(ReasonBadScore, fmt.Sprintf("field %q is %s, not a number", q.opts.ScoreField, s)))
			return
		}
		score := float32(f)
		c.Score = &score
	}
	text, rerr := q.docText(at, obj)
	if rerr != nil {
		fail(rerr)
		return
	}
	c.Text = text
}

// docText joins a candidate's text fields: the given ones, each required,
// or title (when present and not null) and text.
func (q *QueryReader) docText(d Doc, obj map[string]json.RawMessage) (string, *RowError) {
	fields := q.opts.DocTextFields
	if fields == nil {
		fields = []string{"text"}
		if t, ok := obj["title"]; ok && string(t) != "null" {
			fields = []string{"title", "text"}
		}
	}
	var parts []string
	for _, f := range fields {
		raw, ok := obj[f]
		if !ok {
			return "", d.Error(ReasonMissingField, fmt.Sprintf("no field %q", f))
		}
		v, err := TextValue(d, f, raw)
		if err != nil {
			return "", err.(*RowError)
		}
		if v != "" {
			parts = append(parts, v)
		}
	}
	text := strings.Join(parts, "\n")
	if strings.TrimSpace(text) == "" {
		return "", d.Error(ReasonEmptyText, "the document's text is empty or whitespace only")
	}
	return text, nil
}
