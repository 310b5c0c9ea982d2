package supervise

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// startWorker spawns a worker for slot s, accepts its connection and runs
// the handshake, all within Config.StartTimeout. On any failure the child
// is killed and reaped and a *StartError returned.
func (p *Pool) startWorker(ctx context.Context, s *slot) (*worker, error) {
	discardBacklog(s.ln)
	nonce := newNonce()
	w, err := p.spawn(s, nonce)
	if err != nil {
		return nil, &StartError{WorkerID: s.id, Stage: "spawn", ExitStatus: -1, Err: err}
	}
	deadline := time.Now().Add(p.cfg.StartTimeout)
	nc, err := acceptConn(ctx, s.ln, deadline, w.exited)
	if err != nil {
		return nil, p.startFailed(w, "accept", err)
	}
	w.setConn(nc)
	if err := p.handshake(ctx, w, nc, nonce, deadline); err != nil {
		return nil, p.startFailed(w, "handshake", err)
	}
	p.log.Debug("worker started", "worker", w.id, "pid", w.pid, "engine", w.hello.Engine.Name,
		"engine_version", w.hello.Engine.Version, "max_frame", w.conn.MaxFrame())
	return w, nil
}

// startFailed kills and reaps a worker that did not start and describes it.
func (p *Pool) startFailed(w *worker, stage string, err error) *StartError {
	p.finishWorker(w)
	status, sig := w.exitInfo()
	return &StartError{WorkerID: w.id, PID: w.pid, Stage: stage, ExitStatus: status, Signal: sig,
		LogTail: p.ring.CrashTail(w.id, crashTailBytes), Err: err}
}

// handshake reads HELLO, checks version and nonce and answers HELLO_ACK with
// the smaller of both frame limits. Anything else is refused: the caller
// closes the socket and kills the worker.
func (p *Pool) handshake(ctx context.Context, w *worker, nc *net.UnixConn, nonce string, deadline time.Time) error {
	if err := nc.SetDeadline(deadline); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	conn := wire.NewConn(nc)
	m, err := conn.Recv()
	if err != nil {
		return handshakeRecvError(ctx, w, err)
	}
	hello, ok := m.(*wire.Hello)
	if !ok {
		return fmt.Errorf("%w: first message is %s, want HELLO", ErrProtocol, m.Type())
	}
	if hello.V != wire.Version {
		return fmt.Errorf("%w: worker speaks v%d, module v%d", ErrVersion, hello.V, wire.Version)
	}
	if subtle.ConstantTimeCompare([]byte(hello.Nonce), []byte(nonce)) != 1 {
		return fmt.Errorf("%w: HELLO nonce is not the spawn nonce (stale worker?)", ErrNonce)
	}
	max := p.cfg.MaxFrame
	if hello.MaxFrame != 0 && hello.MaxFrame < max {
		max = hello.MaxFrame
	}
	if err := conn.Send(&wire.HelloAck{V: wire.Version, Accept: true, MaxFrame: max}); err != nil {
		return fmt.Errorf("send HELLO_ACK: %w", err)
	}
	conn.SetMaxFrame(max)
	w.mu.Lock()
	select {
	case <-w.exited: // keep the deadline the watcher set
	default:
		nc.SetDeadline(time.Time{})
	}
	w.mu.Unlock()
	w.conn, w.hello = conn, hello
	return nil
}

// handshakeRecvError classifies a failure to read HELLO.
func handshakeRecvError(ctx context.Context, w *worker, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	exited := false
	select {
	case <-w.exited:
		exited = true
	default:
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && exited:
		return ErrExited
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ErrStartTimeout
	case exited:
		return fmt.Errorf("%w before HELLO: %w", ErrExited, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: connection closed before HELLO: %w", ErrProtocol, err)
	}
	return fmt.Errorf("%w: %w", ErrProtocol, err)
}
