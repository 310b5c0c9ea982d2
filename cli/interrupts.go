package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/synapse-embed/synapse/pipeline/job"
)

// interrupts are the signals that stop a command (SIGINT, SIGTERM, and
// SIGQUIT: Go's default for it, a goroutine dump and exit 2, would read as
// a usage error to a scheduler). The first signal cancels the context a
// command runs under, unless the command has asked for a drain instead
// (onInterrupt: a job command whose pipeline runs); the second cancels it
// in any case; after it Go's default handling is back, and a third kills.
type interrupts struct {
	mu     sync.Mutex
	n      int
	drain  func() // the first signal's handler; nil: the first cancels
	cancel context.CancelFunc
}

type interruptsKey struct{}

// WithSignals returns the context to give Run: SIGINT, SIGTERM and SIGQUIT
// interrupt it as interrupts says. stop releases the signals.
func WithSignals(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	in := &interrupts{cancel: cancel}
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ch:
				if in.signal() {
					signal.Stop(ch)
					return
				}
			case <-done:
				return
			}
		}
	})
	stop = func() {
		signal.Stop(ch)
		close(done)
		wg.Wait()
		cancel()
	}
	return context.WithValue(ctx, interruptsKey{}, in), stop
}

// signal handles one signal; it reports the last one handled.
func (in *interrupts) signal() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.n++
	if in.n == 1 && in.drain != nil {
		in.drain()
		return false
	}
	in.cancel()
	return true
}

// onInterrupt makes the first signal call drain instead of cancelling
// ctx, until release. It does nothing when ctx has no signals
// (WithSignals) or a signal has come already.
func onInterrupt(ctx context.Context, drain func()) (release func()) {
	in, _ := ctx.Value(interruptsKey{}).(*interrupts)
	if in == nil {
		return func() {}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.n > 0 {
		return func() {}
	}
	in.drain = drain
	return func() {
		in.mu.Lock()
		in.drain = nil
		in.mu.Unlock()
	}
}

// interrupted reports whether a signal has come (the first one may have
// drained a job without cancelling ctx).
func interrupted(ctx context.Context) bool {
	in, _ := ctx.Value(interruptsKey{}).(*interrupts)
	if in == nil {
		return false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.n > 0
}

// drainOnInterrupt makes the first signal drain the job o runs once its
// pipeline has started (job.Options.Started); before that the signal
// stops it at once, as there is nothing to keep. release ends it.
func drainOnInterrupt(ctx context.Context, o *job.Options, log jobLog) (release func()) {
	drain := make(chan struct{})
	o.Drain = drain
	var mu sync.Mutex
	rel := func() {}
	started := o.Started
	o.Started = func(info job.Info) {
		if started != nil {
			started(info)
		}
		mu.Lock()
		defer mu.Unlock()
		rel = onInterrupt(ctx, func() {
			close(drain)
			log.note(slog.LevelWarn, fmt.Sprintf("interrupted: sending no new requests; those in flight get --drain %s to finish, then every finished row is kept (a second signal stops at once)",
				o.DrainTimeout.Round(time.Millisecond)))
		})
	}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		rel()
	}
}

// interruptNote tells the user what an interrupted run kept.
func interruptNote(log jobLog, in job.Interrupt, o *job.Options) {
	line := interruptLine(in)
	if in.Drained {
		line = "interrupted: " + line
	}
	log.note(slog.LevelWarn, fmt.Sprintf("%s; run again with --resume (%s)", line, job.ParseDest(o.Out)),
		"rows_kept", in.Kept, "rows_in_checkpoint", in.Rows, "rows_lost", in.Lost, "drained", in.Drained,
		"drain_timed_out", in.TimedOut, "requests_finished_in_drain", in.InFlight, "records_dropped", in.Dropped)
}

// interruptLine says what an interrupted run kept, in one line, without
// the word "interrupted" that the log line and the summary's label put
// before it.
func interruptLine(in job.Interrupt) string {
	if !in.Drained {
		return fmt.Sprintf("stopped at once by a second signal: nothing kept beyond the last checkpoint (%d rows; %d rows written after it are lost)", in.Rows, in.Lost)
	}
	s := fmt.Sprintf("%d rows kept, %d in the checkpoint (resume at record %d); %d requests in flight finished in %.1fs",
		in.Kept, in.Rows, in.NextRecord, in.InFlight, in.Drain.Seconds())
	if in.TimedOut {
		s += ", the rest abandoned after --drain"
	}
	if in.Dropped > 0 {
		s += fmt.Sprintf(", %d records after them to do again", in.Dropped)
	}
	return s
}
