package supervise

import (
	"os"
	"sync"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// Close stops the pool: new calls fail with ErrClosed, in-flight requests
// get until ShutdownTimeout to finish, each worker is sent SHUTDOWN and
// given the rest of that time to exit, then SIGKILLed. Close returns when
// every process is reaped, every goroutine has returned and every socket
// file is removed. It is safe to call twice.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.broadcast()
	p.mu.Unlock()
	p.cancel() // stops the PING loop and pending restarts

	deadline := time.Now().Add(p.cfg.ShutdownTimeout)
	var wg sync.WaitGroup
	for _, s := range p.slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stopSlot(s, deadline)
		}()
	}
	wg.Wait()
	p.wg.Wait()
	p.sp.close()
	for _, s := range p.slots {
		s.ln.Close() // removes the socket file
	}
	if p.tmpDir != "" {
		return os.RemoveAll(p.tmpDir)
	}
	return nil
}

// stopSlot waits (until deadline) for an in-flight request on s, then
// shuts its worker down: SHUTDOWN, wait for exit until deadline, SIGKILL.
func (p *Pool) stopSlot(s *slot, deadline time.Time) {
	w := p.waitIdle(s, deadline)
	if w == nil {
		return
	}
	if w.conn != nil && w.alive() {
		w.mu.Lock()
		w.nc.SetWriteDeadline(deadline)
		w.mu.Unlock()
		if err := w.conn.Send(&wire.Shutdown{}); err == nil {
			t := time.NewTimer(time.Until(deadline))
			select {
			case <-w.exited:
			case <-t.C:
				p.log.Warn("worker ignored SHUTDOWN; killing it", "worker", w.id, "pid", w.pid)
			}
			t.Stop()
		}
	}
	p.finishWorker(w)
	p.mu.Lock()
	s.state = StateClosed
	p.broadcast()
	p.mu.Unlock()
}

// waitIdle waits until s is not busy, SIGKILLing its worker at deadline so
// the request returns, and takes the worker out of a ready slot. It returns
// nil if there is no worker to stop (restarting, failed, already closed).
func (p *Pool) waitIdle(s *slot, deadline time.Time) *worker {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		p.mu.Lock()
		if s.state != StateBusy {
			w := s.w
			if s.state == StateReady || s.state == StateStarting {
				s.w, s.state = nil, StateClosed
			} else {
				w = nil
			}
			p.mu.Unlock()
			return w
		}
		ch, busy := p.changed, s.w
		p.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			p.log.Warn("request still running at shutdown deadline; killing its worker", "worker", s.id)
			busy.kill()
		}
	}
}
