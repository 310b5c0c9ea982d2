package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/synapse-embed/synapse/dataio/record"
	"github.com/synapse-embed/synapse/tokenize"
)

// Source yields documents in a deterministic order (dataio.Reader).
type Source interface {
	// Next returns a document, a *record.RowError, a *record.FileError or io.EOF.
	Next() (record.Doc, error)
}

// DocResult is the outcome of one input record, delivered in input order.
type DocResult struct {
	Doc record.Doc
	// Chunks are the embedded chunks in chunk order. A document with failed
	// chunks keeps the ones that succeeded.
	Chunks []Embedded
	// Errors are the record's error rows: a reader error, or one per chunk
	// that failed alone. Empty when every chunk was embedded.
	Errors []*record.RowError
	// File is set (and Doc, Chunks and Errors are empty) for an input file
	// that failed as a whole or from some point on.
	File *record.FileError
}

// Sink takes results in input order; one goroutine calls it.
type Sink interface {
	Put(DocResult) error
}

// Config is one pipeline run.
type Config struct {
	Tokenizer tokenize.Tokenizer
	Chunking  Chunking
	// BatchTokens is the token budget of one request. GroupWindow is how
	// many chunks the packer sorts by length at a time; it also starts a
	// new group at every document Index that is a multiple of GroupWindow,
	// so that batches depend on the documents' Index, not on where the run
	// started (default DefaultGroupWindow).
	BatchTokens, GroupWindow int
	// Replay: records with an Index below it are embedded, so that the
	// batches are those of a run from GroupStart(Replay), but neither counted
	// nor given to the sink. A resumed run reads from GroupStart(next) with
	// Replay = next and writes what an uninterrupted run would, bit for bit.
	Replay int64
	// Workers is how many batches are in flight at once (one per worker).
	Workers int
	// Tokenizers is how many goroutines tokenize (default: the core count).
	Tokenizers int
	// Retries is how often a batch whose worker crashed is tried again whole
	// before it is split (default 1; negative: never).
	Retries int
	// InFlight bounds the documents between reader and sink (default 4096):
	// the reorder window.
	InFlight int
	// InFlightBytes bounds the text bytes of the documents between reader
	// and sink (default DefaultInFlightBytes), which bounds the module's
	// memory when documents are long: their tokens, chunks and vectors grow
	// with their text. A document counts at most half of it, so documents
	// longer than that still pass (two at a time, and a third waiting in
	// the reader: such documents can exceed the bound). The packer sends
	// what it holds after a document that brings the held documents' text
	// to half the bound, so the bound never stalls the run (and batches
	// still depend only on the input).
	InFlightBytes int64
	Backend       Backend
	Classify      func(error) Fault
	// Stats, if set, is updated as the run goes.
	Stats *Stats
}

// Stats counts a run's progress; fields are updated atomically.
type Stats struct {
	Read, Embedded, Failed atomic.Int64 // records read; records fully embedded; records with errors
	Chunks, Tokens         atomic.Int64 // chunks and tokens embedded
	ChunkFailures          atomic.Int64 // chunks that failed alone
	Retries                atomic.Int64 // whole-batch retries after a crash
	FileErrors             atomic.Int64
	// DeadlineStretch is the largest deadline factor a PoolBackend reached
	// (set by its owner from PoolBackend.OnPatience).
	DeadlineStretch atomic.Int64
	// InputRows and InputBytes are how far the reader got in Parquet rows
	// and JSONL bytes (for progress against dataio.Count's estimate).
	InputRows, InputBytes atomic.Int64
}

func (c *Config) fill() error {
	if c.Tokenizer == nil || c.Backend == nil || c.Classify == nil {
		return errors.New("pipeline: Config needs a Tokenizer, a Backend and a Classify")
	}
	if err := c.Chunking.Validate(); err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if c.BatchTokens <= 0 {
		return fmt.Errorf("pipeline: batch token budget %d must be positive", c.BatchTokens)
	}
	if c.GroupWindow <= 0 {
		c.GroupWindow = DefaultGroupWindow
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.Tokenizers <= 0 {
		c.Tokenizers = runtime.NumCPU()
	}
	if c.Retries == 0 {
		c.Retries = 1
	} else if c.Retries < 0 {
		c.Retries = 0
	}
	if c.InFlight <= 0 {
		c.InFlight = 4096
	}
	c.InFlight = max(c.InFlight, 2*c.GroupWindow)
	if c.InFlightBytes <= 0 {
		c.InFlightBytes = DefaultInFlightBytes
	}
	c.InFlightBytes = max(c.InFlightBytes, 2)
	if c.Stats == nil {
		c.Stats = &Stats{}
	}
	return nil
}

// DefaultGroupWindow is Config.GroupWindow's default.
const DefaultGroupWindow = 256

// DefaultInFlightBytes is Config.InFlightBytes's default: 64 MiB of text,
// a few hundred MiB of module memory with its tokens, chunks and vectors.
const DefaultInFlightBytes = 64 << 20

// GroupStart is the Index where the packer group holding idx starts: a
// resumed run reads from there (see Config.Replay).
func GroupStart(idx int64, groupWindow int) int64 {
	if groupWindow <= 0 {
		groupWindow = DefaultGroupWindow
	}
	return idx - idx%int64(groupWindow)
}

// item is one input record on its way through the stages; seq orders them.
type item struct {
	seq    int64
	doc    record.Doc
	err    error // *record.RowError or *record.FileError from the reader
	chunks []Chunk
	weight int64 // what it holds of Config.InFlightBytes
}

// index is the record's document Index (a reader error's own).
func (r *item) index() int64 {
	switch e := r.err.(type) {
	case *record.RowError:
		return e.Index
	case *record.FileError:
		return e.Index
	}
	return r.doc.Index
}

// Run streams src through tokenize → chunk → batch → backend → sink. It
// returns when the input is exhausted and every record reached the sink, or
// on the first fatal error (a quarantined model, a sink failure, ctx).
func Run(ctx context.Context, cfg Config, src Source, sink Sink) error {
	if err := cfg.fill(); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	slots := make(chan struct{}, cfg.InFlight) // reorder window and backpressure
	mem := semaphore.NewWeighted(cfg.InFlightBytes)
	read := make(chan item, cfg.Tokenizers*4)
	cut := make(chan item, cfg.Tokenizers*4)
	ordered := make(chan item, cfg.Tokenizers*4)
	batches := make(chan Batch, cfg.Workers)
	results := make(chan batchResult, cfg.Workers)
	c := &collector{cfg: &cfg, sink: sink, slots: slots, mem: mem, registered: make(chan item, cfg.GroupWindow), pending: map[int64]*docState{}}

	g.Go(func() error { return readAll(ctx, &cfg, src, slots, mem, read) })
	var tokWG sync.WaitGroup
	for range cfg.Tokenizers {
		tokWG.Add(1)
		g.Go(func() error { defer tokWG.Done(); return tokenizeAll(ctx, &cfg, read, cut) })
	}
	g.Go(func() error { tokWG.Wait(); close(cut); return nil })
	g.Go(func() error { return reorder(ctx, cut, ordered) })
	g.Go(func() error { return c.pack(ctx, ordered, batches) })
	var dispWG sync.WaitGroup
	for range cfg.Workers {
		dispWG.Add(1)
		g.Go(func() error { defer dispWG.Done(); return dispatch(ctx, &cfg, batches, results) })
	}
	g.Go(func() error { dispWG.Wait(); close(results); return nil })
	g.Go(func() error { return c.collect(ctx, results) })
	return g.Wait()
}

// readAll pulls records from src; each takes a slot until the sink has it.
func readAll(ctx context.Context, cfg *Config, src Source, slots chan struct{}, mem *semaphore.Weighted, out chan<- item) error {
	defer close(out)
	st := cfg.Stats
	for seq := int64(0); ; seq++ {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		doc, err := src.Next()
		if p, ok := src.(interface{ Progress() record.Progress }); ok {
			pr := p.Progress()
			st.InputRows.Store(pr.ParquetRows)
			st.InputBytes.Store(pr.JSONLBytes)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil && ctx.Err() != nil { // a read cut short by the cancellation itself
			return ctx.Err()
		}
		var re *record.RowError
		var fe *record.FileError
		if err != nil && !errors.As(err, &re) && !errors.As(err, &fe) {
			return fmt.Errorf("pipeline: read: %w", err)
		}
		r := item{seq: seq, doc: doc, err: err}
		if err == nil {
			r.weight = min(int64(len(doc.Text)), cfg.InFlightBytes/2)
			if err := mem.Acquire(ctx, r.weight); err != nil {
				return err
			}
		}
		if fe == nil && r.index() >= cfg.Replay {
			st.Read.Add(1)
		}
		select {
		case out <- r:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tokenizeAll tokenizes and chunks records; several run at once.
func tokenizeAll(ctx context.Context, cfg *Config, in <-chan item, out chan<- item) error {
	for r := range in {
		if r.err == nil {
			res := cfg.Tokenizer.Tokenize(r.doc.Text, tokenize.Options{})
			r.chunks = cfg.Chunking.Cut(r.seq, res.Tokens)
		}
		select {
		case out <- r:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// reorder restores input order after the parallel tokenizers. Its buffer is
// bounded by the slots the reader holds.
func reorder(ctx context.Context, in <-chan item, out chan<- item) error {
	defer close(out)
	held := map[int64]item{}
	next := int64(0)
	for r := range in {
		held[r.seq] = r
		for {
			h, ok := held[next]
			if !ok {
				break
			}
			delete(held, next)
			next++
			select {
			case out <- h:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if len(held) != 0 {
		return fmt.Errorf("pipeline: %d records lost in reordering", len(held))
	}
	return nil
}
