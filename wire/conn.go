package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// bufSize is the size of a Conn's read and write buffers.
const bufSize = 64 << 10

// maxKeptBuf is the largest control-frame buffer a Conn keeps for reuse.
const maxKeptBuf = 1 << 20

// Conn reads and writes protocol messages on one worker socket.
//
// One goroutine may Send while another Recvs, but Send is not safe for
// concurrent use, nor is Recv. Conn does not close rw; its owner does.
type Conn struct {
	max atomic.Uint32

	r    *bufio.Reader
	hdr  [frameHeaderLen]byte // length prefix being read
	rbuf []byte               // reused control-frame buffer
	rerr error                // sticky receive error

	w    *bufio.Writer
	wbuf bytes.Buffer // reused control-frame encoding
	enc  *json.Encoder
	werr error // sticky send error: the stream is broken mid-message
}

// NewConn returns a Conn on rw that accepts frames up to DefaultMaxFrame
// until SetMaxFrame changes the limit.
func NewConn(rw io.ReadWriter) *Conn {
	c := &Conn{
		r: bufio.NewReaderSize(rw, bufSize),
		w: bufio.NewWriterSize(rw, bufSize),
	}
	c.max.Store(DefaultMaxFrame)
	c.enc = json.NewEncoder(&c.wbuf)
	c.enc.SetEscapeHTML(false)
	return c
}

// SetMaxFrame sets the largest frame payload Send writes and Recv accepts,
// normally the max_frame of HELLO_ACK; 0 restores DefaultMaxFrame. It may be
// called while another goroutine sends or receives.
func (c *Conn) SetMaxFrame(n uint32) {
	if n == 0 {
		n = DefaultMaxFrame
	}
	c.max.Store(n)
}

// MaxFrame returns the current frame limit.
func (c *Conn) MaxFrame() uint32 { return c.max.Load() }

// Send writes m's control frame and, for messages that carry one, its raw
// frame, and flushes. A message whose raw data disagrees with its header
// (len(IDs) ≠ Σ n_tokens, len(Data) ≠ n × dims, ...) is refused with a
// *ProtocolError, and one with a frame over the limit with a
// *FrameTooLargeError; in both cases nothing is written and the Conn stays
// usable. After a write error every later Send returns that error.
//
// Types defined outside this package are sent as their JSON encoding with
// the "type" member added and no raw frame (tests use that to exercise a
// peer's unknown_type handling).
func (c *Conn) Send(m Message) error {
	if c.werr != nil {
		return c.werr
	}
	if m == nil {
		return errors.New("wire: send: nil message")
	}
	payload, err := c.encodeControl(m)
	if err != nil {
		return err
	}
	if err := c.checkSend(m, len(payload)); err != nil {
		return err
	}
	if err := c.write(m, payload); err != nil {
		c.werr = fmt.Errorf("wire: send %s: %w", m.Type(), err)
		return c.werr
	}
	if c.wbuf.Cap() > maxKeptBuf {
		c.wbuf = bytes.Buffer{}
	}
	return nil
}

// encodeControl encodes m as a JSON object with "type" first, into c.wbuf.
func (c *Conn) encodeControl(m Message) ([]byte, error) {
	t := m.Type()
	if t == "" {
		return nil, protoErrorf("send: message %T has an empty type", m)
	}
	c.wbuf.Reset()
	c.wbuf.WriteString(`{"type":`)
	if err := c.enc.Encode(string(t)); err != nil {
		return nil, fmt.Errorf("wire: send %s: %w", t, err)
	}
	c.wbuf.Truncate(c.wbuf.Len() - 1) // Encode's newline
	mark := c.wbuf.Len()
	if err := c.enc.Encode(m); err != nil {
		return nil, fmt.Errorf("wire: send %s: %w", t, err)
	}
	b := c.wbuf.Bytes()
	b = b[:len(b)-1]
	body := b[mark:]
	if len(body) < 2 || body[0] != '{' {
		return nil, protoErrorf("send %s: %T does not encode as a JSON object", t, m)
	}
	if len(body) == 2 { // {}
		b[mark] = '}'
		return b[:mark+1], nil
	}
	b[mark] = ','
	return b, nil
}

// checkSend validates m's raw data against its header and both frames
// against the frame limit.
func (c *Conn) checkSend(m Message, controlLen int) error {
	max := c.MaxFrame()
	if uint64(controlLen) > uint64(max) {
		return &FrameTooLargeError{Len: clampU32(controlLen), Max: max}
	}
	want, ok, err := rawCount(m)
	if err != nil {
		return &ProtocolError{Msg: "send " + string(m.Type()), Err: err}
	}
	if !ok {
		return nil
	}
	have := rawLen(m.(framed))
	if want >= 0 && int64(have) != want {
		return protoErrorf("send %s: raw data has %d values; header announces %d", m.Type(), have, want)
	}
	if uint64(have)*4 > uint64(max) {
		return &FrameTooLargeError{Len: clampU32(have * 4), Max: max}
	}
	if c, ok := m.(rawChecked); ok {
		return c.checkRaw()
	}
	return nil
}

func clampU32(n int) uint32 {
	if uint64(n) > 1<<32-1 {
		return 1<<32 - 1
	}
	return uint32(n)
}

// write writes the control frame, the raw frame if any, and flushes.
func (c *Conn) write(m Message, payload []byte) error {
	if err := writeFrame(c.w, payload); err != nil {
		return err
	}
	if f, ok := m.(framed); ok {
		if err := sendRaw(c.w, f); err != nil {
			return err
		}
	}
	return c.w.Flush()
}

// Recv reads the next message: its control frame and, for types that carry
// one, its raw frame, whose length is checked against the header before it
// is allocated. The returned message and its slices belong to the caller.
//
// Errors: io.EOF if the stream ends between messages; io.ErrUnexpectedEOF
// if it ends inside one; *FrameTooLargeError; *ProtocolError for a frame
// that breaks the protocol; *UnknownTypeError for a well-formed frame of a
// type this package does not know. After *UnknownTypeError the frame has been
// consumed and Recv may be called again; after any other error the stream
// position is lost and every later Recv returns the same error.
func (c *Conn) Recv() (Message, error) {
	if c.rerr != nil {
		return nil, c.rerr
	}
	m, err := c.recv()
	if err != nil {
		var ue *UnknownTypeError
		if !errors.As(err, &ue) {
			c.rerr = err
		}
		return nil, err
	}
	return m, nil
}

func (c *Conn) recv() (Message, error) {
	max := c.MaxFrame()
	buf, err := readFrameInto(c.r, max, &c.hdr, c.rbuf)
	if err != nil {
		return nil, err
	}
	if cap(buf) <= maxKeptBuf {
		c.rbuf = buf[:0]
	}
	m, err := decodeControl(buf)
	if err != nil {
		return nil, err
	}
	if f, ok := m.(framed); ok {
		want, _ := f.rawCount() // validated by decodeControl
		if err := recvRaw(c.r, max, &c.hdr, f, want); err != nil {
			return nil, err
		}
	}
	return m, nil
}
