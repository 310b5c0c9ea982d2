// Package output writes a job's results and error records — checkpointed
// Arrow, Parquet, JSONL and TREC outputs, shard manifests — and merges the
// parts of a sharded run. It runs in the module.
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
package output

import (
	"errors"

	"github.com/synapse-embed/synapse/io/record"
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

func rowErrorJSONOf(e *record.RowError) rowErrorJSON {
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

func fileErrorJSONOf(e *record.FileError) fileErrorJSON {
	j := fileErrorJSON{Source: e.Source, Line: e.Line, Index: e.Index, Reason: record.ReasonFileError, Detail: e.Err.Error()}
	if e.RowGroup >= 0 {
		rg := e.RowGroup
		j.RowGroup = &rg
	}
	return j
}

// Errors of the writer.
var (
	// ErrOutOfOrder: Put was called with an Index not above the previous one.
	ErrOutOfOrder = errors.New("output: documents put out of order")
	// ErrClosed: the writer was already committed or aborted.
	ErrClosed = errors.New("output: writer is closed")
	// ErrResumeMismatch: the partial output was written with another schema
	// or other metadata (model, chunking, version) than this run's.
	ErrResumeMismatch = errors.New("the partial output is from a different configuration")
	// ErrCheckpointCorrupt: the checkpoint and the partial files disagree.
	ErrCheckpointCorrupt = errors.New("the checkpoint does not match the partial output")
)
