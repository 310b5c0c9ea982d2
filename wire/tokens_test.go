package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzTokenStates feeds arbitrary streams to Recv, as FuzzRecv does, and
// checks what EMBED_TOKENS and TOKEN_STATES promise beyond a round trip:
// a TOKEN_STATES' Rows partition its Data exactly, and an EMBED_TOKENS
// carries Σ n_tokens ids and no pool_from.
func FuzzTokenStates(f *testing.F) {
	// Valid: a request and its answer.
	f.Add(concat(jsonFrame(`{"type":"EMBED_TOKENS","req_id":1,"model_ref":"m","items":[{"id":0,"n_tokens":2},{"id":1,"n_tokens":1}]}`), idsFrame(7, 8, 9),
		jsonFrame(`{"type":"TOKEN_STATES","req_id":1,"dims":2,"n_tokens":[2,1]}`), idsFrame(1, 2, 3, 4, 5, 6)))
	// Truncated: the states frame ends early.
	f.Add(concat(jsonFrame(`{"type":"TOKEN_STATES","req_id":1,"dims":2,"n_tokens":[1]}`), []byte{8, 0, 0, 0, 1}))
	// Wrong type: n_tokens as a number, and a raw frame of the wrong length.
	f.Add(jsonFrame(`{"type":"TOKEN_STATES","req_id":1,"dims":2,"n_tokens":3}`))
	f.Add(concat(jsonFrame(`{"type":"TOKEN_STATES","req_id":1,"dims":2,"n_tokens":[1]}`), idsFrame(1)))
	// Over the limit: states no u32 frame holds; a 4 GiB - 1 frame prefix.
	f.Add(jsonFrame(`{"type":"TOKEN_STATES","req_id":1,"dims":1073741824,"n_tokens":[4]}`))
	f.Add(concat(jsonFrame(`{"type":"TOKEN_STATES","req_id":1,"dims":1,"n_tokens":[1]}`), []byte{0xff, 0xff, 0xff, 0xff}))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := NewConn(struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(data), io.Discard})
		c.SetMaxFrame(fuzzMaxFrame)
		var buf bytes.Buffer
		rt := NewConn(&buf)
		for range 16 {
			m, err := c.Recv()
			var ue *UnknownTypeError
			if errors.As(err, &ue) {
				continue
			}
			if err != nil {
				return
			}
			switch m := m.(type) {
			case *TokenStates:
				n := 0
				for i := range m.NTokens {
					n += len(m.Rows(i))
				}
				if n != len(m.Data) {
					t.Fatalf("rows hold %d values; data %d", n, len(m.Data))
				}
			case *EmbedTokens:
				n := 0
				for _, it := range m.Items {
					n += it.NTokens
					if it.PoolFrom != 0 {
						t.Fatalf("EMBED_TOKENS with pool_from %d decoded", it.PoolFrom)
					}
				}
				if n != len(m.IDs) {
					t.Fatalf("items announce %d ids; got %d", n, len(m.IDs))
				}
			}
			roundTrip(t, rt, &buf, m)
		}
	})
}

// TestTokenStatesTooLarge checks that an answer over the negotiated frame
// is refused by Send with nothing written, and one at the limit is sent.
func TestTokenStatesTooLarge(t *testing.T) {
	const max = 1024 // bytes: 256 f32
	tests := []struct {
		name    string
		tokens  int
		dims    int
		tooLong bool
	}{
		{"at the limit", 32, 8, false},
		{"one token over", 33, 8, true},
		{"one value over", 1, 257, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			c := NewConn(&buf)
			c.SetMaxFrame(max)
			m := &TokenStates{ReqID: 1, Dims: tt.dims, NTokens: []int{tt.tokens}, Data: make([]float32, tt.tokens*tt.dims)}
			err := c.Send(m)
			var fe *FrameTooLargeError
			if got := errors.As(err, &fe); got != tt.tooLong {
				t.Fatalf("Send: got %v; want too large %v", err, tt.tooLong)
			}
			if tt.tooLong && buf.Len() != 0 {
				t.Fatalf("got %d bytes written for a refused message; want 0", buf.Len())
			}
			if !tt.tooLong && buf.Len() < 4*tt.tokens*tt.dims {
				t.Fatalf("got %d bytes written; want at least %d", buf.Len(), 4*tt.tokens*tt.dims)
			}
		})
	}
}

// TestEmbedTokensUnknownType checks what an older worker does with an
// EMBED_TOKENS it does not know: the control frame is an *UnknownTypeError
// with its req_id, after which the raw frame cannot be skipped: why the
// module sends EMBED_TOKENS only to workers announcing ExtEmbedTokens.
func TestEmbedTokensUnknownType(t *testing.T) {
	var buf bytes.Buffer
	if err := NewConn(&buf).Send(&EmbedTokens{ReqID: 5, ModelRef: "m", Items: []Item{{NTokens: 1}}, IDs: []int32{3}}); err != nil {
		t.Fatal(err)
	}
	// An old peer's decoder: the same frames, with the type unknown.
	b := bytes.Replace(buf.Bytes(), []byte(`"EMBED_TOKENS"`), []byte(`"EMBED_TOKENX"`), 1)
	c := NewConn(struct {
		io.Reader
		io.Writer
	}{bytes.NewReader(b), io.Discard})
	_, err := c.Recv()
	var ue *UnknownTypeError
	if !errors.As(err, &ue) || ue.ReqID != 5 {
		t.Fatalf("got %v; want *UnknownTypeError with req_id 5", err)
	}
	if _, err := c.Recv(); err == nil {
		t.Fatal("got the raw ids frame read as a message; want an error")
	}
}
