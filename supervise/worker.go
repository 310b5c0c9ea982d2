package supervise

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// Bounds on cleanup in the request path: how long a SIGKILLed worker may
// take to be reaped, and how long its pipes may stay open after that (a
// grandchild holding them) before they are closed, so a failing call
// returns promptly. Cleanup that outlasts them continues in the background.
const (
	reapWait  = 2 * time.Second
	drainWait = 500 * time.Millisecond
)

// crashTailBytes is how much worker output a CrashError carries.
const crashTailBytes = 8 << 10

// worker is one generation of a worker process: the process, its socket
// and the goroutines that watch them.
type worker struct {
	id   string
	proc Process
	pid  int

	mu sync.Mutex
	nc *net.UnixConn // nil until accepted

	conn   *wire.Conn // set by the handshake
	hello  *wire.Hello
	reqID  uint64
	killed atomic.Bool

	exited  chan struct{} // closed after the process was reaped and the socket unblocked
	exit    Exit          // valid after exited
	drained chan struct{} // closed when stdout and stderr hit EOF or were closed
	pending atomic.Int32  // drain goroutines still running
}

// newNonce returns 128 random bits in hex.
func newNonce() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("supervise: crypto/rand: " + err.Error()) // never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// spawn launches the worker command for slot s with a fresh nonce and starts
// the goroutines that drain its output and watch its exit.
func (p *Pool) spawn(s *slot, nonce string) (*worker, error) {
	args := append(append([]string(nil), p.cfg.Command[1:]...), "--socket", s.path, "--nonce", nonce)
	base := p.cfg.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	env := append(append(slices.Clip(base), p.cfg.Env...), "SYNAPSE_WORKER_ID="+s.id)
	proc, err := p.sp.launch(p.cfg.Launcher, Spec{Path: p.cfg.Command[0], Args: args, Env: env})
	if err != nil {
		return nil, err
	}
	w := &worker{id: s.id, proc: proc, pid: proc.PID(), exited: make(chan struct{}), drained: make(chan struct{})}
	w.pending.Store(2)
	go w.drain(proc.Stdout(), p, "stdout")
	go w.drain(proc.Stderr(), p, "stderr")
	go w.watch()
	return w, nil
}

func (w *worker) drain(r io.Reader, p *Pool, stream string) {
	drain(r, p.ring, w.id, stream, p.log, p.now)
	if w.pending.Add(-1) == 0 {
		close(w.drained)
	}
}

// exitGrace is how long a read may still take after the worker process
// exited on its own. Its end of the socket is closed, so a read returns
// what the worker sent before it exited, then EOF; a deadline in the past
// would drop that answer (an exit right after answering, as exit-after
// drills do, lost its last answer to "i/o timeout"). The grace only
// matters if something else still holds the worker's end open.
const exitGrace = time.Second

// watch waits for the process to exit and unblocks any socket read, after
// the answers the worker sent before it exited are read.
func (w *worker) watch() {
	w.exit = w.proc.Wait()
	w.mu.Lock()
	if w.nc != nil {
		w.nc.SetDeadline(time.Now().Add(exitGrace))
	}
	w.mu.Unlock()
	close(w.exited)
}

// setConn records the accepted socket; if the process already exited, the
// socket is unblocked at once.
func (w *worker) setConn(nc *net.UnixConn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nc = nc
	select {
	case <-w.exited:
		nc.SetDeadline(time.Now().Add(exitGrace))
	default:
	}
}

// kill SIGKILLs the process and unblocks the socket. Safe to call twice.
func (w *worker) kill() {
	w.killed.Store(true)
	w.proc.Kill()
	w.mu.Lock()
	if w.nc != nil {
		w.nc.SetDeadline(time.Unix(1, 0))
	}
	w.mu.Unlock()
}

// alive reports whether the worker can take another request.
func (w *worker) alive() bool {
	if w.killed.Load() {
		return false
	}
	select {
	case <-w.exited:
		return false
	default:
		return true
	}
}

// finish kills the worker and waits, at most bound (0 = no bound), until
// it is reaped and its output drained, then closes the socket and pipes.
// It reports whether everything finished.
func (w *worker) finish(bound time.Duration) bool {
	w.kill()
	var timeout <-chan time.Time
	if bound > 0 {
		t := time.NewTimer(bound)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-w.exited:
	case <-timeout:
		return false
	}
	dt := time.NewTimer(drainWait)
	defer dt.Stop()
	select {
	case <-w.drained:
	case <-dt.C: // a grandchild holds the pipes: stop reading them
		w.proc.Stdout().Close()
		w.proc.Stderr().Close()
		<-w.drained
	}
	w.proc.Stdout().Close()
	w.proc.Stderr().Close()
	w.mu.Lock()
	if w.nc != nil {
		w.nc.Close()
	}
	w.mu.Unlock()
	return true
}

// exitInfo returns the exit status and signal, or (-1, "") if the process
// has not been reaped.
func (w *worker) exitInfo() (int, string) {
	select {
	case <-w.exited:
		return w.exit.Status, w.exit.Signal
	default:
		return -1, ""
	}
}

// acceptConn accepts the worker's connection on ln before deadline, giving
// up early if the process exits or ctx ends.
func acceptConn(ctx context.Context, ln *net.UnixListener, deadline time.Time, exited <-chan struct{}) (*net.UnixConn, error) {
	if err := ln.SetDeadline(deadline); err != nil {
		return nil, err
	}
	type result struct {
		c   *net.UnixConn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := ln.AcceptUnix()
		ch <- result{c, err}
	}()
	var why error
	select {
	case r := <-ch:
		if r.err != nil && errors.Is(r.err, os.ErrDeadlineExceeded) {
			return nil, ErrStartTimeout
		}
		return r.c, r.err
	case <-exited:
		why = ErrExited
	case <-ctx.Done():
		why = ctx.Err()
	}
	ln.SetDeadline(time.Unix(1, 0))
	if r := <-ch; r.c != nil {
		r.c.Close()
	}
	return nil, why
}
