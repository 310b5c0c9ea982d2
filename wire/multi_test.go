package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"testing"
)

// FuzzMultiVectors feeds arbitrary streams to Recv, as FuzzRecv does, and
// checks what EMBED_MULTI and MULTI_VECTORS promise beyond a round trip:
// an EMBED_MULTI carries Σ n_tokens ids and each attend within its item,
// and a MULTI_VECTORS' rows partition its data.
func FuzzMultiVectors(f *testing.F) {
	// Valid: a request and its answer.
	f.Add(concat(jsonFrame(`{"type":"EMBED_MULTI","req_id":1,"model_ref":"m","items":[{"id":0,"n_tokens":2,"attend":1},{"id":1,"n_tokens":1}]}`), idsFrame(7, 8, 9),
		jsonFrame(`{"type":"MULTI_VECTORS","req_id":1,"dims":1,"n_tokens":[2,1]}`), idsFrame(1, 2, 3)))
	// Truncated: the vectors frame ends early.
	f.Add(concat(jsonFrame(`{"type":"MULTI_VECTORS","req_id":1,"dims":2,"n_tokens":[1]}`), []byte{8, 0, 0, 0, 1}))
	// Wrong type: n_tokens as a number; a frame of the wrong length;
	// attend past n_tokens; a negative attend.
	f.Add(jsonFrame(`{"type":"MULTI_VECTORS","req_id":1,"dims":2,"n_tokens":3}`))
	f.Add(concat(jsonFrame(`{"type":"MULTI_VECTORS","req_id":1,"dims":2,"n_tokens":[1]}`), idsFrame(1)))
	f.Add(concat(jsonFrame(`{"type":"EMBED_MULTI","req_id":1,"items":[{"id":0,"n_tokens":1,"attend":2}]}`), idsFrame(7)))
	f.Add(concat(jsonFrame(`{"type":"EMBED_MULTI","req_id":1,"items":[{"id":0,"n_tokens":1,"attend":-1}]}`), idsFrame(7)))
	// Over the limit: vectors no u32 frame holds; a 4 GiB - 1 frame prefix.
	f.Add(jsonFrame(`{"type":"MULTI_VECTORS","req_id":1,"dims":128,"n_tokens":[1073741824]}`))
	f.Add(concat(jsonFrame(`{"type":"EMBED_MULTI","req_id":1,"items":[{"id":0,"n_tokens":1}]}`), []byte{0xff, 0xff, 0xff, 0xff}))
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
			case *MultiVectors:
				n := 0
				for i := range m.NTokens {
					n += len(m.Rows(i))
				}
				if n != len(m.Data) {
					t.Fatalf("rows hold %d values; data %d", n, len(m.Data))
				}
			case *EmbedMulti:
				n := 0
				for _, it := range m.Items {
					n += it.NTokens
					if it.Attend < 0 || it.Attend > it.NTokens {
						t.Fatalf("EMBED_MULTI item attend %d of %d decoded", it.Attend, it.NTokens)
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

// TestMultiFrames checks the bytes the package documentation shows for
// EMBED_MULTI, and that Rows gives each item's vectors back.
func TestMultiFrames(t *testing.T) {
	var buf bytes.Buffer
	c := NewConn(&buf)
	if err := c.Send(&EmbedMulti{ReqID: 12, ModelRef: "m1", Items: []MultiItem{{ID: 0, NTokens: 2, Attend: 1}}, IDs: []int32{101, 103}}); err != nil {
		t.Fatal(err)
	}
	want := "5e000000" + hex.EncodeToString([]byte(`{"type":"EMBED_MULTI","req_id":12,"model_ref":"m1","items":[{"id":0,"n_tokens":2,"attend":1}]}`)) +
		"08000000" + "65000000" + "67000000"
	if got := hex.EncodeToString(buf.Bytes()); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	buf.Reset()
	if err := c.Send(&MultiVectors{ReqID: 12, Dims: 2, NTokens: []int{1, 2}, Data: []float32{1, 0, 0, 1, 0.6, 0.8}}); err != nil {
		t.Fatal(err)
	}
	m, err := c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	mv := m.(*MultiVectors)
	if got := mv.Rows(1); !slices.Equal(got, []float32{0, 1, 0.6, 0.8}) {
		t.Fatalf("Rows(1) = %v; want [0 1 0.6 0.8]", got)
	}
}

// TestMultiVectorsTooLarge checks that an answer over the negotiated frame
// is refused by Send with nothing written, and one whose data disagrees
// with its n_tokens too.
func TestMultiVectorsTooLarge(t *testing.T) {
	tests := []struct {
		name  string
		m     Message
		max   uint32
		wantT any
	}{
		// 26 floats, 104 bytes, over a 100-byte frame that holds its header.
		{"answer over the frame", &MultiVectors{Dims: 2, NTokens: []int{13}, Data: make([]float32, 26)}, 100, new(*FrameTooLargeError)},
		{"data and n_tokens disagree", &MultiVectors{Dims: 2, NTokens: []int{2}, Data: make([]float32, 2)}, 1 << 10, new(*ProtocolError)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			c := NewConn(&buf)
			c.SetMaxFrame(tt.max)
			if err := c.Send(tt.m); !errors.As(err, tt.wantT) {
				t.Fatalf("got %v; want %T", err, tt.wantT)
			}
			if buf.Len() != 0 {
				t.Fatalf("got %d bytes written; want 0", buf.Len())
			}
		})
	}
}
