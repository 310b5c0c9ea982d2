package supervise

import (
	"errors"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// restart brings slot s back: it waits the back-off, starts a worker,
// replays the LOADs of every model that is not quarantined and only then
// marks the slot ready. A failed start schedules another attempt with a
// doubled back-off, up to MaxStartFailures in a row.
func (p *Pool) restart(s *slot) {
	defer p.wg.Done()
	p.mu.Lock()
	wait := p.backoff(s.startFailures)
	p.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			p.closeSlot(s)
			return
		}
	}
	w, err := p.startWorker(p.ctx, s)
	if err != nil {
		p.startFailedRestart(s, err)
		return
	}
	if !p.reload(s, w) {
		return // crashed during reload: crashed() scheduled the next restart
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.mu.Unlock()
		p.finishWorker(w)
		p.mu.Lock()
		s.state = StateClosed
		p.broadcast()
		return
	}
	s.w, s.state = w, StateReady
	s.restarts++
	s.startFailures, s.lastErr = 0, nil
	p.broadcast()
	p.log.Info("worker restarted", "worker", s.id, "pid", w.pid, "restarts", s.restarts)
}

// backoff returns the wait before a start after n failed ones.
func (p *Pool) backoff(n int) time.Duration {
	d := p.cfg.RestartBackoff
	if d < 0 {
		return 0
	}
	for range n {
		d *= 2
		if d >= p.cfg.RestartBackoffMax {
			return p.cfg.RestartBackoffMax
		}
	}
	return d
}

// startFailedRestart records a failed restart and tries again, or gives
// the slot up after MaxStartFailures in a row.
func (p *Pool) startFailedRestart(s *slot, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.ctx.Err() != nil {
		s.state = StateClosed
		p.broadcast()
		return
	}
	s.startFailures++
	s.lastErr = err
	p.crashes["start"]++
	p.budget.record(ModelKey{}, false, p.now(), nil)
	p.log.Warn("worker restart failed", "worker", s.id, "failures", s.startFailures, "err", err)
	if s.startFailures >= p.cfg.MaxStartFailures {
		s.state = StateFailed
		p.broadcast()
		return
	}
	p.wg.Add(1)
	go p.restart(s)
}

// closeSlot marks a slot closed when Close interrupts its restart.
func (p *Pool) closeSlot(s *slot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.state = StateClosed
	p.broadcast()
}

// reload replays the LOAD of every wanted model on a new worker before it
// takes work. A LOAD the worker refuses (ERR) is logged and skipped; that
// worker then serves no request for the model. It reports false if the
// worker crashed, in which case crashed has scheduled another restart.
func (p *Pool) reload(s *slot, w *worker) bool {
	p.mu.Lock()
	var todo []*model
	for _, m := range p.models {
		if p.budget.quarantine(m.key) == nil {
			todo = append(todo, m)
		}
	}
	p.mu.Unlock()
	for _, m := range todo {
		req, _ := prepare(&m.load, w.nextID(), "")
		resp, err := w.call(p.ctx, req, p.cfg.LoadTimeout)
		var f *failure
		switch {
		case errors.As(err, &f):
			if f.stage != "timeout" && !f.canceled {
				f.stage = "load"
			}
			p.crashed(s, w, f, req, m)
			return false
		case err != nil:
			p.log.Error("reload refused", "worker", s.id, "model", m.key.String(), "err", err)
			continue
		}
		p.mu.Lock()
		s.loaded[m.key] = resp.(*wire.Loaded).ModelRef
		p.mu.Unlock()
	}
	return true
}
