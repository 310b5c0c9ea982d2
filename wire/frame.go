package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Version is the protocol version byte carried in HELLO and HELLO_ACK.
const Version = 1

// DefaultMaxFrame is the largest frame payload a Conn accepts until the
// handshake negotiates another maximum (64 MiB).
const DefaultMaxFrame uint32 = 64 << 20

// frameHeaderLen is the size of a frame's length prefix.
const frameHeaderLen = 4

// FrameTooLargeError reports a frame whose length prefix exceeds the
// negotiated maximum. It is returned before the payload is allocated or read.
type FrameTooLargeError struct {
	Len uint32 // length announced by the prefix (or of the payload to send)
	Max uint32 // negotiated maximum
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("wire: frame of %d bytes exceeds the maximum of %d", e.Len, e.Max)
}

// WriteFrame writes payload as one frame: a u32 little-endian length followed
// by the payload. It does not check a negotiated maximum; Conn.Send does.
func WriteFrame(w io.Writer, payload []byte) error {
	if err := writeFrame(w, payload); err != nil {
		return fmt.Errorf("wire: write frame: %w", err)
	}
	return nil
}

// writeFrame is WriteFrame without the error prefix.
func writeFrame(w io.Writer, payload []byte) error {
	if uint64(len(payload)) > math.MaxUint32 {
		return fmt.Errorf("payload of %d bytes does not fit a u32 length", len(payload))
	}
	var hdr [frameHeaderLen]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(len(payload)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// ReadFrame reads one frame and returns its payload in a new slice.
//
// A length above max yields *FrameTooLargeError before anything is
// allocated. A stream that ends cleanly before the frame returns io.EOF; one
// that ends inside the frame (length prefix or payload) returns
// io.ErrUnexpectedEOF. Other read errors are wrapped.
func ReadFrame(r io.Reader, max uint32) ([]byte, error) {
	var hdr [frameHeaderLen]byte
	return readFrameInto(r, max, &hdr, nil)
}

// readFrameInto is ReadFrame reading the prefix into hdr and reusing buf's
// capacity when it is large enough.
func readFrameInto(r io.Reader, max uint32, hdr *[frameHeaderLen]byte, buf []byte) ([]byte, error) {
	n, err := readFrameLen(r, max, hdr)
	if err != nil {
		return nil, err
	}
	if uint32(cap(buf)) >= n {
		buf = buf[:n]
	} else {
		buf = make([]byte, n)
	}
	if err := readPayload(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// readFrameLen reads a length prefix into hdr and checks it against max.
func readFrameLen(r io.Reader, max uint32, hdr *[frameHeaderLen]byte) (uint32, error) {
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return 0, err
		}
		return 0, fmt.Errorf("wire: read frame: %w", err)
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > max {
		return 0, &FrameTooLargeError{Len: n, Max: max}
	}
	return n, nil
}

// readPayload fills buf from r; any end of stream is unexpected, since a
// length prefix has already announced the payload.
func readPayload(r io.Reader, buf []byte) error {
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		if err == io.ErrUnexpectedEOF {
			return err
		}
		return fmt.Errorf("wire: read frame: %w", err)
	}
	return nil
}
