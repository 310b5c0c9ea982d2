package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// Handshake opens a worker's side of a connection (protocol v1):
//
//	worker                               module
//	  HELLO{v, nonce, engine, pid, max_frame} ──▶
//	  ◀── HELLO_ACK{v, accept: true, max_frame}
//
// It sends HELLO with the connection's current max frame, waits for
// HELLO_ACK and adopts the negotiated max frame (never above its own). A
// refusal, another protocol version, any other message or the end of the
// stream is an error.
func Handshake(conn *wire.Conn, nonce string, info wire.EngineInfo, extensions []string) error {
	ours := conn.MaxFrame()
	hello := &wire.Hello{V: wire.Version, Nonce: nonce, Engine: info, PID: os.Getpid(), MaxFrame: ours, Extensions: extensions}
	if err := conn.Send(hello); err != nil {
		return fmt.Errorf("engine: handshake: %w", err)
	}
	msg, err := conn.Recv()
	if errors.Is(err, io.EOF) {
		return errors.New("engine: handshake: module closed the connection before HELLO_ACK (nonce refused?)")
	}
	if err != nil {
		return fmt.Errorf("engine: handshake: %w", err)
	}
	ack, ok := msg.(*wire.HelloAck)
	switch {
	case !ok:
		return fmt.Errorf("engine: handshake: %w", &wire.ProtocolError{Msg: fmt.Sprintf("got %s before HELLO_ACK", msg.Type())})
	case ack.V != wire.Version:
		return fmt.Errorf("engine: handshake: module speaks protocol v%d; this worker speaks v%d", ack.V, wire.Version)
	case !ack.Accept:
		return errors.New("engine: handshake: module refused this worker (accept: false)")
	}
	if ack.MaxFrame > 0 && ack.MaxFrame < ours {
		conn.SetMaxFrame(ack.MaxFrame)
	}
	return nil
}

// ServeOptions configures Serve.
type ServeOptions struct {
	Log   *slog.Logger   // nil: discard
	Chaos Chaos          // fault drills (SYNAPSE_CHAOS)
	Exit  func(code int) // exit-after drill; nil: os.Exit
	Abort func()         // abort-on-token drill; nil: Abort
	Hang  func()         // hang-on-token drill; nil: Hang
}

// Serve answers requests on conn with eng strictly one at a time, after
// Handshake. It returns nil after SHUTDOWN (the current request is finished
// first, since requests are not read ahead) or when the module closes the
// connection between frames, and an error for a protocol violation, a
// connection that ends inside a frame or a failed send. A request of a type
// it does not know is answered with ERR{code: unknown_type} and serving goes
// on; a message that is not a request (HELLO, a response) is a violation.
func Serve(ctx context.Context, conn *wire.Conn, eng Engine, opts ServeOptions) error {
	s := server{conn: conn, eng: eng, opts: opts}
	if s.opts.Log == nil {
		s.opts.Log = slog.New(slog.DiscardHandler)
	}
	for {
		msg, err := conn.Recv()
		var ut *wire.UnknownTypeError
		switch {
		case errors.As(err, &ut):
			s.opts.Log.Warn("unknown request type", "type", ut.Type, "req_id", ut.ReqID)
			if err := s.send(&wire.Err{ReqID: ut.ReqID, Code: wire.CodeUnknownType, Msg: fmt.Sprintf("unknown message type %q", ut.Type)}); err != nil {
				return err
			}
			continue
		case errors.Is(err, io.EOF):
			s.opts.Log.Info("module closed the connection")
			return nil
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("engine: serve: %w", err)
		}
		if _, ok := msg.(*wire.Shutdown); ok {
			s.opts.Log.Info("shutdown requested", "served", s.served)
			return nil
		}
		if err := s.serveOne(ctx, msg); err != nil {
			return err
		}
	}
}

type server struct {
	conn   *wire.Conn
	eng    Engine
	opts   ServeOptions
	served int
}

// serveOne runs the drills, answers one request and sends the answer.
func (s *server) serveOne(ctx context.Context, msg wire.Message) error {
	s.drillBefore(msg)
	start := time.Now()
	resp, err := s.handle(ctx, msg)
	if err != nil {
		return err
	}
	if err := s.send(resp); err != nil {
		return err
	}
	s.served++
	s.opts.Log.Debug("request served", "type", msg.Type(), "answer", resp.Type(), "ms", time.Since(start).Milliseconds())
	if s.opts.Chaos.ExitAfter > 0 && s.served >= s.opts.Chaos.ExitAfter {
		s.opts.Log.Warn("chaos: exit-after reached; exiting 1", "served", s.served)
		s.exit(1)
	}
	return nil
}

// send writes an answer; one too large for the negotiated frame becomes an ERR.
func (s *server) send(m wire.Message) error {
	err := s.conn.Send(m)
	var tl *wire.FrameTooLargeError
	if errors.As(err, &tl) {
		id := uint64(0)
		if r, ok := m.(interface{ RequestID() uint64 }); ok {
			id = r.RequestID()
		}
		err = s.conn.Send(&wire.Err{ReqID: id, Code: wire.CodeBadRequest,
			Msg: fmt.Sprintf("answer of %d bytes exceeds max_frame %d; send smaller batches", tl.Len, tl.Max)})
	}
	if err != nil {
		return fmt.Errorf("engine: serve: %w", err)
	}
	return nil
}

func (s *server) exit(code int) {
	if s.opts.Exit != nil {
		s.opts.Exit(code)
		return
	}
	os.Exit(code)
}

// drillBefore runs the delay, abort and hang drills for a request.
func (s *server) drillBefore(msg wire.Message) {
	c := s.opts.Chaos
	if !c.Active() {
		return
	}
	if c.Delay > 0 {
		time.Sleep(c.Delay)
	}
	ids := requestIDs(msg)
	if holds(ids, c.AbortOnToken) {
		s.opts.Log.Warn("chaos: abort-on-token", "token", *c.AbortOnToken)
		call(s.opts.Abort, Abort)
	}
	if holds(ids, c.HangOnToken) {
		s.opts.Log.Warn("chaos: hang-on-token", "token", *c.HangOnToken)
		call(s.opts.Hang, Hang)
	}
	if t := string(msg.Type()); t == c.AbortOnType {
		s.opts.Log.Warn("chaos: abort-on-type", "type", t)
		call(s.opts.Abort, Abort)
	} else if t == c.HangOnType {
		s.opts.Log.Warn("chaos: hang-on-type", "type", t)
		call(s.opts.Hang, Hang)
	}
}

func call(f, def func()) {
	if f != nil {
		f()
		return
	}
	def()
}

// requestIDs returns the token ids a request carries.
func requestIDs(msg wire.Message) []int32 {
	if r, ok := msg.(wire.TokenRequest); ok {
		return r.TokenIDs()
	}
	return nil
}
