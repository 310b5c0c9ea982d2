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
		vecs, err := s.backend.Embed(ctx, b)
		if err == nil {
			if len(vecs) != len(b.Chunks) {
				return nil, nil, fmt.Errorf("pipeline: backend returned %d vectors for %d chunks", len(vecs), len(b.Chunks))
			}
			for i, c := range b.Chunks {
				done = append(done, Embedded{Chunk: c, Vector: vecs[i]})
			}
			return done, nil, nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		lastErr = err
		fault := s.classify(err)
		if fault == FaultFatal {
			return nil, nil, err
		}
		if fault == FaultReject {
			break // the same request will be refused again
		}
		if s.onRetry != nil && attempt < s.retries {
			s.onRetry(b, err)
		}
	}
	if len(b.Chunks) == 1 {
		return nil, []ChunkFailure{{Chunk: b.Chunks[0], Err: lastErr}}, nil
	}
	return s.split(ctx, b)
}

// split runs both halves of b. Each half gets a single attempt before it is
// split again: the batch as a whole has already been retried.
func (s *isolator) split(ctx context.Context, b Batch) ([]Embedded, []ChunkFailure, error) {
	half := len(b.Chunks) / 2
	sub := &isolator{backend: s.backend, classify: s.classify, onRetry: s.onRetry}
	var done []Embedded
	var failed []ChunkFailure
	for _, part := range [][]Chunk{b.Chunks[:half], b.Chunks[half:]} {
		d, f, err := sub.run(ctx, batchOf(part))
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
