package pipeline

import (
	"context"
	"errors"
	"slices"
)

// unit is one item on its way to a worker: seq and ord find its record and
// its place among the record's items when the answer comes back.
type unit[I any] struct {
	seq    int64
	ord    int
	item   I
	tokens int
	replay bool // its record is below Config.Replay
}

// Packer groups items of similar cost into batches of at most Budget tokens
// and MaxItems items. It holds up to Window items at a time (the grouping
// window and the memory bound); an item costlier than Budget travels alone.
type Packer[I any] struct {
	Budget, MaxItems, Window int
	held                     []unit[I]
	tokens                   int
}

// Add takes an item and returns the batches that became ready.
func (p *Packer[I]) Add(u unit[I]) [][]unit[I] {
	p.held = append(p.held, u)
	p.tokens += u.tokens
	// Hold at most Window items and at most eight batches' worth of tokens.
	if len(p.held) < max(p.Window, 1) && p.tokens < 8*p.Budget {
		return nil
	}
	return p.Flush()
}

// Held is how many items the packer holds.
func (p *Packer[I]) Held() int { return len(p.held) }

// Flush packs every held item into batches.
func (p *Packer[I]) Flush() [][]unit[I] {
	if len(p.held) == 0 {
		return nil
	}
	held := p.held
	p.held, p.tokens = nil, 0
	// Similar lengths together: fewer wasted positions in the engine's
	// ubatches. Stable on (length, record, item) so batches are
	// deterministic. A request of one item gains nothing from it: those
	// go in input order, so that records complete in order (a drain
	// keeps more of them).
	if p.MaxItems != 1 {
		slices.SortStableFunc(held, func(a, b unit[I]) int { return a.tokens - b.tokens })
	}
	var out [][]unit[I]
	var cur []unit[I]
	tokens := 0
	for _, u := range held {
		full := p.MaxItems > 0 && len(cur) == p.MaxItems
		if len(cur) > 0 && (tokens+u.tokens > p.Budget || full) {
			out = append(out, cur)
			cur, tokens = nil, 0
		}
		cur = append(cur, u)
		tokens += u.tokens
	}
	return append(out, cur)
}

// pack registers each record with the collector, then packs its items.
// Batches depend only on the input, never on timing, so that a run gives the
// same requests (and the same answers) whatever the worker count; groups
// (Kind.Place) are packed apart, so that a resumed run gives the same
// requests too (llama.cpp's rounding depends on a sequence's place in its
// batch).
func (p *run[R, I, O]) pack(ctx context.Context, in <-chan rec[R, I], registered chan<- rec[R, I], out chan<- []unit[I]) error {
	defer close(out)
	defer close(registered)
	pk := &Packer[I]{Budget: p.cfg.BatchTokens, MaxItems: p.cfg.MaxItems, Window: p.cfg.Window}
	send := func(bs [][]unit[I]) error {
		for _, b := range bs {
			select {
			case out <- b:
			case <-p.cfg.Drain:
				return errDraining
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	err := p.packAll(ctx, in, registered, pk, send)
	if errors.Is(err, errDraining) {
		// No new work: what pk holds is never sent, and the records still
		// coming are dropped (the reader has stopped).
		for range in {
			p.cfg.Stats.Dropped.Add(1)
		}
		return nil
	}
	return err
}

// errDraining ends pack when the drain begins.
var errDraining = errors.New("pipeline: draining")

// packAll is pack's loop over the records.
func (p *run[R, I, O]) packAll(ctx context.Context, in <-chan rec[R, I], registered chan<- rec[R, I], pk *Packer[I], send func([][]unit[I]) error) error {
	group := int64(-1)
	var heldBytes int64 // text of the records with items in pk
	for x := range in {
		if p.draining() {
			return errDraining
		}
		if x.group != group {
			if err := send(pk.Flush()); err != nil {
				return err
			}
			group, heldBytes = x.group, 0
		}
		select {
		case registered <- x:
		case <-ctx.Done():
			return ctx.Err()
		}
		for ord, w := range x.work {
			if w.Err != nil {
				continue // the collector fails it
			}
			bs := pk.Add(unit[I]{seq: x.seq, ord: ord, item: w.Item, tokens: p.kind.Tokens(w.Item), replay: x.index < p.cfg.Replay})
			if len(bs) > 0 { // pk sent everything it held
				heldBytes = 0
			}
			if err := send(bs); err != nil {
				return err
			}
		}
		if pk.Held() > 0 {
			heldBytes += x.weight
		}
		// The reader may be waiting for these records to reach the sink
		// (Config.InFlightBytes): send them on.
		if heldBytes >= p.cfg.InFlightBytes/2 {
			if err := send(pk.Flush()); err != nil {
				return err
			}
			heldBytes = 0
		}
	}
	return send(pk.Flush())
}

// Pack cuts groups of items into the batches Run sends for them, each group
// packed as Run packs one packing group under cfg (BatchTokens, MaxItems,
// Window; Config.InFlightBytes's early flush aside): for benchmarks that
// replay a run's requests on a raw engine.
func Pack[I any](groups [][]I, tokens func(I) int, cfg Config) [][]I {
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	pk := &Packer[I]{Budget: cfg.BatchTokens, MaxItems: cfg.MaxItems, Window: cfg.Window}
	var units [][]unit[I]
	for _, g := range groups {
		for _, it := range g {
			units = append(units, pk.Add(unit[I]{item: it, tokens: tokens(it)})...)
		}
		units = append(units, pk.Flush()...)
	}
	out := make([][]I, len(units))
	for i, b := range units {
		out[i] = make([]I, len(b))
		for j, u := range b {
			out[i][j] = u.item
		}
	}
	return out
}
