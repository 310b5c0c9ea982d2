// Package pipeline runs a corpus through read → prepare → pack → dispatch →
// collect in bounded memory, losing no record, for any job kind: embedding
// (chunks of a document), reranking (query–candidate pairs), generation
// (prompts).
//
// The common machinery is written once: input order restored with sequence
// numbers behind a bounded reorder window, a bound on the text in flight,
// batches that depend on the input alone, retry of a request whose worker
// crashed and bisection down to the one item that fails alone, replay for
// resume, and the run's counters. A job kind supplies the rest through
// [Kind]: how a record becomes work items, what an item costs, and how one
// batch of items becomes one request and its answers.
package pipeline

import (
	"context"

	"github.com/synapse-embed/synapse/io/record"
)

// Kind is what a job kind supplies: R is its input record, I a work item, O
// the answer for one item.
type Kind[R, I, O any] interface {
	// Place is r's position in the input. Index orders the records and marks
	// a resume point; it is the same in every run over the same input.
	// Group is the Index of the first record of r's packing group: batches
	// never mix groups, so that they, and the engine's rounding, depend on
	// the input alone, and a run resumed from a group's start gives the
	// batches of an uninterrupted run.
	Place(r R) (index, group int64)
	// Weight is what r holds of Config.InFlightBytes (its text size).
	Weight(r R) int64
	// Items cuts r into work items, in the order of its outputs. An item
	// whose Err is set is not sent: it fails at once with that error. An
	// error instead of items rejects the whole record (a *record.RowError).
	// Items is called from several goroutines at once.
	Items(r R) ([]Work[I], error)
	// Tokens is what an item costs against Config.BatchTokens.
	Tokens(it I) int
	// Call runs items as one request on a worker and returns one answer per
	// item, in order. Its errors are sorted by Config.Classify.
	Call(ctx context.Context, items []I) ([]O, error)
	// Check vets one answer; an error fails that item alone, without a
	// retry (a NaN score, text that breaks the requested schema).
	Check(it I, out O) error
}

// Work is one item of a record, or the reason it cannot be run.
type Work[I any] struct {
	Item I
	Err  error // set: the item is not sent and fails with Err
}

// Source yields records in a deterministic order (corpus.Reader for documents).
type Source[R any] interface {
	// Next returns a record, a *record.RowError, a *record.FileError or io.EOF.
	Next() (R, error)
}

// Result is the outcome of one input record, delivered in input order.
type Result[R, I, O any] struct {
	Rec          R     // zero for a reader error
	Index, Group int64 // the record's Place (the reader error's Index)
	// Done are the items answered, Failed those that failed alone (or were
	// refused by Items); both in item order.
	Done   []Done[I, O]
	Failed []Failed[I]
	// RowErr is the reader's error for this record; File a failed input
	// file (then nothing else is set but Index).
	RowErr *record.RowError
	File   *record.FileError
}

// Done is an answered item.
type Done[I, O any] struct {
	Ord  int // the item's position among its record's items
	Item I
	Out  O
}

// Failed is an item that could not be run, even alone.
type Failed[I any] struct {
	Ord  int
	Item I
	Err  error
}

// OK reports whether every item of the record was answered.
func (r *Result[R, I, O]) OK() bool {
	return r.RowErr == nil && r.File == nil && len(r.Failed) == 0
}

// Sink takes results in input order; one goroutine calls it.
type Sink[R, I, O any] interface {
	Put(Result[R, I, O]) error
}

// Replayer is a Sink that keeps state across the records of a packing
// group (Kind.Place), such as the texts it has seen: a resumed run hands it
// the records it replays (those below Config.Replay, done by the run being
// resumed) in input order before the first Put, to rebuild that state. It
// must not write them.
type Replayer[R, I, O any] interface {
	Replay(Result[R, I, O])
}

// Fault is what an error from Kind.Call means for the batch that met it.
type Fault int

const (
	// FaultRetry: the worker crashed or hung; the batch may succeed on a
	// restarted worker.
	FaultRetry Fault = iota
	// FaultReject: the worker refused the request; one of its items is bad.
	FaultReject
	// FaultFatal: nothing will succeed (quarantined model, cancelled run).
	FaultFatal
)
