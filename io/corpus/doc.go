// Package corpus streams the records of a job's inputs — corpus documents
// out of JSONL, Parquet, Arrow IPC, CSV and TSV files (local or s3://; the
// format by the name's extension, format.go), queries, runs, shards and
// their ids — in bounded memory. It runs in the module.
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
//	malformed_csv   a CSV or TSV record that cannot be parsed (a bare or
//	                unterminated quote) or whose field count is not the header's
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
package corpus

import "github.com/synapse-embed/synapse/io/record"

// The records a Reader yields live in package record (no Arrow there);
// corpus names them too.
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
	ReasonMalformedCSV    = record.ReasonMalformedCSV
	ReasonMalformedLine   = record.ReasonMalformedLine
	ReasonMissingDocument = record.ReasonMissingDocument
	ReasonMissingQuery    = record.ReasonMissingQuery
	ReasonBadScore        = record.ReasonBadScore
	ReasonQueryTooLong    = record.ReasonQueryTooLong
	ReasonFileError       = record.ReasonFileError
)
