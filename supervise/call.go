package supervise

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// failure is a call that cost the worker: it must be killed and restarted.
type failure struct {
	stage    string // "timeout", "send", "recv", "protocol"
	err      error
	canceled bool // the caller canceled; not the engine's fault
}

func (f *failure) Error() string { return f.stage + ": " + f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// call sends req, which carries the worker's next req_id, and waits for its
// answer until ctx ends or timeout (0 = none) passes, whichever is first;
// then the worker is SIGKILLed, which unblocks the socket at once. It
// returns the answer, a *wire.Error the worker reported (the worker stays
// usable), or a *failure.
func (w *worker) call(ctx context.Context, req wire.Message, timeout time.Duration) (wire.Message, error) {
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	stop := context.AfterFunc(cctx, w.kill)
	resp, stage, err := w.exchange(req)
	fired := !stop()
	switch {
	case err == nil:
		return resp, nil // if fired, the worker is dead now but the answer is good
	case stage == "":
		return nil, err // *wire.Error or a refused request
	case fired && errors.Is(ctx.Err(), context.Canceled):
		return nil, &failure{stage: stage, err: ctx.Err(), canceled: true}
	case fired:
		return nil, &failure{stage: "timeout", err: context.DeadlineExceeded}
	}
	return nil, &failure{stage: stage, err: err}
}

// exchange writes req and reads its answer. stage is "" with a nil error,
// a *wire.Error, or a request Send refused without writing (too large,
// inconsistent); else it says where the exchange failed.
func (w *worker) exchange(req wire.Message) (resp wire.Message, stage string, err error) {
	if err := w.conn.Send(req); err != nil {
		var fe *wire.FrameTooLargeError
		var pe *wire.ProtocolError
		if errors.As(err, &fe) || errors.As(err, &pe) {
			return nil, "", err // refused before writing: the caller's bug, the worker is fine
		}
		return nil, "send", err
	}
	m, err := w.conn.Recv()
	if err != nil {
		var fe *wire.FrameTooLargeError
		var pe *wire.ProtocolError
		var ue *wire.UnknownTypeError
		if errors.As(err, &fe) || errors.As(err, &pe) || errors.As(err, &ue) {
			return nil, "protocol", fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		return nil, "recv", err
	}
	id := requestID(req)
	if got := requestID(m); got != id {
		return nil, "protocol", fmt.Errorf("%w: answer %s has req_id %d; want %d", ErrProtocol, m.Type(), got, id)
	}
	if e, ok := m.(*wire.Err); ok {
		return nil, "", e.AsError()
	}
	if r, ok := req.(wire.Request); ok && m.Type() != r.ReplyType() {
		return nil, "protocol", fmt.Errorf("%w: %s answered with %s; want %s", ErrProtocol, req.Type(), m.Type(), r.ReplyType())
	}
	return m, "", nil
}

// nextID returns the worker's next req_id.
func (w *worker) nextID() uint64 {
	w.reqID++
	return w.reqID
}
