package supervise

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// CrashInfo summarizes a worker's last crash.
type CrashInfo struct {
	Time   time.Time
	Stage  string
	Reason string
}

// WorkerHealth is the cached state of one worker slot.
type WorkerHealth struct {
	ID           string
	State        WorkerState
	PID          int // 0 when no process is up
	Restarts     int
	LastCrash    *CrashInfo // nil if it never crashed
	RSSMB        int        // from the last PONG
	ModelsLoaded []string   // from the last PONG
	LastPong     time.Time  // zero before the first PONG
	LastError    string     // last start failure, if any
}

// Quarantine is one quarantined (model, config).
type Quarantine struct {
	Model   ModelKey
	Crashes int
	Since   time.Time
}

// Health is a snapshot of the pool.
type Health struct {
	Workers         []WorkerHealth
	Degraded        bool // DegradedCrashes or more crashes within DegradedWindow
	CrashesInWindow int
	Quarantined     []Quarantine
	// Crashes counts the crashes since the pool started by stage: where
	// the worker was when it died ("send", "recv", "timeout", "protocol",
	// "load" while replaying LOADs after a restart) or "start" for a
	// restart that failed.
	Crashes map[string]int
}

// Health returns the cached state. It never sends a request; the PING loop
// refreshes what it reports.
func (p *Pool) Health() Health {
	p.mu.Lock()
	defer p.mu.Unlock()
	var h Health
	h.Degraded, h.CrashesInWindow = p.budget.degraded(p.now())
	h.Crashes = maps.Clone(p.crashes)
	for _, s := range p.slots {
		wh := WorkerHealth{ID: s.id, State: s.state, Restarts: s.restarts, RSSMB: s.rssMB,
			ModelsLoaded: slices.Clone(s.models), LastPong: s.lastPong}
		if s.w != nil {
			wh.PID = s.w.pid
		}
		if s.lastCrash != nil {
			c := *s.lastCrash
			wh.LastCrash = &c
		}
		if s.lastErr != nil {
			wh.LastError = s.lastErr.Error()
		}
		h.Workers = append(h.Workers, wh)
	}
	for _, q := range p.budget.quarantined {
		h.Quarantined = append(h.Quarantined, Quarantine{Model: q.Model, Crashes: q.Crashes, Since: q.Since})
	}
	slices.SortFunc(h.Quarantined, func(a, b Quarantine) int { return a.Since.Compare(b.Since) })
	return h
}

// LogTail returns the last max bytes of a worker's output, as
// "stream: line" lines.
func (p *Pool) LogTail(workerID string, max int) string { return p.ring.Tail(workerID, max) }

// Logs returns the ring that holds every worker's recent output.
func (p *Pool) Logs() *LogRing { return p.ring }

// pingLoop refreshes Health every PingInterval until Close.
func (p *Pool) pingLoop() {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			p.Refresh(p.ctx)
		}
	}
}

// Refresh PINGs every idle worker now and updates the cached health. Busy
// workers are skipped: a PING never waits behind, or interleaves with, a
// request. A worker that does not answer within PingTimeout is killed and
// restarted like any crash. It returns the first crash, if any.
func (p *Pool) Refresh(ctx context.Context) error {
	var first error
	for _, s := range p.slots {
		w := p.tryAcquire(s)
		if w == nil {
			continue
		}
		resp, err := p.doOn(ctx, s, w, &wire.Ping{}, nil, p.cfg.PingTimeout)
		if err != nil {
			var ce *CrashError
			if errors.As(err, &ce) && first == nil {
				first = err
			}
			continue
		}
		pong := resp.(*wire.Pong)
		p.mu.Lock()
		if s.w == w {
			s.lastPong, s.rssMB, s.models = p.now(), pong.RSSMB, slices.Clone(pong.ModelsLoaded)
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	hook := p.onPing
	p.mu.Unlock()
	if hook != nil {
		hook()
	}
	return first
}

// tryAcquire marks slot s busy if it is ready and returns its worker, else
// nil.
func (p *Pool) tryAcquire(s *slot) *worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || s.state != StateReady {
		return nil
	}
	s.state = StateBusy
	p.broadcast()
	return s.w
}

// Supports reports whether the pool's workers announced the protocol
// extension ext in HELLO (every worker that has shaken hands; all are the
// same program, so one that did not means none can be counted on).
func (p *Pool) Supports(ext string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := false
	for _, s := range p.slots {
		if s.w == nil || s.w.hello == nil {
			continue
		}
		seen = true
		if !slices.Contains(s.w.hello.Extensions, ext) {
			return false
		}
	}
	return seen
}

// MaxFrame is the smallest frame limit negotiated with the pool's workers
// (every worker that has shaken hands), or the pool's own limit when none
// has: what a request and its answer must each fit.
func (p *Pool) MaxFrame() uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	limit := p.cfg.MaxFrame
	for _, s := range p.slots {
		if s.w == nil || s.w.conn == nil {
			continue
		}
		limit = min(limit, s.w.conn.MaxFrame())
	}
	return limit
}
