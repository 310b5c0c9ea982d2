package pipeline

import (
	"sync/atomic"
)

// Stats counts a run's progress; fields are updated atomically. The counters
// of records that reached the sink (Read to FileErrors) cover the whole job:
// a resumed run starts from the interrupted run's (Restore).
type Stats struct {
	Read         atomic.Int64 // records that reached the sink = OK + Failed
	OK, Failed   atomic.Int64 // records with every item answered; records with errors
	Partial      atomic.Int64 // of Failed: records with items answered too (their rows are written)
	Items        atomic.Int64 // items answered
	Tokens       atomic.Int64 // tokens of the items answered
	ItemFailures atomic.Int64 // items that failed alone
	FileErrors   atomic.Int64
	Retries      atomic.Int64 // whole-batch retries after a crash

	// This run's requests, never restored: Requests and RequestItems count
	// the batches dispatched and their items (replayed ones too),
	// ReplayItems the items of records a resumed run replays (done by the
	// interrupted run), SkippedReplay the replayed items not sent because
	// their whole batch was done already (Config.SkipReplayed).
	Requests, RequestItems, ReplayItems, SkippedReplay atomic.Int64
	// After a drain (Config.Drain): DrainFinished are the requests in
	// flight when it began, which it let finish; Dropped the records read
	// but not written (a resumed run does them again) and DroppedItems
	// their items that were answered.
	DrainFinished, Dropped, DroppedItems atomic.Int64

	// DeadlineStretch is the largest deadline factor reached after timeouts
	// (set by the job's request layer).
	DeadlineStretch atomic.Int64
	// InputRows and InputBytes are how far the reader got in Parquet rows
	// and JSONL bytes (for progress against corpus.Count's estimate).
	InputRows, InputBytes atomic.Int64
	// DoneRows and DoneBytes are how far into the input the work done
	// reaches: the reader's InputRows and InputBytes just after it read the
	// last record the sink has (records reach the sink in input order, so
	// nothing before it is still in flight). Unlike InputRows and
	// InputBytes, they do not count the records read ahead and still in
	// the pipeline; the progress line's share and ETA come from them.
	DoneRows, DoneBytes atomic.Int64

	base Counters // what Restore brought in
}

// Counters is a plain copy of the counters a checkpoint keeps.
type Counters struct {
	Read         int64 `json:"read"`
	OK           int64 `json:"ok"`
	Failed       int64 `json:"failed"`
	Partial      int64 `json:"partial,omitempty"`
	Items        int64 `json:"items"`
	Tokens       int64 `json:"tokens"`
	ItemFailures int64 `json:"item_failures"`
	FileErrors   int64 `json:"file_errors"`
}

// Snapshot copies the counters.
func (s *Stats) Snapshot() Counters {
	return Counters{Read: s.Read.Load(), OK: s.OK.Load(), Failed: s.Failed.Load(), Partial: s.Partial.Load(), Items: s.Items.Load(),
		Tokens: s.Tokens.Load(), ItemFailures: s.ItemFailures.Load(), FileErrors: s.FileErrors.Load()}
}

// Restore sets the counters to those of an interrupted run, before this run
// adds its own.
func (s *Stats) Restore(c Counters) {
	s.Read.Store(c.Read)
	s.OK.Store(c.OK)
	s.Failed.Store(c.Failed)
	s.Partial.Store(c.Partial)
	s.Items.Store(c.Items)
	s.Tokens.Store(c.Tokens)
	s.ItemFailures.Store(c.ItemFailures)
	s.FileErrors.Store(c.FileErrors)
	s.base = c
}

// Restored is what Restore brought in (zero for a fresh run): the
// difference to Snapshot is this run's own work, for its rates.
func (s *Stats) Restored() Counters { return s.base }

// Minus is c less b, counter by counter.
func (c Counters) Minus(b Counters) Counters {
	return Counters{Read: c.Read - b.Read, OK: c.OK - b.OK, Failed: c.Failed - b.Failed, Partial: c.Partial - b.Partial, Items: c.Items - b.Items,
		Tokens: c.Tokens - b.Tokens, ItemFailures: c.ItemFailures - b.ItemFailures, FileErrors: c.FileErrors - b.FileErrors}
}
