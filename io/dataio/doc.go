// Package dataio streams corpus documents out of JSONL and Parquet files and
// writes the embeddings and error records of a `synapse embed` run.
//
// # Reading
//
// A [Reader] walks its input files in order and yields one record at a time
// from [Reader.Next]: a [Doc], or a [*RowError] for a record that cannot be
// embedded. Memory is bounded by one JSONL line (at most
// [ReadOptions.MaxLineBytes]) or one Parquet read batch of
// [ReadOptions.ParquetBatchRows] rows; Parquet files are read one row group at
// a time and never loaded whole.
//
// Every record — good or bad — takes the next document Index, counted from 0
// across all files of the run. For a Parquet file the Index is the running
// total of the rows of the files before it plus the row number in the file;
// for JSONL it counts the non-blank lines. Blank (whitespace-only) JSONL lines
// are not records: they carry no data and take no Index. The Index is
// therefore the same in every run over the same inputs, which is what resume
// ([ReadOptions.StartIndex]) and sharding ([ReadOptions.Shard]) rely on.
//
// A text is built from the [ReadOptions.TextFields] (default "text"): the
// non-empty values are joined with "\n" and [ReadOptions.Prefix] is put in
// front. The ID is the [ReadOptions.IDField]; when that is empty the reader
// takes the first of "id" and "_id" the row has, and a row with neither is
// named #INDEX; null, empty and #N ids are bad_id, and with
// [ReadOptions.UniqueIDs] a repeated id is duplicate_id (the rule: ids.go).
//
// Bad rows never stop the run and are never dropped silently. Reason codes
// (stable, used in the errors file):
//
//	malformed_json  the JSONL line is not a JSON object
//	line_too_long   the JSONL line is longer than ReadOptions.MaxLineBytes
//	text_too_long   the joined text is longer than ReadOptions.MaxTextBytes
//	                (token spans are 32-bit byte offsets)
//	missing_field   a text field (or an explicit ID field) is absent
//	null_text       a text field is null
//	not_text        a text field is not a string (e.g. an int64 Parquet column)
//	invalid_utf8    a text field is not valid UTF-8: the row is not embedded
//	                (no repair — a repaired text would silently differ from the
//	                input); the detail gives the byte offset
//	empty_text      the joined text is empty or whitespace only and
//	                ReadOptions.SkipEmpty is set
//	bad_id          the ID field is null, empty, of the reserved form #N, or
//	                neither a string nor a number
//	duplicate_id    (ReadOptions.UniqueIDs; rerank query and document ids)
//	                an id an earlier record of the run has
//	corrupt_row_group  a row of a Parquet row group that cannot be decoded;
//	                the detail names the group and its rows
//	file_error      (errors file only) a FileError: see below
//
// A file that cannot be read is a [*FileError] naming the file (and the row
// group, or line, when known); calling Next again goes on with the next file.
// A Parquet file without a valid footer (truncated, not Parquet) fails whole
// before any row; a row group that fails to decode makes each of its rows
// not yet returned a corrupt_row_group RowError, and the next row group is
// read as usual: the records of a Parquet file are always its footer's rows. A JSONL file that ends inside a line
// is fine: the last line is parsed like any other (malformed_json if cut in
// the middle); a .gz stream that is cut short is a FileError after the lines
// decoded so far. A FileError carries the Index the next record would have
// had; with ReadOptions.StartIndex, those below it are not reported again,
// so that a resumed run does not write them twice.
//
// # Writing
//
// A [Writer] writes one row per chunk (see [Schema]) as an Arrow IPC file or a
// Parquet file, and the error records as JSON Lines. Nothing appears at the
// output paths before [Writer.Commit]: the data is written beside them, to a
// temporary file created exclusively (OUT.tmp-synapse-PID-RANDOM: a link
// planted in a shared directory is never followed), and renamed after an
// fsync; [Writer.Abort] removes it. A run killed in between leaves it
// behind; the next [OpenCheckpointed] of that output removes it
// ([RemoveStaleTemps]). OUT.partial and ERRORS.partial are locked (flock)
// while a run writes them: a second run on either is refused ([ErrInUse]).
// Results are [Writer.Put] one document at a time in increasing Index (file
// failures with [Writer.PutFileError] in their place); a
// record batch is cut after the first document that brings it to
// [WriterOptions.BatchRows] rows, so batches end on document boundaries.
//
// # Resume
//
// [OpenCheckpointed] makes a writer that survives SIGKILL. Batches go to
// OUT.partial, an Arrow IPC stream without its end marker, and errors to
// ERRORS.partial. After each batch both are fsynced and OUT.checkpoint — a
// small JSON file written to a temporary name, fsynced and renamed — records
// the Index after the last document in the batch, the row and error counts
// and the byte lengths of the valid prefixes of both files. On reopen the
// files are cut back to those lengths (dropping anything written after the
// last checkpoint), the stream is read back and checked against the
// checkpoint and against the new schema and metadata, the checkpoint's
// [WriterOptions.ResumeGuard] (see [InputGuard]) is compared with this
// run's, and the caller gets
// [ResumeState.NextIndex]: documents with a smaller Index are done, so the
// reader starts there. Because batches end on document boundaries and the
// caller Puts documents in order, the resumed run writes the same batches an
// uninterrupted run would, byte for byte for the Arrow format. Commit
// converts the stream into the final file and copies the errors out, renames
// both into place, and only then removes the resume files. Abort keeps the
// resume files (a cancelled run can be resumed); Discard or
// RemoveResumeFiles removes them. An exclusive flock on OUT.partial stops
// two runs from writing the same output.
package dataio

import (
	"errors"

	"github.com/synapse-embed/synapse/io/record"
)

// The records a Reader yields live in package record (no Arrow there);
// dataio names them too.
type (
	Doc       = record.Doc
	RowError  = record.RowError
	FileError = record.FileError
	Progress  = record.Progress
	Query     = record.Query
	Candidate = record.Candidate
)

// Reason codes of row-level errors; see the package documentation.
const (
	ReasonMalformedJSON   = record.ReasonMalformedJSON
	ReasonLineTooLong     = record.ReasonLineTooLong
	ReasonTextTooLong     = record.ReasonTextTooLong
	ReasonMissingField    = record.ReasonMissingField
	ReasonNullText        = record.ReasonNullText
	ReasonNotText         = record.ReasonNotText
	ReasonInvalidUTF8     = record.ReasonInvalidUTF8
	ReasonEmptyText       = record.ReasonEmptyText
	ReasonBadID           = record.ReasonBadID
	ReasonDuplicateID     = record.ReasonDuplicateID
	ReasonCorruptRows     = record.ReasonCorruptRows
	ReasonMalformedLine   = record.ReasonMalformedLine
	ReasonMissingDocument = record.ReasonMissingDocument
	ReasonMissingQuery    = record.ReasonMissingQuery
	ReasonBadScore        = record.ReasonBadScore
	ReasonQueryTooLong    = record.ReasonQueryTooLong
	ReasonFileError       = record.ReasonFileError
)

// rowErrorJSON is the errors-file form of a RowError.
type rowErrorJSON struct {
	Source    string `json:"source"`
	Line      *int   `json:"line,omitempty"`
	Row       *int64 `json:"row,omitempty"`
	Index     int64  `json:"index"`
	ID        string `json:"id,omitempty"`
	Reason    string `json:"reason"`
	Detail    string `json:"detail,omitempty"`
	Chunk     *int   `json:"chunk,omitempty"`
	DocID     string `json:"doc_id,omitempty"`
	Candidate *int   `json:"candidate,omitempty"`
	WorkerLog string `json:"worker_log,omitempty"`
}

func rowErrorJSONOf(e *RowError) rowErrorJSON {
	j := rowErrorJSON{Source: e.Source, Index: e.Index, ID: e.ID, Reason: e.Reason,
		Detail: e.Detail, Chunk: e.Chunk, DocID: e.DocID, Candidate: e.Candidate, WorkerLog: e.WorkerLog}
	if e.Line > 0 {
		line := e.Line
		j.Line = &line
	} else {
		row := e.Row
		j.Row = &row
	}
	return j
}

// fileErrorJSON is the errors-file form of a FileError.
type fileErrorJSON struct {
	Source   string `json:"source"`
	RowGroup *int   `json:"row_group,omitempty"`
	Line     int    `json:"line,omitempty"`
	Index    int64  `json:"index"`
	Reason   string `json:"reason"`
	Detail   string `json:"detail"`
}

func fileErrorJSONOf(e *FileError) fileErrorJSON {
	j := fileErrorJSON{Source: e.Source, Line: e.Line, Index: e.Index, Reason: ReasonFileError, Detail: e.Err.Error()}
	if e.RowGroup >= 0 {
		rg := e.RowGroup
		j.RowGroup = &rg
	}
	return j
}

// Errors of the writer.
var (
	// ErrOutOfOrder: Put was called with an Index not above the previous one.
	ErrOutOfOrder = errors.New("dataio: documents put out of order")
	// ErrClosed: the writer was already committed or aborted.
	ErrClosed = errors.New("dataio: writer is closed")
	// ErrResumeMismatch: the partial output was written with another schema
	// or other metadata (model, chunking, version) than this run's.
	ErrResumeMismatch = errors.New("dataio: partial output is from a different configuration")
	// ErrCheckpointCorrupt: the checkpoint and the partial files disagree.
	ErrCheckpointCorrupt = errors.New("dataio: checkpoint does not match the partial output")
)
