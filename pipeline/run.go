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

	"github.com/synapse-embed/synapse/io/record"
)

// Config is one pipeline run.
type Config struct {
	// BatchTokens is the token budget of one request (Kind.Tokens); an item
	// larger than it travels alone. MaxItems caps the items of one request
	// (0: no cap; 1 for kinds whose request holds one item).
	BatchTokens, MaxItems int
	// Window is how many items the packer holds and sorts by length at a
	// time (default DefaultWindow); groups (Kind.Place) end earlier.
	Window int
	// MaxGroup is the most records a packing group holds (the source's
	// rule; default DefaultMaxGroup): the reorder window must exceed it.
	MaxGroup int
	// Replay: records with an Index below it are run, so that the batches
	// are those of a run from their group's start, but neither counted nor
	// given to the sink. A resumed run reads from the group start of its
	// last checkpoint with Replay = the checkpoint's next Index, and writes
	// what an uninterrupted run would, bit for bit.
	Replay int64
	// Workers is how many requests are in flight at once (one per worker).
	Workers int
	// Preparers is how many goroutines run Kind.Items (default: the core count).
	Preparers int
	// Retries is how often a batch whose worker crashed is tried again whole
	// before it is split (default 1; negative: never).
	Retries int
	// InFlight bounds the records between reader and sink (default 4096):
	// the reorder window.
	InFlight int
	// InFlightBytes bounds the text bytes (Kind.Weight) of the records
	// between reader and sink (default DefaultInFlightBytes), which bounds
	// the module's memory when records are long: their tokens, items and
	// answers grow with their text. A record counts at most half of it, so
	// records longer than that still pass (two at a time, and a third
	// waiting in the reader: such records can exceed the bound). The packer
	// sends what it holds after a record that brings the held records' text
	// to half the bound, so the bound never stalls the run (and batches
	// still depend only on the input).
	InFlightBytes int64
	// Classify sorts Kind.Call's errors (required).
	Classify func(error) Fault
	// Stats, if set, is updated as the run goes.
	Stats *Stats
	// Drain, when closed, stops the run gracefully: the reader stops, no
	// further batch is sent, the requests in flight finish, and every
	// record they complete in order reaches the sink; records after the
	// first incomplete one are dropped. Run then returns ErrDrained (nil
	// if the input was done anyway). A nil Drain never fires; ctx still
	// stops the run at once.
	Drain <-chan struct{}
	// SkipReplayed: a batch holding only replayed records' items (below
	// Replay) is not sent, their answers are zero values: for sinks that
	// need no answers of replayed records (no Replayer, or one that
	// ignores them).
	SkipReplayed bool
}

// ErrDrained: Config.Drain stopped the run before the input was done;
// every record before Result.Index of the last Put is written.
var ErrDrained = errors.New("pipeline: drained before the input was done")

// Defaults of Config.
const (
	DefaultWindow        = 256
	DefaultMaxGroup      = 256
	DefaultInFlightBytes = 64 << 20 // 64 MiB of text: a few hundred MiB of module memory
)

func (c *Config) fill() error {
	if c.Classify == nil {
		return errors.New("pipeline: Config needs a Classify")
	}
	if c.BatchTokens <= 0 {
		return fmt.Errorf("pipeline: batch token budget %d must be positive", c.BatchTokens)
	}
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.MaxGroup <= 0 {
		c.MaxGroup = DefaultMaxGroup
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.Preparers <= 0 {
		c.Preparers = runtime.NumCPU()
	}
	if c.Retries == 0 {
		c.Retries = 1
	} else if c.Retries < 0 {
		c.Retries = 0
	}
	if c.InFlight <= 0 {
		c.InFlight = 4096
	}
	c.InFlight = max(c.InFlight, 2*c.MaxGroup)
	if c.InFlightBytes <= 0 {
		c.InFlightBytes = DefaultInFlightBytes
	}
	c.InFlightBytes = max(c.InFlightBytes, 2)
	if c.Stats == nil {
		c.Stats = &Stats{}
	}
	return nil
}

// rec is one input record on its way through the stages; seq orders them.
type rec[R, I any] struct {
	seq          int64
	r            R
	index, group int64
	err          error // *record.RowError or *record.FileError from the reader, or Items' refusal
	work         []Work[I]
	weight       int64 // what it holds of Config.InFlightBytes
	// inRows and inBytes are the reader's position just after this record
	// (Stats.InputRows, InputBytes), for Stats.DoneRows and DoneBytes.
	inRows, inBytes int64
}

// run is the state the stages of one Run share.
type run[R, I, O any] struct {
	cfg   *Config
	kind  Kind[R, I, O]
	slots chan struct{} // the reorder window and its backpressure
	mem   *semaphore.Weighted
	// drained is set when Config.Drain stopped the reader before the end
	// of the input.
	drained atomic.Bool
}

// draining reports whether Config.Drain has fired.
func (p *run[R, I, O]) draining() bool {
	select {
	case <-p.cfg.Drain:
		return true
	default:
		return false
	}
}

// Run streams src through kind and into sink. It returns when the input is
// exhausted and every record reached the sink, or on the first fatal error
// (a quarantined model, a sink failure, ctx).
func Run[R, I, O any](ctx context.Context, cfg Config, kind Kind[R, I, O], src Source[R], sink Sink[R, I, O]) error {
	if err := cfg.fill(); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	p := &run[R, I, O]{cfg: &cfg, kind: kind, slots: make(chan struct{}, cfg.InFlight), mem: semaphore.NewWeighted(cfg.InFlightBytes)}
	buf := cfg.Preparers * 4
	read := make(chan rec[R, I], buf)
	prepared := make(chan rec[R, I], buf)
	ordered := make(chan rec[R, I], buf)
	batches := make(chan []unit[I], cfg.Workers)
	answers := make(chan batchResult[I, O], cfg.Workers)
	c := &collector[R, I, O]{run: p, sink: sink, registered: make(chan rec[R, I], cfg.MaxGroup), pending: map[int64]*pending[R, I, O]{}}

	readCtx, stopRead := context.WithCancel(ctx) // cancelled by the drain too
	var watch sync.WaitGroup
	defer watch.Wait()
	defer stopRead()
	watch.Go(func() {
		select {
		case <-cfg.Drain:
			stopRead()
		case <-readCtx.Done():
		}
	})
	g.Go(func() error {
		err := p.readAll(readCtx, src, read)
		if err != nil && ctx.Err() == nil && p.draining() { // the drain stopped it
			p.drained.Store(true)
			return nil
		}
		return err
	})
	g.Go(func() error {
		return fanOut(cfg.Preparers, prepared, func() error { return p.prepareAll(ctx, read, prepared) })
	})
	g.Go(func() error { return reorder(ctx, prepared, ordered) })
	g.Go(func() error { return p.pack(ctx, ordered, c.registered, batches) })
	g.Go(func() error {
		return fanOut(cfg.Workers, answers, func() error { return p.dispatch(ctx, batches, answers) })
	})
	g.Go(func() error { return c.collect(ctx, answers) })
	if err := g.Wait(); err != nil {
		return err
	}
	if p.drained.Load() {
		return ErrDrained
	}
	return nil
}

// fanOut runs n copies of stage and closes out once all have ended well.
// After a failure it returns the first error and leaves out open: a stage
// downstream must not see a clean end of input (and report records missing)
// before the failure that ended the run is recorded; the cancellation that
// follows the error ends it instead.
func fanOut[T any](n int, out chan<- T, stage func() error) error {
	var g errgroup.Group
	for range n {
		g.Go(stage)
	}
	if err := g.Wait(); err != nil {
		return err
	}
	close(out)
	return nil
}

// readAll pulls records from src; each takes a slot until the sink has it.
func (p *run[R, I, O]) readAll(ctx context.Context, src Source[R], out chan<- rec[R, I]) error {
	defer close(out)
	st := p.cfg.Stats
	for seq := int64(0); ; seq++ {
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		r, err := src.Next()
		x := rec[R, I]{seq: seq, r: r, err: err}
		if pr, ok := src.(interface{ Progress() record.Progress }); ok {
			prog := pr.Progress()
			x.inRows, x.inBytes = prog.ParquetRows, prog.JSONLBytes
			st.InputRows.Store(prog.ParquetRows)
			st.InputBytes.Store(prog.JSONLBytes)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil && (ctx.Err() != nil || p.draining()) { // a read cut short by the cancellation or the drain
			return context.Canceled
		}
		var re *record.RowError
		var fe *record.FileError
		switch {
		case err == nil:
			x.index, x.group = p.kind.Place(r)
			x.weight = min(p.kind.Weight(r), p.cfg.InFlightBytes/2)
			if err := p.mem.Acquire(ctx, x.weight); err != nil {
				return err
			}
		case errors.As(err, &re):
			x.index, x.group = re.Index, re.Group
		case errors.As(err, &fe):
			x.index, x.group = fe.Index, fe.Index
		default:
			return fmt.Errorf("pipeline: read: %w", err)
		}
		select {
		case out <- x:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// prepareAll cuts records into work items; several run at once.
func (p *run[R, I, O]) prepareAll(ctx context.Context, in <-chan rec[R, I], out chan<- rec[R, I]) error {
	for x := range in {
		if x.err == nil {
			x.work, x.err = p.kind.Items(x.r)
			var re *record.RowError
			if x.err != nil && !errors.As(x.err, &re) {
				return fmt.Errorf("pipeline: record %d: %w", x.index, x.err)
			}
		}
		select {
		case out <- x:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// reorder restores input order after the parallel preparers. Its buffer is
// bounded by the slots the reader holds.
func reorder[R, I any](ctx context.Context, in <-chan rec[R, I], out chan<- rec[R, I]) error {
	defer close(out)
	held := map[int64]rec[R, I]{}
	next := int64(0)
	for {
		var x rec[R, I]
		var ok bool
		select {
		case x, ok = <-in:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			break
		}
		held[x.seq] = x
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

func asFileError(err error) (*record.FileError, bool) {
	var fe *record.FileError
	return fe, errors.As(err, &fe)
}

func asRowError(err error) (*record.RowError, bool) {
	var re *record.RowError
	return re, errors.As(err, &re)
}
