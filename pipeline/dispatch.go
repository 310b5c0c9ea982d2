package pipeline

import (
	"context"
	"fmt"
)

// Backend runs one batch on a worker and returns one vector per chunk, in
// the batch's order.
type Backend interface {
	Embed(ctx context.Context, b Batch) ([][]float32, error)
}

// Fault is what a backend error means for the batch that met it.
type Fault int

const (
	// FaultRetry: the worker crashed or hung; the batch may succeed on a
	// restarted worker.
	FaultRetry Fault = iota
	// FaultReject: the worker refused the request; one of its chunks is bad.
	FaultReject
	// FaultFatal: nothing will succeed (quarantined model, cancelled run).
	FaultFatal
)

// ChunkFailure is a chunk that could not be embedded, even alone.
type ChunkFailure struct {
	Chunk Chunk
	Err   error
}

// Embedded is a chunk with its vector.
type Embedded struct {
	Chunk  Chunk
	Vector []float32
}

// isolator runs batches, retrying a batch whose worker died once and then
// splitting it in halves until the chunks that fail alone are found.
type isolator struct {
	backend  Backend
	classify func(error) Fault
	retries  int // further attempts of a whole batch after a crash
	onRetry  func(b Batch, err error)
}

// run embeds b. It returns the embedded chunks and the chunks that failed
// alone; err is non-nil only for a fatal fault.
func (s *isolator) run(ctx context.Context, b Batch) (done []Embedded, failed []ChunkFailure, err error) {
	var lastErr error
	for attempt := 0; attempt <= s.retries; attempt++ {
		if attempt > 0 && s.onRetry != nil {
			s.onRetry(b, lastErr)
		}
		done, lastErr, err = s.once(ctx, b)
		if err != nil || lastErr == nil {
			return done, nil, err
		}
		if s.classify(lastErr) == FaultReject {
			break // the same request would be refused again
		}
	}
	if len(b.Chunks) == 1 {
		return nil, []ChunkFailure{{Chunk: b.Chunks[0], Err: lastErr}}, nil
	}
	return s.split(ctx, b)
}

// once makes one attempt at b: failed is the error of a failed attempt that
// is not fatal; err is a fatal one.
func (s *isolator) once(ctx context.Context, b Batch) (done []Embedded, failed, err error) {
	vecs, err := s.backend.Embed(ctx, b)
	switch {
	case err == nil && len(vecs) != len(b.Chunks):
		return nil, nil, fmt.Errorf("pipeline: backend returned %d vectors for %d chunks", len(vecs), len(b.Chunks))
	case err == nil:
		for i, c := range b.Chunks {
			done = append(done, Embedded{Chunk: c, Vector: vecs[i]})
		}
		return done, nil, nil
	case ctx.Err() != nil:
		return nil, nil, ctx.Err()
	case s.classify(err) == FaultFatal:
		return nil, nil, err
	}
	return nil, err, nil
}

// split isolates the failing chunks of b. Both halves are tried once before
// either is split further, so that a healthy half's success comes between
// two crashes of a poisoned one (the supervisor quarantines a model only
// after crashes in a row). A half that fails alone-sized is recorded.
func (s *isolator) split(ctx context.Context, b Batch) ([]Embedded, []ChunkFailure, error) {
	half := len(b.Chunks) / 2
	var done []Embedded
	var failed []ChunkFailure
	var pending []Batch
	for _, part := range [][]Chunk{b.Chunks[:half], b.Chunks[half:]} {
		pb := batchOf(part)
		d, lastErr, err := s.once(ctx, pb)
		switch {
		case err != nil:
			return nil, nil, err
		case lastErr == nil:
			done = append(done, d...)
		case len(part) == 1:
			failed = append(failed, ChunkFailure{Chunk: part[0], Err: lastErr})
		default:
			pending = append(pending, pb)
		}
	}
	for _, pb := range pending {
		d, f, err := s.split(ctx, pb)
		if err != nil {
			return nil, nil, err
		}
		done, failed = append(done, d...), append(failed, f...)
	}
	return done, failed, nil
}

func batchOf(chunks []Chunk) Batch {
	b := Batch{Chunks: chunks}
	for _, c := range chunks {
		b.Tokens += len(c.IDs)
	}
	return b
}
