package pipeline

import (
	"context"
	"fmt"
	"slices"

	"golang.org/x/sync/semaphore"

	"github.com/synapse-embed/synapse/dataio/record"
)

// collector owns the sink: it learns each record's chunks from the packer,
// gathers the batch results, and hands records to the sink in input order.
type collector struct {
	cfg        *Config
	sink       Sink
	slots      chan struct{}
	mem        *semaphore.Weighted
	registered chan item
	pending    map[int64]*docState
	next       int64
}

type docState struct {
	rec        item
	registered bool
	done       []Embedded
	failed     []ChunkFailure
}

type batchResult struct {
	done   []Embedded
	failed []ChunkFailure
}

// pack registers each record with the collector, then packs its chunks.
// Batches depend only on the input, never on timing, so that a run gives the
// same requests (and the same vectors) whatever the worker count; groups
// start at Index multiples of GroupWindow, so that a resumed run gives the
// same requests too (llama.cpp's rounding depends on a sequence's place in
// its batch).
func (c *collector) pack(ctx context.Context, in <-chan item, out chan<- Batch) error {
	defer close(out)
	defer close(c.registered)
	p := &Packer{Budget: c.cfg.BatchTokens, Window: c.cfg.GroupWindow}
	send := func(bs []Batch) error {
		for _, b := range bs {
			select {
			case out <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	group := int64(-1)
	var heldBytes int64 // text of the documents with chunks in p
	for r := range in {
		if g := r.index() / int64(c.cfg.GroupWindow); g != group {
			if err := send(p.Flush()); err != nil {
				return err
			}
			group, heldBytes = g, 0
		}
		select {
		case c.registered <- r:
		case <-ctx.Done():
			return ctx.Err()
		}
		for _, ch := range r.chunks {
			bs := p.Add(ch)
			if len(bs) > 0 { // p sent everything it held
				heldBytes = 0
			}
			if err := send(bs); err != nil {
				return err
			}
		}
		if p.Held() > 0 {
			heldBytes += r.weight
		}
		// The reader may be waiting for these documents to reach the sink
		// (Config.InFlightBytes): send them on.
		if heldBytes >= c.cfg.InFlightBytes/2 {
			if err := send(p.Flush()); err != nil {
				return err
			}
			heldBytes = 0
		}
	}
	return send(p.Flush())
}

// dispatch runs batches on the backend; one goroutine per worker.
func dispatch(ctx context.Context, cfg *Config, in <-chan Batch, out chan<- batchResult) error {
	iso := &isolator{backend: cfg.Backend, classify: cfg.Classify, retries: cfg.Retries,
		onRetry: func(Batch, error) { cfg.Stats.Retries.Add(1) }}
	for b := range in {
		done, failed, err := iso.run(ctx, b)
		if err != nil {
			return err
		}
		select {
		case out <- batchResult{done, failed}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (c *collector) state(seq int64) *docState {
	s := c.pending[seq]
	if s == nil {
		s = &docState{}
		c.pending[seq] = s
	}
	return s
}

// collect takes registrations and results until both streams end.
func (c *collector) collect(ctx context.Context, results <-chan batchResult) error {
	reg := c.registered
	for reg != nil || results != nil {
		select {
		case r, ok := <-reg:
			if !ok {
				reg = nil
				continue
			}
			s := c.state(r.seq)
			s.rec, s.registered = r, true
		case br, ok := <-results:
			if !ok {
				results = nil
				continue
			}
			for _, e := range br.done {
				s := c.state(e.Chunk.Doc)
				s.done = append(s.done, e)
			}
			for _, f := range br.failed {
				s := c.state(f.Chunk.Doc)
				s.failed = append(s.failed, f)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := c.flush(); err != nil {
			return err
		}
	}
	if len(c.pending) != 0 {
		return fmt.Errorf("pipeline: %d records never completed", len(c.pending))
	}
	return nil
}

// flush hands every complete record at the head of the order to the sink.
func (c *collector) flush() error {
	for {
		s := c.pending[c.next]
		if s == nil || !s.registered || len(s.done)+len(s.failed) < len(s.rec.chunks) {
			return nil
		}
		delete(c.pending, c.next)
		c.next++
		if s.rec.index() >= c.cfg.Replay { // below: done by the run being resumed
			if err := c.sink.Put(c.result(s)); err != nil {
				return fmt.Errorf("pipeline: write: %w", err)
			}
		}
		c.mem.Release(s.rec.weight)
		<-c.slots
	}
}

// result turns a complete record into its DocResult and counts it.
func (c *collector) result(s *docState) DocResult {
	st := c.cfg.Stats
	r := DocResult{Doc: s.rec.doc}
	switch err := s.rec.err.(type) {
	case nil:
	case *record.FileError:
		st.FileErrors.Add(1)
		return DocResult{File: err}
	case *record.RowError:
		// The reader returns no Doc with a bad record: its place in the
		// order (and resume) is the error's.
		st.Failed.Add(1)
		r.Doc = record.Doc{Source: err.Source, Line: err.Line, Row: err.Row, Index: err.Index, ID: err.ID}
		r.Errors = []*record.RowError{err}
		return r
	}
	slices.SortFunc(s.done, func(a, b Embedded) int { return int(a.Chunk.Index - b.Chunk.Index) })
	slices.SortFunc(s.failed, func(a, b ChunkFailure) int { return int(a.Chunk.Index - b.Chunk.Index) })
	r.Chunks = s.done
	for _, e := range s.done {
		st.Chunks.Add(1)
		st.Tokens.Add(int64(len(e.Chunk.IDs)))
	}
	for _, f := range s.failed {
		reason, detail, log := describe(f.Err)
		r.Errors = append(r.Errors, r.Doc.ChunkError(int(f.Chunk.Index), reason, detail, log))
		st.ChunkFailures.Add(1)
	}
	if len(r.Errors) > 0 {
		st.Failed.Add(1)
	} else {
		st.Embedded.Add(1)
	}
	return r
}
