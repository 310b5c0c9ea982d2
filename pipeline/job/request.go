package job

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/supervise"
	"github.com/synapse-embed/synapse/wire"
)

// requester sends a job's requests to the worker pool, each with a deadline
// of Deadline + PerToken × its tokens, stretched after timeouts.
type requester struct {
	pool     *supervise.Pool
	modelRef string
	// Deadline is the base time a request may take; PerToken is added for
	// every token in it.
	deadline, perToken time.Duration
	// maxPatience bounds how far deadlines stretch on a slow machine
	// (1: never). After a request times out, later requests (the timed-out
	// batch's retry first) get twice the deadline, up to maxPatience times;
	// a request that finishes within a quarter of its unstretched deadline
	// halves the factor again. A busy machine then slows the run down
	// instead of failing healthy batches into the errors file or
	// quarantining the model; a hung request still ends, later.
	maxPatience int
	// onPatience, if set, is told when the factor changes.
	onPatience func(factor int, cause error)
	// obs, if set, is told how long each request took.
	obs Observer

	patience atomic.Int64 // the current factor; 0 means 1
}

// The deadlines of a request, by default: the defaults of Options'
// Deadline, DeadlinePerToken and DeadlineStretch, and of the CLI's flags.
const (
	DefaultDeadline         = 60 * time.Second
	DefaultDeadlinePerToken = 20 * time.Millisecond
	DefaultDeadlineStretch  = 8
)

// maxTimeout caps a request's deadline, so that no flag value can overflow
// it into "no deadline".
const maxTimeout = 24 * time.Hour

// timeoutFor is the unstretched deadline of a request of n tokens.
func (q *requester) timeoutFor(n int) time.Duration {
	per := min(q.perToken, maxTimeout/time.Duration(max(n, 1)))
	return min(q.deadline, maxTimeout) + min(time.Duration(n)*per, maxTimeout)
}

// factor is the current deadline multiplier.
func (q *requester) factor() int64 { return max(q.patience.Load(), 1) }

// stretch raises the factor to at least g after a request timed out: a
// timeout at a higher factor than the current one (another request halved
// it in the meantime) must not be lost, or the retry would run with less
// time than the attempt that just failed.
func (q *requester) stretch(g int64, cause error) {
	for {
		stored := q.patience.Load()
		if max(stored, 1) >= g {
			return
		}
		if q.patience.CompareAndSwap(stored, g) {
			if q.onPatience != nil {
				q.onPatience(int(g), cause)
			}
			return
		}
	}
}

// relax halves the factor from f (the one a fast request used), unless
// another request moved it first.
func (q *requester) relax(f int64) {
	if f <= 1 {
		return
	}
	if q.patience.CompareAndSwap(f, f/2) && q.onPatience != nil {
		q.onPatience(int(f/2), nil)
	}
}

// stretched is the deadline of a request of base duration at factor f:
// never below base, never above maxTimeout unless base is.
func stretched(base time.Duration, f int64) time.Duration {
	if f <= 1 {
		return base
	}
	if base > maxTimeout/time.Duration(f) {
		return max(base, maxTimeout)
	}
	return max(base, min(base*time.Duration(f), maxTimeout))
}

// do sends req, a request of the given tokens, and returns the answer.
func (q *requester) do(ctx context.Context, req wire.Message, tokens int) (wire.Message, error) {
	base := q.timeoutFor(tokens)
	f := q.factor()
	start := time.Now()
	resp, err := q.pool.Do(ctx, req, stretched(base, f))
	if q.obs != nil {
		q.obs.Request(time.Since(start), err)
	}
	var ce *supervise.CrashError
	var qe *supervise.QuarantinedError
	switch {
	case errors.As(err, &qe): // wraps the crash that quarantined the model: nothing new
	case errors.As(err, &ce) && ce.Stage == "timeout" && ctx.Err() == nil:
		q.stretch(min(2*f, int64(max(q.maxPatience, 1))), err)
	case err == nil && time.Since(start) < base/4:
		q.relax(f)
	}
	return resp, err
}

// classify says what an error from a supervised pool means for a batch.
func classify(err error) pipeline.Fault {
	var we *wire.Error
	var qe *supervise.QuarantinedError
	switch {
	case errors.As(err, &qe), errors.Is(err, supervise.ErrNoWorkers), errors.Is(err, supervise.ErrClosed),
		errors.Is(err, supervise.ErrModelUnavailable),
		errors.Is(err, context.Canceled):
		return pipeline.FaultFatal
	case errors.As(err, &we):
		switch we.Code {
		case wire.CodeOOM:
			return pipeline.FaultRetry
		case wire.CodeModelNotLoaded, wire.CodeConfigInvalid, wire.CodeArtifactInvalid:
			return pipeline.FaultFatal
		}
		return pipeline.FaultReject
	}
	return pipeline.FaultRetry
}

// Reasons of the errors file for items that failed alone (besides the
// engine's own codes, engine_<code>).
const (
	ReasonEngineTimeout = "engine_timeout"
	ReasonEngineError   = "engine_error"
)

// describe gives an item failure's reason code, detail and worker log tail
// for the errors file.
func describe(err error) (reason, detail, log string) {
	var ce *supervise.CrashError
	var we *wire.Error
	var oe *outputError
	switch {
	case errors.As(err, &ce) && ce.Stage == "timeout":
		return ReasonEngineTimeout, err.Error(), ce.LogTail
	case errors.As(err, &ce):
		return supervise.CodeEngineCrashed, err.Error(), ce.LogTail
	case errors.As(err, &we):
		return "engine_" + string(we.Code), we.Msg, ""
	case errors.As(err, &oe):
		return oe.reason, oe.detail, ""
	}
	return ReasonEngineError, err.Error(), ""
}

// outputError is an answer a kind's Check refused, or an item its Items
// refused, with the errors file's reason.
type outputError struct{ reason, detail string }

func (e *outputError) Error() string { return e.reason + ": " + e.detail }

func refuse(reason, format string, args ...any) error {
	return &outputError{reason: reason, detail: fmt.Sprintf(format, args...)}
}

// ask sends req and returns its answer as an R; an answer of another type
// is an error naming both.
func ask[R wire.Message](ctx context.Context, q *requester, req wire.Message, tokens int) (R, error) {
	var none R
	resp, err := q.do(ctx, req, tokens)
	if err != nil {
		return none, err
	}
	r, ok := resp.(R)
	if !ok {
		return none, fmt.Errorf("job: %s answered with %s", req.Type(), resp.Type())
	}
	return r, nil
}
