package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// fuzzMaxFrame keeps a fuzzed length prefix from allocating much per input.
const fuzzMaxFrame = 1 << 16

// FuzzReadFrame checks ReadFrame against the frame layout on arbitrary
// streams: every frame it returns re-encodes to the bytes it consumed, and
// every error is the one the remaining bytes call for.
func FuzzReadFrame(f *testing.F) {
	f.Add(concat(frame([]byte("hello")), frame(nil)), uint32(16)) // valid: two frames, the second empty
	f.Add([]byte{5, 0, 0, 0, 'a', 'b'}, uint32(16))               // truncated inside the payload
	f.Add([]byte{5, 0}, uint32(16))                               // truncated inside the length prefix
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint32(1<<16-1))        // over the limit: 4 GiB - 1 announced
	f.Add(frame([]byte("abcd")), uint32(4))                       // exactly at the limit
	f.Add(jsonFrame(`{"type":"PING","req_id":1}`), uint32(0))     // a control frame with a zero limit
	f.Fuzz(func(t *testing.T, data []byte, max uint32) {
		max %= fuzzMaxFrame
		r := bytes.NewReader(data)
		for {
			off := len(data) - r.Len()
			rest := data[off:]
			p, err := ReadFrame(r, max)
			switch {
			case err == nil:
				consumed := data[off : len(data)-r.Len()]
				var buf bytes.Buffer
				if err := WriteFrame(&buf, p); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf.Bytes(), consumed) {
					t.Fatalf("frame re-encodes to % x; consumed % x", buf.Bytes(), consumed)
				}
				continue
			case err == io.EOF:
				if len(rest) != 0 {
					t.Fatalf("io.EOF with %d bytes left", len(rest))
				}
			case err == io.ErrUnexpectedEOF:
				if len(rest) >= 4 && uint64(len(rest)) >= 4+uint64(binary.LittleEndian.Uint32(rest)) {
					t.Fatalf("io.ErrUnexpectedEOF with a whole frame left: % x", rest)
				}
			default:
				var fe *FrameTooLargeError
				if !errors.As(err, &fe) || fe.Max != max || fe.Len <= max || fe.Len != binary.LittleEndian.Uint32(rest) {
					t.Fatalf("unexpected error %v (max %d, rest % x)", err, max, rest)
				}
			}
			return
		}
	})
}

// FuzzRecv feeds arbitrary streams to Conn.Recv. Every message it returns
// must survive Send→Recv unchanged and re-encode to the same bytes
// (decode→encode→decode), and errors must be sticky except
// *UnknownTypeError.
func FuzzRecv(f *testing.F) {
	// Valid: every message type in one stream.
	var all bytes.Buffer
	c := NewConn(&all)
	for _, m := range sampleMessages() {
		if err := c.Send(m); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(all.Bytes())
	// Valid: EMBED_BATCH with its ids frame.
	f.Add(concat(jsonFrame(`{"type":"EMBED_BATCH","req_id":1,"model_ref":"m","items":[{"id":1,"n_tokens":2}]}`), idsFrame(7, 8)))
	// Truncated: the ids frame is cut short.
	f.Add(concat(jsonFrame(`{"type":"TOKENS","req_id":1,"n":2}`), []byte{8, 0, 0, 0, 1, 0}))
	// Over the limit: a control frame announcing 4 GiB - 1.
	// RERANK_GROUPS with its raw frame (valid), and one whose raw frame is short.
	f.Add(concat(jsonFrame(`{"type":"RERANK_GROUPS","req_id":1,"model_ref":"r","groups":[{"query_n_tokens":1,"candidates":[{"n_tokens":1}]}]}`), idsFrame(7, 8)))
	f.Add(concat(jsonFrame(`{"type":"RERANK_GROUPS","req_id":1,"groups":[{"query_n_tokens":2,"candidates":[]}]}`), idsFrame(7)))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, '{'})
	// Wrong type: unknown (recoverable) then a valid PING; and a non-string type.
	f.Add(concat(jsonFrame(`{"type":"NOPE","req_id":3}`), jsonFrame(`{"type":"PING","req_id":4}`)))
	f.Add(jsonFrame(`{"type":["PING"]}`))
	// Raw length mismatch: VECTORS announces 2×2 floats, sends 1.
	f.Add(concat(jsonFrame(`{"type":"VECTORS","n":2,"dims":2}`), idsFrame(1)))
	// QUANTIZE/QUANTIZED (extension): valid, truncated, a negative out_size,
	// and a QUANTIZE among messages for a peer that skips it if unknown.
	f.Add(concat(jsonFrame(`{"type":"QUANTIZE","req_id":5,"artifact_path":"/m/a.gguf","artifact_digest":"sha256:00","out_path":"/m/b.gguf","ftype":"q8_0","threads":1}`),
		jsonFrame(`{"type":"QUANTIZED","req_id":5,"out_digest":"sha256:01","out_size":1024,"ms":3}`)))
	f.Add(jsonFrame(`{"type":"QUANTIZE","req_id":5,"artifact_pa`)[:20])
	f.Add(jsonFrame(`{"type":"QUANTIZED","req_id":5,"out_size":-1}`))
	f.Add(concat(jsonFrame(`{"type":"QUANTIZE","req_id":6,"ftype":7}`), jsonFrame(`{"type":"PING","req_id":7}`)))
	// EMBED_TOKENS/TOKEN_STATES (extension): valid request and answer; a
	// truncated states frame; the wrong raw type (a TOKEN_STATES header
	// followed by another control frame where its states belong); a
	// pool_from EMBED_TOKENS refuses; states over the limit (2^16 tokens ×
	// 2^16 dims overflows any frame).
	f.Add(concat(jsonFrame(`{"type":"EMBED_TOKENS","req_id":1,"model_ref":"m","items":[{"id":0,"n_tokens":2}]}`), idsFrame(7, 8),
		jsonFrame(`{"type":"TOKEN_STATES","req_id":1,"dims":1,"n_tokens":[2]}`), idsFrame(1, 2)))
	f.Add(concat(jsonFrame(`{"type":"TOKEN_STATES","req_id":1,"dims":2,"n_tokens":[1,1]}`), []byte{16, 0, 0, 0, 1, 2, 3}))
	f.Add(concat(jsonFrame(`{"type":"TOKEN_STATES","req_id":1,"dims":1,"n_tokens":[1]}`), jsonFrame(`{"type":"PING","req_id":2}`)))
	f.Add(concat(jsonFrame(`{"type":"EMBED_TOKENS","req_id":1,"items":[{"id":0,"n_tokens":1,"pool_from":1}]}`), idsFrame(7)))
	f.Add(jsonFrame(`{"type":"TOKEN_STATES","req_id":1,"dims":65536,"n_tokens":[65536,3]}`))
	f.Add(concat(jsonFrame(`{"type":"TOKEN_STATES","req_id":1,"dims":1,"n_tokens":[-1,2]}`), idsFrame(1)))
	// Counts that overflow.
	f.Add(jsonFrame(`{"type":"VECTORS","n":4294967296,"dims":4294967296}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := NewConn(struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(data), io.Discard})
		c.SetMaxFrame(fuzzMaxFrame)
		var buf bytes.Buffer
		rt := NewConn(&buf)
		for range 64 {
			m, err := c.Recv()
			var ue *UnknownTypeError
			if errors.As(err, &ue) {
				continue
			}
			if err != nil {
				if _, err2 := c.Recv(); err2 != err {
					t.Fatalf("error not sticky: %v then %v", err, err2)
				}
				return
			}
			roundTrip(t, rt, &buf, m)
		}
	})
}

// roundTrip checks m survives Send→Recv and re-encodes identically, using
// rt, a Conn on buf, so the fuzz loop does not allocate Conns per message.
func roundTrip(t *testing.T, rt *Conn, buf *bytes.Buffer, m Message) {
	t.Helper()
	buf.Reset()
	if err := rt.Send(m); err != nil {
		t.Fatalf("Send(%#v) of a received message: %v", m, err)
	}
	enc1 := bytes.Clone(buf.Bytes())
	m2, err := rt.Recv()
	if err != nil {
		t.Fatalf("Recv of a re-encoded %s: %v\n% x", m.Type(), err, enc1)
	}
	if !equalMessages(m, m2) {
		t.Fatalf("round trip changed the message:\n got %#v\nwant %#v", m2, m)
	}
	if buf.Len() != 0 {
		t.Fatalf("Recv left %d bytes of a single message", buf.Len())
	}
	if err := rt.Send(m2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), enc1) {
		t.Fatalf("re-encoding differs:\n% x\n% x", buf.Bytes(), enc1)
	}
}
