package pipeline

import (
	"context"
	"fmt"
	"slices"
)

// collector owns the sink: it learns each record's items from the packer,
// gathers the answers, and hands records to the sink in input order.
type collector[R, I, O any] struct {
	*run[R, I, O]
	sink       Sink[R, I, O]
	registered chan rec[R, I]
	pending    map[int64]*pending[R, I, O]
	next       int64
}

// pending is a record waiting for its answers.
type pending[R, I, O any] struct {
	x          rec[R, I]
	registered bool
	sent       int // items sent to workers (those without Work.Err)
	answers    []answer[I, O]
}

func (c *collector[R, I, O]) state(seq int64) *pending[R, I, O] {
	s := c.pending[seq]
	if s == nil {
		s = &pending[R, I, O]{}
		c.pending[seq] = s
	}
	return s
}

// collect takes registrations and answers until both streams end.
func (c *collector[R, I, O]) collect(ctx context.Context, results <-chan batchResult[I, O]) error {
	reg := c.registered
	for reg != nil || results != nil {
		select {
		case x, ok := <-reg:
			if !ok {
				reg = nil
				continue
			}
			s := c.state(x.seq)
			s.x, s.registered = x, true
			for _, w := range x.work {
				if w.Err == nil {
					s.sent++
				}
			}
		case br, ok := <-results:
			if !ok {
				results = nil
				continue
			}
			for _, a := range br {
				s := c.state(a.seq)
				s.answers = append(s.answers, a)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := c.flush(); err != nil {
			return err
		}
	}
	if len(c.pending) != 0 && c.draining() {
		// Records after the first incomplete one: a resumed run does them.
		c.drained.Store(true)
		st := c.cfg.Stats
		for _, s := range c.pending {
			if s.registered {
				st.Dropped.Add(1)
			}
			st.DroppedItems.Add(int64(len(s.answers)))
		}
		return nil
	}
	if len(c.pending) != 0 {
		return fmt.Errorf("pipeline: %d records never completed", len(c.pending))
	}
	return nil
}

// flush hands every complete record at the head of the order to the sink.
func (c *collector[R, I, O]) flush() error {
	for {
		s := c.pending[c.next]
		if s == nil || !s.registered || len(s.answers) < s.sent {
			return nil
		}
		delete(c.pending, c.next)
		c.next++
		if s.x.index >= c.cfg.Replay {
			if err := c.sink.Put(c.result(s, c.cfg.Stats)); err != nil {
				return fmt.Errorf("pipeline: write: %w", err)
			}
		} else if rp, ok := c.sink.(Replayer[R, I, O]); ok { // done by the run being resumed
			rp.Replay(c.result(s, &Stats{}))
		}
		// The input up to this record is done: the progress line's share.
		c.cfg.Stats.DoneRows.Store(s.x.inRows)
		c.cfg.Stats.DoneBytes.Store(s.x.inBytes)
		c.mem.Release(s.x.weight)
		<-c.slots
	}
}

// result turns a complete record into its Result and counts it in st.
func (c *collector[R, I, O]) result(s *pending[R, I, O], st *Stats) Result[R, I, O] {
	r := Result[R, I, O]{Rec: s.x.r, Index: s.x.index, Group: s.x.group}
	if err := s.x.err; err != nil {
		if fe, ok := asFileError(err); ok {
			st.FileErrors.Add(1)
			r.File = fe
			return r
		}
		re, _ := asRowError(err)
		r.RowErr = re
		st.Read.Add(1)
		st.Failed.Add(1)
		return r
	}
	for ord, w := range s.x.work {
		if w.Err != nil {
			r.Failed = append(r.Failed, Failed[I]{Ord: ord, Item: w.Item, Err: w.Err})
		}
	}
	for _, a := range s.answers {
		if a.err != nil {
			r.Failed = append(r.Failed, Failed[I]{Ord: a.ord, Item: a.item, Err: a.err})
			continue
		}
		r.Done = append(r.Done, Done[I, O]{Ord: a.ord, Item: a.item, Out: a.out})
		st.Items.Add(1)
		st.Tokens.Add(int64(a.tokens))
	}
	slices.SortFunc(r.Done, func(a, b Done[I, O]) int { return a.Ord - b.Ord })
	slices.SortFunc(r.Failed, func(a, b Failed[I]) int { return a.Ord - b.Ord })
	st.ItemFailures.Add(int64(len(r.Failed)))
	st.Read.Add(1)
	if len(r.Failed) > 0 {
		st.Failed.Add(1)
		if len(r.Done) > 0 {
			st.Partial.Add(1)
		}
	} else {
		st.OK.Add(1)
	}
	return r
}
