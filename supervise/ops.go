package supervise

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// Do sends one request to an idle worker and returns its answer. It waits
// for a worker as long as ctx allows; once sent, the request has until ctx
// ends or timeout (0 = no extra bound) passes, whichever is first.
//
// Errors: *wire.Error for a failure the worker reported (the worker stays);
// *CrashError when the worker died, hung past the deadline or broke the
// protocol (it is killed and restarted; retrying is the caller's decision);
// *QuarantinedError at once for a quarantined (model, config); ErrClosed;
// ErrNoWorkers; the context's error while waiting for a worker.
//
// Requests naming a model_ref returned by Load go to workers that have the
// model loaded, with the ref each worker knows it by. The caller's message
// is not modified; the answer carries the caller's req_id.
func (p *Pool) Do(ctx context.Context, req wire.Message, timeout time.Duration) (wire.Message, error) {
	ref, named := modelRefOf(req)
	p.mu.Lock()
	m := p.byRef[ref]
	if named && m != nil {
		if q := p.budget.quarantine(m.key); q != nil {
			p.mu.Unlock()
			return nil, q
		}
	}
	p.mu.Unlock()
	want, possible := func(*slot) bool { return true }, func(*slot) bool { return true }
	if m != nil {
		want = func(s *slot) bool { _, ok := s.loaded[m.key]; return ok }
		possible = func(s *slot) bool { return p.canServe(s, m) }
	}
	s, w, err := p.acquire(ctx, want, possible)
	if err != nil {
		return nil, err
	}
	return p.doOn(ctx, s, w, req, m, timeout)
}

// canServe reports whether slot s has model m or will have it when it is
// back. Call with p.mu held.
func (p *Pool) canServe(s *slot, m *model) bool {
	switch s.state {
	case StateStarting, StateRestarting:
		return p.budget.quarantine(m.key) == nil
	case StateReady, StateBusy:
		_, ok := s.loaded[m.key]
		return ok
	}
	return false
}

// doOn runs req on the acquired worker w of slot s and releases the slot.
func (p *Pool) doOn(ctx context.Context, s *slot, w *worker, req wire.Message, m *model, timeout time.Duration) (wire.Message, error) {
	var ref string
	if m != nil {
		p.mu.Lock()
		ref = s.loaded[m.key]
		p.mu.Unlock()
	}
	wreq, err := prepare(req, w.nextID(), ref)
	if err != nil {
		p.release(s, w)
		return nil, err
	}
	resp, err := w.call(ctx, wreq, timeout)
	var f *failure
	if errors.As(err, &f) {
		return nil, p.crashed(s, w, f, req, m)
	}
	p.release(s, w)
	if err != nil {
		return nil, fmt.Errorf("supervise: %s: %w", req.Type(), err)
	}
	if m != nil {
		p.mu.Lock()
		p.budget.served(m.key)
		p.mu.Unlock()
	}
	setReplyID(resp, requestID(req))
	return resp, nil
}

// Load loads a model on every worker and remembers it: a restarted worker
// replays the LOAD before it takes work. The returned Loaded carries the
// model_ref to use in requests through Do. A (model, config) already loaded
// is not loaded again. A quarantined one fails at once with
// *QuarantinedError.
//
// If any worker fails, Load returns the first error; a model every worker
// refused (ERR) is forgotten, one that crashed a worker stays wanted and the
// restart retries it under the crash budget.
func (p *Pool) Load(ctx context.Context, l wire.Load) (wire.Loaded, error) {
	key := KeyOf(l)
	p.mu.Lock()
	if q := p.budget.quarantine(key); q != nil {
		p.mu.Unlock()
		return wire.Loaded{}, q
	}
	m := p.modelLocked(key, l)
	slots := append([]*slot(nil), p.slots...)
	p.mu.Unlock()
	return p.loadAll(ctx, m, slots, l.ReqID)
}

// modelLocked returns the wanted model for key, adding it. Call with p.mu
// held.
func (p *Pool) modelLocked(key ModelKey, l wire.Load) *model {
	for _, m := range p.models {
		if m.key == key {
			return m
		}
	}
	m := &model{key: key, load: l}
	m.load.ReqID = 0
	p.models = append(p.models, m)
	return m
}

// loadAll loads m on every slot concurrently and merges the answers.
func (p *Pool) loadAll(ctx context.Context, m *model, slots []*slot, reqID uint64) (wire.Loaded, error) {
	out := make([]*wire.Loaded, len(slots))
	errs := make([]error, len(slots))
	var wg sync.WaitGroup
	for i, s := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = p.loadOn(ctx, s, m)
		}()
	}
	wg.Wait()
	var res wire.Loaded
	var first error
	ok, refused := 0, 0
	for i := range slots {
		switch {
		case errs[i] == nil:
			ok++
			res.Dims = out[i].Dims
			res.ColdLoadMS = max(res.ColdLoadMS, out[i].ColdLoadMS)
		case errors.Is(errs[i], errSkipped):
		default:
			var we *wire.Error
			if errors.As(errs[i], &we) {
				refused++
			}
			first = cmp(first, errs[i])
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ok == 0 && refused > 0 {
		p.forgetLocked(m)
	}
	if first != nil {
		return wire.Loaded{}, first
	}
	if ok == 0 {
		return wire.Loaded{}, fmt.Errorf("%w: %w", ErrNoWorkers, p.slots[0].lastErr)
	}
	res.ReqID, res.ModelRef = reqID, m.ref
	return res, nil
}

func cmp(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// errSkipped marks a slot that has given up (StateFailed).
var errSkipped = errors.New("supervise: worker failed; skipped")

// loadOn loads m on slot s, unless its worker has it already.
func (p *Pool) loadOn(ctx context.Context, s *slot, m *model) (*wire.Loaded, error) {
	only := func(x *slot) bool { return x == s }
	_, w, err := p.acquire(ctx, only, only)
	if errors.Is(err, ErrModelUnavailable) || errors.Is(err, ErrNoWorkers) {
		return nil, errSkipped
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	ref, have := s.loaded[m.key]
	p.mu.Unlock()
	if have {
		p.release(s, w)
		p.mu.Lock()
		dims := m.dims
		p.mu.Unlock()
		return &wire.Loaded{ModelRef: ref, Dims: dims}, nil
	}
	req := m.load
	resp, err := p.doOn(ctx, s, w, &req, m, p.cfg.LoadTimeout)
	if err != nil {
		return nil, err
	}
	loaded := resp.(*wire.Loaded)
	p.mu.Lock()
	defer p.mu.Unlock()
	s.loaded[m.key] = loaded.ModelRef
	m.dims = loaded.Dims
	if m.ref == "" {
		m.ref = loaded.ModelRef
		p.byRef[m.ref] = m
	}
	return loaded, nil
}

// forgetLocked drops a model no worker could load. Call with p.mu held.
func (p *Pool) forgetLocked(m *model) {
	for i, x := range p.models {
		if x == m {
			p.models = append(p.models[:i], p.models[i+1:]...)
			break
		}
	}
	if m.ref != "" && p.byRef[m.ref] == m {
		delete(p.byRef, m.ref)
	}
}

// Reprobe lifts the quarantine of a (model, config) and probes it: it is
// loaded again on every worker, under a fresh crash budget. It returns
// Load's error; a probe that crashes counts towards a new quarantine.
func (p *Pool) Reprobe(ctx context.Context, key ModelKey) error {
	p.mu.Lock()
	var m *model
	for _, x := range p.models {
		if x.key == key {
			m = x
		}
	}
	p.budget.lift(key)
	slots := append([]*slot(nil), p.slots...)
	p.mu.Unlock()
	if m == nil {
		return fmt.Errorf("supervise: reprobe %s: model was never loaded", key)
	}
	_, err := p.loadAll(ctx, m, slots, 0)
	if err != nil {
		return fmt.Errorf("supervise: reprobe: %w", err)
	}
	return nil
}
