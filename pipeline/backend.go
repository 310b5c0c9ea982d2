package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/synapse-embed/synapse/supervise"
	"github.com/synapse-embed/synapse/wire"
)

// PoolBackend embeds batches on a supervised worker pool.
type PoolBackend struct {
	Pool      *supervise.Pool
	ModelRef  string
	Pooling   string // "" = the model's own
	Normalize bool
	Dims      int // the width LOADED reported; answers of another width are refused
	// Deadline is the base time a request may take; PerToken is added for
	// every token in the batch.
	Deadline, PerToken time.Duration
	// MaxPatience bounds how far deadlines stretch on a slow machine
	// (default DefaultMaxPatience; 1: never). After a request times out,
	// later requests (the timed-out batch's retry first) get twice the
	// deadline, up to MaxPatience times; a request that finishes within a
	// quarter of its unstretched deadline halves the factor again. A busy
	// machine then slows the run down instead of failing healthy batches
	// into the errors file or quarantining the model; a hung request still
	// ends, later.
	MaxPatience int
	// OnPatience, if set, is told when the factor changes.
	OnPatience func(factor int, cause error)

	patience atomic.Int64 // the current factor; 0 means 1
}

// DefaultMaxPatience is PoolBackend.MaxPatience's default.
const DefaultMaxPatience = 8

// maxTimeout caps a request's deadline, so that no flag value can overflow
// it into "no deadline".
const maxTimeout = 24 * time.Hour

// Timeout is the deadline of a batch of n tokens.
func (p *PoolBackend) Timeout(n int) time.Duration {
	per := min(p.PerToken, maxTimeout/time.Duration(max(n, 1)))
	return min(p.Deadline, maxTimeout) + min(time.Duration(n)*per, maxTimeout)
}

// factor is the current deadline multiplier.
func (p *PoolBackend) factor() int64 { return max(p.patience.Load(), 1) }

// stretch raises the factor to at least g after a request timed out: a
// timeout at a higher factor than the current one (another request halved
// it in the meantime) must not be lost, or the retry would run with less
// time than the attempt that just failed.
func (p *PoolBackend) stretch(g int64, cause error) {
	for {
		stored := p.patience.Load()
		if max(stored, 1) >= g {
			return
		}
		if p.patience.CompareAndSwap(stored, g) {
			if p.OnPatience != nil {
				p.OnPatience(int(g), cause)
			}
			return
		}
	}
}

// relax halves the factor from f (the one a fast request used), unless
// another request moved it first.
func (p *PoolBackend) relax(f int64) {
	if f <= 1 {
		return
	}
	if p.patience.CompareAndSwap(f, f/2) && p.OnPatience != nil {
		p.OnPatience(int(f/2), nil)
	}
}

// timeout is the deadline of a request of base duration at factor f: never
// below base, never above maxTimeout unless base is.
func timeout(base time.Duration, f int64) time.Duration {
	if f <= 1 {
		return base
	}
	if base > maxTimeout/time.Duration(f) {
		return max(base, maxTimeout)
	}
	return max(base, min(base*time.Duration(f), maxTimeout))
}

// Embed implements Backend.
func (p *PoolBackend) Embed(ctx context.Context, b Batch) ([][]float32, error) {
	req := &wire.EmbedBatch{ModelRef: p.ModelRef, Pooling: p.Pooling, Normalize: p.Normalize,
		Items: make([]wire.Item, len(b.Chunks)), IDs: make([]int32, 0, b.Tokens)}
	for i, c := range b.Chunks {
		req.Items[i] = wire.Item{ID: uint64(i), NTokens: len(c.IDs)}
		req.IDs = append(req.IDs, c.IDs...)
	}
	base := p.Timeout(b.Tokens)
	f := p.factor()
	start := time.Now()
	resp, err := p.Pool.Do(ctx, req, timeout(base, f))
	var ce *supervise.CrashError
	var qe *supervise.QuarantinedError
	switch {
	case errors.As(err, &qe): // wraps the crash that quarantined the model: nothing new
	case errors.As(err, &ce) && ce.Stage == "timeout" && ctx.Err() == nil:
		maxP := int64(p.MaxPatience)
		if maxP <= 0 {
			maxP = DefaultMaxPatience
		}
		p.stretch(min(2*f, maxP), err)
	case err == nil && time.Since(start) < base/4:
		p.relax(f)
	}
	if err != nil {
		return nil, err
	}
	v, ok := resp.(*wire.Vectors)
	if !ok {
		return nil, fmt.Errorf("pipeline: EMBED_BATCH answered with %s", resp.Type())
	}
	if v.N != len(b.Chunks) || v.Dims <= 0 || (p.Dims > 0 && v.Dims != p.Dims) || len(v.Data) != v.N*v.Dims {
		return nil, fmt.Errorf("pipeline: VECTORS n=%d dims=%d for %d chunks", v.N, v.Dims, len(b.Chunks))
	}
	out := make([][]float32, v.N)
	for i := range out {
		out[i] = v.Data[i*v.Dims : (i+1)*v.Dims : (i+1)*v.Dims]
	}
	return out, nil
}

// ClassifyPoolError says what an error from a supervised pool means for a batch.
func ClassifyPoolError(err error) Fault {
	var we *wire.Error
	var qe *supervise.QuarantinedError
	switch {
	case errors.As(err, &qe), errors.Is(err, supervise.ErrNoWorkers), errors.Is(err, supervise.ErrClosed),
		errors.Is(err, supervise.ErrModelUnavailable),
		errors.Is(err, context.Canceled):
		return FaultFatal
	case errors.As(err, &we):
		switch we.Code {
		case wire.CodeOOM:
			return FaultRetry
		case wire.CodeModelNotLoaded, wire.CodeConfigInvalid, wire.CodeArtifactInvalid:
			return FaultFatal
		}
		return FaultReject
	}
	return FaultRetry
}

// describe gives a chunk failure's reason code, detail and worker log tail
// for the errors output.
func describe(err error) (reason, detail, log string) {
	var ce *supervise.CrashError
	var we *wire.Error
	switch {
	case errors.As(err, &ce) && ce.Stage == "timeout":
		return "engine_timeout", err.Error(), ce.LogTail
	case errors.As(err, &ce):
		return supervise.CodeEngineCrashed, err.Error(), ce.LogTail
	case errors.As(err, &we):
		return "engine_" + string(we.Code), we.Msg, ""
	}
	return "engine_error", err.Error(), ""
}
