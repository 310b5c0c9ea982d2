package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
)

// frame returns payload as one frame.
func frame(payload []byte) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

// jsonFrame returns a control frame holding s.
func jsonFrame(s string) []byte { return frame([]byte(s)) }

// idsFrame returns a raw frame of little-endian i32 values.
func idsFrame(ids ...int32) []byte {
	var b []byte
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
	}
	return frame(b)
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// hugeLenReader announces a 4 GiB - 1 frame and fails the test if anything
// reads past the length prefix.
type hugeLenReader struct {
	t    *testing.T
	sent bool
}

func (r *hugeLenReader) Read(p []byte) (int, error) {
	if r.sent {
		r.t.Error("read past an oversized length prefix")
		return 0, io.ErrUnexpectedEOF
	}
	r.sent = true
	return copy(p, []byte{0xff, 0xff, 0xff, 0xff}), nil
}

func TestReadFrameTooLarge(t *testing.T) {
	r := &hugeLenReader{t: t}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadFrame(r, DefaultMaxFrame)
	runtime.ReadMemStats(&after)
	var fe *FrameTooLargeError
	if !errors.As(err, &fe) || fe.Len != math.MaxUint32 || fe.Max != DefaultMaxFrame {
		t.Fatalf("ReadFrame: got %v; want *FrameTooLargeError{Len: %d, Max: %d}", err, uint32(math.MaxUint32), DefaultMaxFrame)
	}
	// Only small things (the error, the length prefix, runtime noise); a
	// payload buffer would show as 4 GiB.
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Errorf("ReadFrame allocated %d bytes before refusing; want ≤ 64 KiB", n)
	}

	c := NewConn(struct {
		io.Reader
		io.Writer
	}{&hugeLenReader{t: t}, io.Discard})
	if _, err := c.Recv(); !errors.As(err, &fe) {
		t.Errorf("Recv: got %v; want *FrameTooLargeError", err)
	}
}

func TestReadFrameEOF(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		max     uint32
		want    [][]byte // frames read before the error
		wantErr error
	}{
		{"empty stream", nil, 16, nil, io.EOF},
		{"between frames", concat(frame([]byte("ab")), frame(nil)), 16, [][]byte{[]byte("ab"), {}}, io.EOF},
		{"inside length prefix", []byte{3, 0}, 16, nil, io.ErrUnexpectedEOF},
		{"inside payload", concat(frame([]byte("ab")), []byte{5, 0, 0, 0, 'x'}), 16, [][]byte{[]byte("ab")}, io.ErrUnexpectedEOF},
		{"payload missing", []byte{5, 0, 0, 0}, 16, nil, io.ErrUnexpectedEOF},
		{"at the limit", frame([]byte("abcd")), 4, [][]byte{[]byte("abcd")}, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bytes.NewReader(tt.in)
			for i, want := range tt.want {
				got, err := ReadFrame(r, tt.max)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("frame %d: got %q, %v; want %q", i, got, err, want)
				}
			}
			if got, err := ReadFrame(r, tt.max); err != tt.wantErr {
				t.Errorf("got %q, %v; want %v", got, err, tt.wantErr)
			}
		})
	}
}

func TestWriteFrame(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFrame(&buf, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.Bytes(), []byte{2, 0, 0, 0, 'h', 'i'}; !bytes.Equal(got, want) {
		t.Errorf("got % x; want % x", got, want)
	}
	if err := WriteFrame(failWriter{}, []byte("hi")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("WriteFrame to a failing writer: got %v; want it to wrap os.ErrClosed", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

// TestRecvErrors feeds malformed streams to Recv.
func TestRecvErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		max     uint32
		wantErr any // *ProtocolError, *FrameTooLargeError, or an error value
		text    string
	}{
		{"bad JSON", jsonFrame(`{"type":"PING",`), 0, &ProtocolError{}, "not a JSON object"},
		{"not an object", jsonFrame(`[1,2]`), 0, &ProtocolError{}, "not a JSON object"},
		{"null", jsonFrame(`null`), 0, &ProtocolError{}, "no type"},
		{"missing type", jsonFrame(`{"req_id":1}`), 0, &ProtocolError{}, "no type"},
		{"empty type", jsonFrame(`{"type":""}`), 0, &ProtocolError{}, "empty type"},
		{"type not a string", jsonFrame(`{"type":7}`), 0, &ProtocolError{}, "string type"},
		{"member of wrong kind", jsonFrame(`{"type":"PING","req_id":"1"}`), 0, &ProtocolError{}, "bad PING"},
		{"negative req_id", jsonFrame(`{"type":"PING","req_id":-1}`), 0, &ProtocolError{}, "bad PING"},
		{"max_frame over u32", jsonFrame(`{"type":"HELLO","max_frame":4294967296}`), 0, &ProtocolError{}, "bad HELLO"},
		{"ids frame too short",
			concat(jsonFrame(`{"type":"EMBED_BATCH","items":[{"id":1,"n_tokens":3}]}`), idsFrame(1, 2)), 0,
			&ProtocolError{}, "8 bytes; header announces 3 values"},
		{"ids frame too long",
			concat(jsonFrame(`{"type":"RERANK","query_n_tokens":1,"candidates":[{"n_tokens":1}]}`), idsFrame(1, 2, 3)), 0,
			&ProtocolError{}, "12 bytes; header announces 2 values"},
		{"vectors frame wrong",
			concat(jsonFrame(`{"type":"VECTORS","n":2,"dims":2}`), idsFrame(1, 2, 3)), 0,
			&ProtocolError{}, "header announces 4 values"},
		{"scores frame wrong", concat(jsonFrame(`{"type":"SCORES","n":1}`), idsFrame()), 0, &ProtocolError{}, "header announces 1 values"},
		{"tokens frame wrong", concat(jsonFrame(`{"type":"TOKENS","n":0}`), idsFrame(9)), 0, &ProtocolError{}, "header announces 0 values"},
		{"generate frame not a multiple of 4", concat(jsonFrame(`{"type":"GENERATE"}`), frame([]byte{1, 2, 3})), 0, &ProtocolError{}, "not a multiple of 4"},
		{"negative n_tokens", jsonFrame(`{"type":"EMBED_BATCH","items":[{"id":1,"n_tokens":-1}]}`), 0, &ProtocolError{}, "items[0].n_tokens: negative count"},
		{"negative query_n_tokens", jsonFrame(`{"type":"RERANK","query_n_tokens":-4}`), 0, &ProtocolError{}, "query_n_tokens: negative"},
		{"negative dims", jsonFrame(`{"type":"VECTORS","n":1,"dims":-1}`), 0, &ProtocolError{}, "negative n 1 or dims -1"},
		{"negative n", jsonFrame(`{"type":"TOKENS","n":-1}`), 0, &ProtocolError{}, "negative count"},
		{"n_tokens sum overflows",
			jsonFrame(`{"type":"EMBED_BATCH","items":[{"id":1,"n_tokens":9223372036854775807},{"id":2,"n_tokens":9223372036854775807}]}`), 0,
			&ProtocolError{}, "overflow"},
		{"n_tokens sum over u32",
			jsonFrame(`{"type":"EMBED_BATCH","items":[{"id":1,"n_tokens":1073741823},{"id":2,"n_tokens":1}]}`), 0,
			&ProtocolError{}, "items[1].n_tokens: count 1 makes the raw frame overflow"},
		{"n times dims overflows", jsonFrame(`{"type":"VECTORS","n":4294967296,"dims":4294967296}`), 0, &ProtocolError{}, "overflow"},
		{"negative dims in LOADED", jsonFrame(`{"type":"LOADED","dims":-3}`), 0, &ProtocolError{}, "negative dims"},
		{"raw frame over the limit",
			concat(jsonFrame(`{"type":"VECTORS","n":1,"dims":64}`), []byte{0, 1, 0, 0}), 128,
			&FrameTooLargeError{}, "256 bytes exceeds the maximum of 128"},
		{"control frame over the limit", jsonFrame(strings.Repeat(" ", 200)), 128, &FrameTooLargeError{}, "200 bytes"},
		{"raw frame missing", jsonFrame(`{"type":"TOKENS","n":1}`), 0, io.ErrUnexpectedEOF, ""},
		{"raw frame truncated", concat(jsonFrame(`{"type":"TOKENS","n":2}`), []byte{8, 0, 0, 0, 1}), 0, io.ErrUnexpectedEOF, ""},
		{"control frame truncated", jsonFrame(`{"type":"PING"}`)[:6], 0, io.ErrUnexpectedEOF, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConn(bytes.NewBuffer(tt.in))
			c.SetMaxFrame(tt.max)
			m, err := c.Recv()
			checkErr(t, m, err, tt.wantErr, tt.text)
			// Errors other than unknown types are sticky.
			if m2, err2 := c.Recv(); err2 != err {
				t.Errorf("second Recv: got %v, %v; want the same error %v", m2, err2, err)
			}
		})
	}
}

// checkErr asserts err is of want's kind (or is want) and mentions text.
func checkErr(t *testing.T, m Message, err error, want any, text string) {
	t.Helper()
	switch w := want.(type) {
	case *ProtocolError:
		var pe *ProtocolError
		if !errors.As(err, &pe) {
			t.Fatalf("got %v, %v; want *ProtocolError", m, err)
		}
	case *FrameTooLargeError:
		var fe *FrameTooLargeError
		if !errors.As(err, &fe) {
			t.Fatalf("got %v, %v; want *FrameTooLargeError", m, err)
		}
	case error:
		if err != w {
			t.Fatalf("got %v, %v; want %v", m, err, w)
		}
	}
	if !strings.Contains(fmt.Sprint(err), text) || !strings.HasPrefix(err.Error(), "wire: ") && text != "" {
		t.Errorf("error %q; want the prefix \"wire: \" and %q in it", err, text)
	}
}

// TestUnknownType checks an unknown type leaves the Conn usable.
func TestUnknownType(t *testing.T) {
	in := concat(
		jsonFrame(`{"type":"EMBED_IMAGE","req_id":41,"pixels":[1,2]}`),
		jsonFrame(`{"type":"hello"}`), // names are case-sensitive
		jsonFrame(`{"type":"PING","req_id":42,"future_member":true}`),
	)
	c := NewConn(bytes.NewBuffer(in))
	for _, want := range []UnknownTypeError{{Type: "EMBED_IMAGE", ReqID: 41}, {Type: "hello"}} {
		m, err := c.Recv()
		var ue *UnknownTypeError
		if !errors.As(err, &ue) || *ue != want {
			t.Fatalf("Recv: got %v, %v; want %#v", m, err, want)
		}
		if got := CodeOf(err); got != CodeUnknownType {
			t.Errorf("CodeOf(%v) = %q; want %q", err, got, CodeUnknownType)
		}
	}
	m, err := c.Recv()
	if p, ok := m.(*Ping); err != nil || !ok || p.ReqID != 42 {
		t.Fatalf("Recv after unknown types: got %#v, %v; want PING 42", m, err)
	}
	if _, err := c.Recv(); err != io.EOF {
		t.Errorf("Recv at end: got %v; want io.EOF", err)
	}
}

// custom is a message type this package does not know.
type custom struct {
	ReqID uint64 `json:"req_id"`
}

func (*custom) Type() MsgType { return "EMBED_IMAGE" }

func TestSendUnknownType(t *testing.T) {
	var buf bytes.Buffer
	c := NewConn(&buf)
	if err := c.Send(&custom{ReqID: 9}); err != nil {
		t.Fatal(err)
	}
	var ue *UnknownTypeError
	if _, err := c.Recv(); !errors.As(err, &ue) || ue.ReqID != 9 {
		t.Errorf("Recv: got %v; want *UnknownTypeError with ReqID 9", err)
	}
}

// TestSendRefuses checks Send rejects inconsistent messages and writes
// nothing, leaving the Conn usable.
func TestSendRefuses(t *testing.T) {
	tests := []struct {
		name    string
		m       Message
		max     uint32
		wantErr any
		text    string
	}{
		{"ids shorter than items", &EmbedBatch{Items: []Item{{NTokens: 2}}, IDs: []int32{1}}, 0, &ProtocolError{}, "1 values; header announces 2"},
		{"ids longer than items", &EmbedBatch{Items: []Item{{NTokens: 1}}, IDs: []int32{1, 2}}, 0, &ProtocolError{}, "2 values; header announces 1"},
		{"rerank ids", &Rerank{QueryNTokens: 1, IDs: nil}, 0, &ProtocolError{}, "0 values; header announces 1"},
		{"rerank groups ids", &RerankGroups{Groups: []RerankGroup{{QueryNTokens: 1, Candidates: []Candidate{{NTokens: 2}}}}, IDs: []int32{1}}, 0, &ProtocolError{}, "1 values; header announces 3"},
		{"rerank groups negative", &RerankGroups{Groups: []RerankGroup{{QueryNTokens: -1}}}, 0, &ProtocolError{}, "negative count"},
		{"vectors data", &Vectors{N: 2, Dims: 2, Data: make([]float32, 3)}, 0, &ProtocolError{}, "3 values; header announces 4"},
		{"scores data", &Scores{N: 1}, 0, &ProtocolError{}, "header announces 1"},
		{"tokens ids", &Tokens{N: 0, IDs: []int32{1}}, 0, &ProtocolError{}, "header announces 0"},
		{"negative n_tokens", &EmbedBatch{Items: []Item{{NTokens: -1}}}, 0, &ProtocolError{}, "negative count"},
		{"negative dims", &Vectors{N: 1, Dims: -1}, 0, &ProtocolError{}, "negative"},
		{"n times dims overflows", &Vectors{N: 1 << 31, Dims: 1 << 31}, 0, &ProtocolError{}, "overflow"},
		{"raw frame over the limit", &Generate{IDs: make([]int32, 33)}, 128, &FrameTooLargeError{}, "132 bytes exceeds the maximum of 128"},
		{"control frame over the limit", &Text{Text: strings.Repeat("x", 200)}, 128, &FrameTooLargeError{}, "exceeds the maximum of 128"},
		{"typed nil", (*Ping)(nil), 0, &ProtocolError{}, "does not encode as a JSON object"},
		{"nil", nil, 0, nil, "nil message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			c := NewConn(&buf)
			c.SetMaxFrame(tt.max)
			err := c.Send(tt.m)
			if err == nil {
				t.Fatalf("Send: got nil error; want one")
			}
			checkErr(t, nil, err, tt.wantErr, tt.text)
			if buf.Len() != 0 {
				t.Errorf("Send wrote %d bytes; want 0", buf.Len())
			}
			if err := c.Send(&Ping{ReqID: 1}); err != nil {
				t.Errorf("Send after a refused message: %v", err)
			}
		})
	}
}

// TestSendWriteError checks a failed write is sticky and wrapped.
func TestSendWriteError(t *testing.T) {
	c := NewConn(struct {
		io.Reader
		io.Writer
	}{bytes.NewReader(nil), failWriter{}})
	err := c.Send(&Ping{ReqID: 1})
	if !errors.Is(err, os.ErrClosed) || !strings.HasPrefix(err.Error(), "wire: send PING: ") {
		t.Fatalf("Send: got %v; want \"wire: send PING: ...\" wrapping os.ErrClosed", err)
	}
	if err2 := c.Send(&Ping{ReqID: 2}); err2 != err {
		t.Errorf("second Send: got %v; want the same error", err2)
	}
}

func TestErrors(t *testing.T) {
	cause := os.ErrNotExist
	e := Errorf(CodeArtifactInvalid, "open %s: %w", "/m.gguf", cause)
	if got, want := e.Error(), "wire: artifact_invalid: open /m.gguf: file does not exist"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
	if !errors.Is(e, os.ErrNotExist) {
		t.Errorf("errors.Is(%v, os.ErrNotExist) = false; want true", e)
	}
	if plain := Errorf(CodeOOM, "no memory"); plain.Unwrap() != nil {
		t.Errorf("Errorf without %%w: Unwrap() = %v; want nil", plain.Unwrap())
	}
	wrapped := fmt.Errorf("engine: load: %w", e)
	codes := []struct {
		err  error
		want Code
	}{
		{nil, ""},
		{wrapped, CodeArtifactInvalid},
		{(&Err{ReqID: 3, Code: CodeModelNotLoaded, Msg: "m9"}).AsError(), CodeModelNotLoaded},
		{&UnknownTypeError{Type: "X"}, CodeUnknownType},
		{&ProtocolError{Msg: "x"}, CodeInternal},
		{io.EOF, CodeInternal},
	}
	for _, tt := range codes {
		if got := CodeOf(tt.err); got != tt.want {
			t.Errorf("CodeOf(%v) = %q; want %q", tt.err, got, tt.want)
		}
	}
	as := (&Err{ReqID: 3, Code: CodeOOM, Msg: "kv cache"}).AsError()
	if *as != (Error{Code: CodeOOM, Msg: "kv cache", ReqID: 3}) {
		t.Errorf("AsError() = %#v", as)
	}
	var pe *ProtocolError
	if errors.As(as, &pe) {
		t.Errorf("a reported *Error is also a *ProtocolError; want them apart")
	}
	p := &ProtocolError{Msg: "bad PING", Err: io.ErrShortBuffer}
	if !errors.Is(p, io.ErrShortBuffer) || p.Error() != "wire: protocol violation: bad PING: short buffer" {
		t.Errorf("ProtocolError: %q, Is(ErrShortBuffer)=%v", p, errors.Is(p, io.ErrShortBuffer))
	}
	var we *Error
	if errors.As(p, &we) {
		t.Errorf("a *ProtocolError is also an *Error; want them apart")
	}
}

func TestSetMaxFrame(t *testing.T) {
	c := NewConn(new(bytes.Buffer))
	if got := c.MaxFrame(); got != DefaultMaxFrame {
		t.Errorf("MaxFrame() = %d; want %d", got, DefaultMaxFrame)
	}
	c.SetMaxFrame(1024)
	if got := c.MaxFrame(); got != 1024 {
		t.Errorf("MaxFrame() = %d; want 1024", got)
	}
	c.SetMaxFrame(0)
	if got := c.MaxFrame(); got != DefaultMaxFrame {
		t.Errorf("after SetMaxFrame(0): MaxFrame() = %d; want %d", got, DefaultMaxFrame)
	}
}
