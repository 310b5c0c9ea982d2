package pipeline

import (
	"context"
	"fmt"
)

// answer is one unit's outcome: its answer, or the error it failed with alone.
type answer[I, O any] struct {
	unit[I]
	out O
	err error
}

// batchResult is what one batch came to.
type batchResult[I, O any] []answer[I, O]

// isolator runs batches, retrying a batch whose worker died and then
// splitting it in halves until the items that fail alone are found.
type isolator[R, I, O any] struct {
	kind     Kind[R, I, O]
	classify func(error) Fault
	retries  int // further attempts of a whole batch after a crash
	onRetry  func(b []unit[I], err error)
}

// dispatch runs batches through an isolator; one goroutine per worker.
func (p *run[R, I, O]) dispatch(ctx context.Context, in <-chan []unit[I], out chan<- batchResult[I, O]) error {
	iso := &isolator[R, I, O]{kind: p.kind, classify: p.cfg.Classify, retries: p.cfg.Retries,
		onRetry: func([]unit[I], error) { p.cfg.Stats.Retries.Add(1) }}
	st := p.cfg.Stats
	for {
		var b []unit[I]
		var ok bool
		select {
		case b, ok = <-in:
		case <-p.cfg.Drain:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok || p.draining() { // no new work once the drain began
			return nil
		}
		if p.cfg.SkipReplayed && replayedOnly(b) {
			st.ReplayItems.Add(int64(len(b)))
			st.SkippedReplay.Add(int64(len(b)))
			res := make(batchResult[I, O], len(b))
			for i, u := range b {
				res[i] = answer[I, O]{unit: u}
			}
			if err := p.answer(ctx, out, res); err != nil {
				return err
			}
			continue
		}
		st.Requests.Add(1)
		st.RequestItems.Add(int64(len(b)))
		for _, u := range b {
			if u.replay {
				st.ReplayItems.Add(1)
			}
		}
		res, err := iso.run(ctx, b)
		if err != nil {
			return err
		}
		if p.draining() {
			st.DrainFinished.Add(1)
		}
		if err := p.answer(ctx, out, res); err != nil {
			return err
		}
	}
}

// answer passes a batch's answers to the collector. It never waits on the
// drain: the collector reads until every dispatcher has ended.
func (p *run[R, I, O]) answer(ctx context.Context, out chan<- batchResult[I, O], res batchResult[I, O]) error {
	select {
	case out <- res:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// replayedOnly reports a batch of replayed records' items only.
func replayedOnly[I any](b []unit[I]) bool {
	for _, u := range b {
		if !u.replay {
			return false
		}
	}
	return true
}

// run answers b: every unit comes back answered or failed alone; err is
// non-nil only for a fatal fault.
func (s *isolator[R, I, O]) run(ctx context.Context, b []unit[I]) (batchResult[I, O], error) {
	var lastErr error
	for attempt := 0; attempt <= s.retries; attempt++ {
		if attempt > 0 && s.onRetry != nil {
			s.onRetry(b, lastErr)
		}
		res, failed, err := s.once(ctx, b)
		if err != nil || failed == nil {
			return res, err
		}
		lastErr = failed
		if s.classify(failed) == FaultReject {
			break // the same request would be refused again
		}
	}
	if len(b) == 1 {
		return batchResult[I, O]{{unit: b[0], err: lastErr}}, nil
	}
	return s.split(ctx, b)
}

// once makes one attempt at b: failed is the error of a failed attempt that
// is not fatal; err is a fatal one.
func (s *isolator[R, I, O]) once(ctx context.Context, b []unit[I]) (res batchResult[I, O], failed, err error) {
	items := make([]I, len(b))
	for i, u := range b {
		items[i] = u.item
	}
	outs, err := s.kind.Call(ctx, items)
	switch {
	case err == nil && len(outs) != len(b):
		return nil, nil, fmt.Errorf("pipeline: %d answers for %d items", len(outs), len(b))
	case err == nil:
		res = make(batchResult[I, O], len(b))
		for i, u := range b {
			res[i] = answer[I, O]{unit: u, out: outs[i], err: s.kind.Check(u.item, outs[i])}
		}
		return res, nil, nil
	case ctx.Err() != nil:
		return nil, nil, ctx.Err()
	case s.classify(err) == FaultFatal:
		return nil, nil, err
	}
	return nil, err, nil
}

// split isolates the failing units of b. Both halves are tried once before
// either is split further, so that a healthy half's success comes between
// two crashes of a poisoned one (the supervisor quarantines a model only
// after crashes in a row). A half of one unit that fails is recorded.
func (s *isolator[R, I, O]) split(ctx context.Context, b []unit[I]) (batchResult[I, O], error) {
	half := len(b) / 2
	var res batchResult[I, O]
	var pending [][]unit[I]
	for _, part := range [][]unit[I]{b[:half], b[half:]} {
		r, failed, err := s.once(ctx, part)
		switch {
		case err != nil:
			return nil, err
		case failed == nil:
			res = append(res, r...)
		case len(part) == 1:
			res = append(res, answer[I, O]{unit: part[0], err: failed})
		default:
			pending = append(pending, part)
		}
	}
	for _, part := range pending {
		r, err := s.split(ctx, part)
		if err != nil {
			return nil, err
		}
		res = append(res, r...)
	}
	return res, nil
}
