// Package supervise runs engine workers as supervised processes speaking
// protocol v1 (package wire) and keeps the module's promise: an engine fault
// or hang costs one worker process and a retry, never the job, and a request
// never hangs.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// WorkerState is a worker slot's state in Health.
type WorkerState string

// Worker states.
const (
	StateStarting   WorkerState = "starting"
	StateReady      WorkerState = "ready" // idle, takes work
	StateBusy       WorkerState = "busy"  // serving one request
	StateRestarting WorkerState = "restarting"
	StateFailed     WorkerState = "failed" // gave up after MaxStartFailures
	StateClosed     WorkerState = "closed"
)

// poolSeq numbers pools within the process, for unique worker ids.
var poolSeq atomic.Uint64

// slot is one worker position of the pool: a stable id and socket, and the
// worker process currently behind them. Fields below ln are guarded by
// Pool.mu.
type slot struct {
	index int
	id    string
	path  string
	ln    *net.UnixListener

	state         WorkerState
	w             *worker
	loaded        map[ModelKey]string // models w loaded → w's model_ref
	restarts      int
	startFailures int
	lastErr       error
	lastCrash     *CrashInfo
	lastPong      time.Time
	rssMB         int
	models        []string
}

// model is a LOAD the pool replays on every new worker.
type model struct {
	key  ModelKey
	load wire.Load
	ref  string // the model_ref callers use (the first worker's)
	dims int    // LOADED's dims, returned again to a Load of a loaded model
}

// Pool supervises a fixed number of single-lane worker processes. Its
// methods are safe for concurrent use; each request holds one worker.
type Pool struct {
	cfg    Config
	now    func() time.Time
	log    *slog.Logger
	ring   *LogRing
	sp     *spawner
	dir    string // <runtime>/synapse/workers
	tmpDir string // private runtime dir to remove on Close, if created

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // restarts, ping loop, background cleanup

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever a slot changes
	closed  bool
	slots   []*slot
	models  []*model
	byRef   map[string]*model
	budget  *budget
	crashes map[string]int // crashes since the start, by stage (Health.Crashes)
	onPing  func()         // test hook, called after each PING round
}

// NewPool creates the sockets, starts cfg.Workers workers and waits for
// their handshakes. If any worker fails to start, everything is torn down
// and the *StartError returned.
func NewPool(ctx context.Context, cfg Config) (*Pool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	root, created, err := runtimeDir(cfg.RuntimeDir)
	if err != nil {
		return nil, err
	}
	p := &Pool{
		cfg: cfg, now: cfg.Now, log: cfg.Logger,
		ring:    NewLogRing(cfg.LogBytesPerWorker, cfg.LogBytesTotal),
		changed: make(chan struct{}),
		byRef:   make(map[string]*model),
		budget:  newBudget(cfg),
		crashes: make(map[string]int),
	}
	if created {
		p.tmpDir = root
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.sp = newSpawner()
	if err := p.open(root); err != nil {
		p.Close()
		return nil, err
	}
	if err := p.startAll(ctx); err != nil {
		p.Close()
		return nil, err
	}
	if cfg.PingInterval > 0 {
		p.wg.Add(1)
		go p.pingLoop()
	}
	return p, nil
}

// open creates the workers directory and one listening socket per slot.
func (p *Pool) open(root string) error {
	dir, err := workersDir(root)
	if err != nil {
		return err
	}
	p.dir = dir
	sweepStale(dir)
	seq := poolSeq.Add(1)
	for i := range p.cfg.Workers {
		id := fmt.Sprintf("%d-%d-w%d", os.Getpid(), seq, i)
		s := &slot{index: i, id: id, path: filepath.Join(dir, id+".sock"), state: StateStarting,
			loaded: make(map[ModelKey]string)}
		s.ln, err = listen(s.path)
		if err != nil {
			return &StartError{WorkerID: id, Stage: "listen", ExitStatus: -1, Err: err}
		}
		p.slots = append(p.slots, s)
	}
	return nil
}

// startAll starts every slot's first worker concurrently.
func (p *Pool) startAll(ctx context.Context) error {
	errs := make([]error, len(p.slots))
	var wg sync.WaitGroup
	for i, s := range p.slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := p.startWorker(ctx, s)
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil {
				errs[i] = err
				s.state, s.lastErr = StateFailed, err
				return
			}
			s.w, s.state = w, StateReady
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// broadcast wakes everyone waiting for a slot change. Call with p.mu held.
func (p *Pool) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// acquire waits until a slot accepted by want is ready, marks it busy and
// returns it with its worker. It fails at once when the pool is closed,
// when every slot has failed, or when no slot can ever be accepted
// (possible reports whether a slot might still be).
func (p *Pool) acquire(ctx context.Context, want, possible func(*slot) bool) (*slot, *worker, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, nil, ErrClosed
		}
		failed, hope := 0, false
		for _, s := range p.slots {
			if s.state == StateReady && want(s) {
				s.state = StateBusy
				p.broadcast()
				p.mu.Unlock()
				return s, s.w, nil
			}
			if s.state == StateFailed {
				failed++
			} else if possible(s) {
				hope = true
			}
		}
		if failed == len(p.slots) {
			err := fmt.Errorf("%w: %w", ErrNoWorkers, p.slots[0].lastErr)
			p.mu.Unlock()
			return nil, nil, err
		}
		if !hope {
			p.mu.Unlock()
			return nil, nil, ErrModelUnavailable
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("supervise: waiting for a worker: %w", ctx.Err())
		}
	}
}

// ErrModelUnavailable means no live worker can serve the request: every
// worker that could have the model refused to load it again after a restart
// (the refusal is in the log). Retrying does not help.
var ErrModelUnavailable = errors.New("supervise: no worker has the model loaded")

// release returns a slot after a call that did not crash. A worker that
// was killed anyway (its deadline or its caller's context fired as the
// answer arrived) is reaped while the slot is still busy, so that Close
// waits for it, and restarted without counting a crash; one that exited
// on its own after answering is counted as a crash.
func (p *Pool) release(s *slot, w *worker) {
	alive := w.alive()
	if !alive && !w.killed.Load() {
		// It answered, then exited on its own (an engine that dies after
		// its answer): the answer stands, and the exit is a crash.
		_ = p.crashed(s, w, &failure{stage: "recv", err: errors.New("the worker exited after answering")}, nil, nil)
		return
	}
	if !alive {
		p.finishWorker(w)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if alive {
		s.state = StateReady
		p.broadcast()
		return
	}
	p.replaceLocked(s, w)
}

// replaceLocked takes a dead worker out of s and schedules its restart (or
// closes the slot if the pool is closing). Call with p.mu held.
func (p *Pool) replaceLocked(s *slot, w *worker) {
	if s.w == w {
		s.w = nil
	}
	clear(s.loaded)
	s.rssMB, s.models = 0, nil
	if p.closed {
		s.state = StateClosed
	} else {
		s.state = StateRestarting
		p.wg.Add(1)
		go p.restart(s)
	}
	p.broadcast()
}

// crashed handles a call that cost worker w of slot s: it kills and reaps
// the worker, builds the CrashError with the tail of its output, counts it
// against the crash budgets and schedules the restart.
func (p *Pool) crashed(s *slot, w *worker, f *failure, req wire.Message, m *model) error {
	p.finishWorker(w)
	status, sig := w.exitInfo()
	ce := &CrashError{WorkerID: w.id, PID: w.pid, Stage: f.stage, ExitStatus: status, Signal: sig,
		LogTail: p.ring.CrashTail(w.id, crashTailBytes), Time: p.now(), Err: f.err}
	if req != nil {
		ce.Request = string(req.Type())
	}
	if m != nil {
		ce.Model = m.key
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.replaceLocked(s, w)
	switch {
	case p.closed:
		return fmt.Errorf("%w: %w", ErrClosed, ce)
	case f.canceled:
		return fmt.Errorf("supervise: request abandoned, worker %s killed: %w", w.id, f.err)
	}
	s.lastCrash = &CrashInfo{Time: ce.Time, Stage: ce.Stage, Reason: crashReason(ce)}
	p.crashes[ce.Stage]++
	q := p.budget.record(ce.Model, m != nil, ce.Time, ce)
	p.log.Warn("worker crashed", "worker", w.id, "pid", w.pid, "stage", ce.Stage, "reason", s.lastCrash.Reason)
	if q != nil {
		p.log.Error("model quarantined", "model", q.Model.String(), "crashes", q.Crashes)
	}
	return ce
}

// crashReason is a one-line reason for Health.
func crashReason(ce *CrashError) string {
	var exit string
	switch {
	case ce.Signal != "":
		exit = "killed by " + ce.Signal
	case ce.ExitStatus >= 0:
		exit = fmt.Sprintf("exit status %d", ce.ExitStatus)
	default:
		exit = "exit unknown"
	}
	if ce.Err != nil {
		return exit + ": " + ce.Err.Error()
	}
	return exit
}

// finishWorker kills and reaps w, waiting at most reapWait; cleanup that
// takes longer continues in a goroutine the pool waits for on Close.
func (p *Pool) finishWorker(w *worker) {
	if w.finish(reapWait) {
		return
	}
	p.log.Warn("worker not reaped after SIGKILL; cleaning up in the background", "worker", w.id, "pid", w.pid)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		w.finish(0)
	}()
}
