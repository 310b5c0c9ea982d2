// Package record holds the records a corpus reader yields — documents, bad
// rows, failed files — apart from the readers and writers, so that code that
// only passes records along does not depend on Arrow.
package record

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Reason codes of row-level errors; io/corpus's package documentation says when each is used.
const (
	ReasonMalformedJSON = "malformed_json"
	ReasonLineTooLong   = "line_too_long"
	ReasonTextTooLong   = "text_too_long"
	ReasonMissingField  = "missing_field"
	ReasonNullText      = "null_text"
	ReasonNotText       = "not_text"
	ReasonInvalidUTF8   = "invalid_utf8"
	ReasonEmptyText     = "empty_text"
	ReasonBadID         = "bad_id"
	ReasonDuplicateID   = "duplicate_id"      // an id an earlier record of the run has
	ReasonCorruptRows   = "corrupt_row_group" // a row of a Parquet row group that cannot be decoded
	ReasonMalformedCSV  = "malformed_csv"     // a CSV/TSV record that cannot be parsed or has another field count than the header
	// Rerank inputs.
	ReasonMalformedLine   = "malformed_line"   // a run file line that is not a TREC or TSV run line
	ReasonMissingDocument = "missing_document" // a run names a document the corpus does not hold
	ReasonMissingQuery    = "missing_query"    // a run names a query the queries file does not hold
	ReasonBadScore        = "bad_score"        // an input score that is not a number
	ReasonQueryTooLong    = "query_too_long"   // a query that alone does not fit the model's context
	// ReasonFileError marks a FileError in the errors file.
	ReasonFileError = "file_error"
)

// Doc is one document of the corpus.
type Doc struct {
	Source string // input file name as given ("-" for stdin)
	Line   int    // JSONL: 1-based line number; CSV/TSV: the record's first line; 0 for Parquet
	Row    int64  // Parquet: 0-based row within the file; 0 for JSONL
	Index  int64  // 0-based document index in the run, stable across runs
	// Group is the Index of the first record of the packing group this one
	// belongs to (see pipeline.Kind.Place): the reader starts a group at
	// each file and row group, and after DefaultMaxGroup records.
	Group     int64
	ID        string // document ID (see io/corpus's package documentation)
	Text      string // Prefix + the joined text fields
	PrefixLen int    // length in bytes of the prefix at the start of Text
	// Fields holds the row's fields as JSON values instead of ID and Text
	// when the reader was asked for raw rows (corpus.ReadOptions.Raw).
	Fields map[string]json.RawMessage
}

// Error returns a row-level error record for d.
func (d Doc) Error(reason, detail string) *RowError {
	return &RowError{Source: d.Source, Line: d.Line, Row: d.Row, Index: d.Index, Group: d.Group, ID: d.ID, Reason: reason, Detail: detail}
}

// ChunkError returns an error record for the failure of one chunk of d;
// workerLog is the tail of the worker's log, if any.
func (d Doc) ChunkError(chunk int, reason, detail, workerLog string) *RowError {
	e := d.Error(reason, detail)
	e.Chunk = &chunk
	e.WorkerLog = workerLog
	return e
}

// RowError is a record that could not be used, or a chunk of a document that
// could not be embedded. It is both an error and a line of the errors file.
type RowError struct {
	Source    string
	Line      int   // JSONL: 1-based line; 0 for Parquet
	Row       int64 // Parquet: 0-based row in the file (used when Line is 0)
	Index     int64 // document index in the run
	Group     int64 // the record's packing group (Doc.Group)
	ID        string
	Reason    string // a stable code: one of the Reason constants, or the pipeline's own
	Detail    string
	Chunk     *int   // set for a chunk-level failure: the 0-based chunk
	WorkerLog string // tail of the worker's log for an item-level failure
	// DocID and Candidate name a rerank candidate that failed: its id and
	// its 0-based position in its query's list.
	DocID     string
	Candidate *int
}

// Error implements error.
func (e *RowError) Error() string {
	where := e.Source + " row " + strconv.FormatInt(e.Row, 10)
	if e.Line > 0 {
		where = e.Source + ":" + strconv.Itoa(e.Line)
	}
	if e.Chunk != nil {
		where += " chunk " + strconv.Itoa(*e.Chunk)
	}
	if e.Candidate != nil {
		where += fmt.Sprintf(" candidate %d (%s)", *e.Candidate, e.DocID)
	}
	return fmt.Sprintf("%s: %s: %s", where, e.Reason, e.Detail)
}

// FileError is a failure of a whole input file, or of the rest of it from a
// row group (Parquet) or line (JSONL) on.
type FileError struct {
	Source   string
	RowGroup int   // Parquet row group that failed; -1 if none or unknown
	Line     int   // JSONL line being read when the file failed; 0 if none
	Index    int64 // the Index the next record would have had
	Err      error // the cause
}

func (e *FileError) Error() string {
	where := e.Source
	switch {
	case e.RowGroup >= 0:
		where += fmt.Sprintf(" (row group %d)", e.RowGroup)
	case e.Line > 0:
		where += fmt.Sprintf(" (line %d)", e.Line)
	}
	return fmt.Sprintf("%s: %v", where, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// Progress tells how far a Reader has got.
type Progress struct {
	File        int   // index of the file being read; len(files) at the end
	Records     int64 // records consumed so far, skipped ones included (= next Index)
	ParquetRows int64 // rows consumed from Parquet files
	JSONLBytes  int64 // bytes consumed from JSONL files (compressed size for gzip)
}

// Query is one query with the candidates to score against it (rerank). Its
// Doc is the query: the position of its (first) input row, ID the query id,
// Text the query.
type Query struct {
	Doc
	Cands []Candidate
	// Err is set when the query itself cannot be used (no or empty text,
	// a query a run names that the queries file lacks): none of its
	// candidates is scored, each goes to the errors file with this reason.
	Err *RowError
}

// Candidate is one document of a query's list.
type Candidate struct {
	ID    string
	Text  string   // the document's text fields joined with "\n"
	Score *float32 // the input's score, if it had one
	// Where the candidate came from: its own row (flat pairs, run lines) or
	// its query's row (grouped lists).
	Source string
	Line   int
	Row    int64
	Index  int64
	// Err is set when the candidate cannot be scored (missing from the
	// corpus, empty text, a bad row): it goes to the errors file.
	Err *RowError
}

// CandidateError is an error record for candidate k of q.
func (q *Query) CandidateError(k int, reason, detail string) *RowError {
	c := &q.Cands[k]
	e := &RowError{Source: c.Source, Line: c.Line, Row: c.Row, Index: c.Index, Group: q.Group, ID: q.ID,
		Reason: reason, Detail: detail, DocID: c.ID}
	e.Candidate = &k
	return e
}
