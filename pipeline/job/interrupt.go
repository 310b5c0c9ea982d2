package job

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/synapse-embed/synapse/pipeline"
)

// Defaults of the interrupt options.
const (
	// DefaultCheckpointEvery is Options.CheckpointEvery's default.
	DefaultCheckpointEvery = 30 * time.Second
	// DefaultDrain is Options.DrainTimeout's default: under the 30 s grace
	// period a Kubernetes pod gets between SIGTERM and SIGKILL.
	DefaultDrain = 10 * time.Second
)

// Interrupt is what a stopped run kept, for its summary and message.
type Interrupt struct {
	// Drained: the run was drained (Options.Drain) and took a checkpoint
	// of every finished row; else it stopped at once (ctx), keeping its
	// last checkpoint only.
	Drained bool
	// TimedOut: the drain ran past Options.DrainTimeout and the requests
	// still in flight were abandoned.
	TimedOut bool
	// Kept are this run's rows the resume files hold; Rows all the rows
	// they hold (an earlier interrupted run's too); Lost the rows this
	// run wrote after its last checkpoint (a stop at once only).
	Kept, Rows, Lost int64
	// NextRecord is where a resume starts (after a drain).
	NextRecord int64
	// InFlight are the requests the drain let finish; Dropped the records
	// read but not written, which a resume does again.
	InFlight, Dropped int64
	Drain             time.Duration // how long the drain took
}

// InterruptedError: the run was drained and stopped before the input was
// done; every finished row is in the resume files (exit 130, resumable).
type InterruptedError struct{ Interrupt }

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("interrupted: %d rows kept, %d in the checkpoint", e.Kept, e.Rows)
}

// errDrainTimeout cancels the pipeline when the drain runs past its time.
var errDrainTimeout = errors.New("job: the drain ran past --drain")

// runDrained runs the pipeline under Options.Drain: once it fires, the
// run gets Options.DrainTimeout to finish its requests in flight, then
// the rest is cancelled. It returns how long the drain took and whether it
// ran out of time.
func runDrained[R, I, O any](ctx context.Context, r *runner, cfg pipeline.Config, k pipeline.Kind[R, I, O], src pipeline.Source[R], sink pipeline.Sink[R, I, O]) (time.Duration, bool, error) {
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cfg.Drain = r.o.Drain
	var began time.Time
	var wg sync.WaitGroup
	done := make(chan struct{})
	if r.o.Drain != nil {
		wg.Go(func() {
			select {
			case <-r.o.Drain:
			case <-done:
				return
			}
			began = time.Now()
			t := time.NewTimer(r.o.DrainTimeout)
			defer t.Stop()
			select {
			case <-t.C:
				cancel(errDrainTimeout)
			case <-done:
			}
		})
	}
	err := pipeline.Run(pctx, cfg, k, src, sink)
	close(done)
	wg.Wait()
	var took time.Duration
	if !began.IsZero() {
		took = time.Since(began)
	}
	return took, errors.Is(context.Cause(pctx), errDrainTimeout), err
}

// interrupted keeps what a stopped run finished: after a drain, a
// checkpoint of every row written; after a stop at once, the last
// checkpoint only. It records what was kept in the summary.
func (r *runner) interrupted(drained, timedOut bool, took time.Duration) error {
	st := r.o.Stats
	in := Interrupt{Drained: drained, TimedOut: timedOut, InFlight: st.DrainFinished.Load(), Dropped: st.Dropped.Load(), Drain: took}
	var err error
	if drained {
		err = r.w.Checkpoint()
	}
	in.Rows = r.w.CheckpointedRows()
	in.Kept = in.Rows - r.resume.Rows
	in.Lost = r.w.Rows() - in.Rows
	if drained {
		in.NextRecord = r.w.NextIndex()
	}
	r.w.Abort() // the resume files stay for --resume
	r.sum.Interrupt = &in
	return err
}
