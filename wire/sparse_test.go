package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"slices"
	"testing"
)

// FuzzSparseVectors feeds arbitrary streams to Recv, as FuzzRecv does, and
// checks what EMBED_SPARSE and SPARSE_VECTORS promise beyond a round trip:
// a SPARSE_VECTORS' items partition its pairs, with indices strictly
// rising below vocab, and an EMBED_SPARSE carries Σ n_tokens ids, a top_k
// ≥ 0 and no pool_from.
func FuzzSparseVectors(f *testing.F) {
	pairs := func(v ...uint32) []byte {
		ids := make([]int32, len(v))
		for i, x := range v {
			ids[i] = int32(x)
		}
		return idsFrame(ids...)
	}
	one := math.Float32bits(1)
	// Valid: a request and its answer.
	f.Add(concat(jsonFrame(`{"type":"EMBED_SPARSE","req_id":1,"model_ref":"m","top_k":0,"items":[{"id":0,"n_tokens":2},{"id":1,"n_tokens":1}]}`), idsFrame(7, 8, 9),
		jsonFrame(`{"type":"SPARSE_VECTORS","req_id":1,"vocab":10,"nnz":[2,1]}`), pairs(1, one, 9, one, 0, one)))
	// Truncated: the pairs frame ends early.
	f.Add(concat(jsonFrame(`{"type":"SPARSE_VECTORS","req_id":1,"vocab":10,"nnz":[1]}`), []byte{8, 0, 0, 0, 1}))
	// Wrong type: nnz as a number; a frame of the wrong length; a negative
	// top_k; pool_from; indices out of order or past vocab.
	f.Add(jsonFrame(`{"type":"SPARSE_VECTORS","req_id":1,"vocab":10,"nnz":3}`))
	f.Add(concat(jsonFrame(`{"type":"SPARSE_VECTORS","req_id":1,"vocab":10,"nnz":[1]}`), idsFrame(1)))
	f.Add(concat(jsonFrame(`{"type":"EMBED_SPARSE","req_id":1,"top_k":-1,"items":[{"id":0,"n_tokens":1}]}`), idsFrame(7)))
	f.Add(concat(jsonFrame(`{"type":"EMBED_SPARSE","req_id":1,"items":[{"id":0,"n_tokens":1,"pool_from":1}]}`), idsFrame(7)))
	f.Add(concat(jsonFrame(`{"type":"SPARSE_VECTORS","req_id":1,"vocab":10,"nnz":[2]}`), pairs(5, one, 5, one)))
	f.Add(concat(jsonFrame(`{"type":"SPARSE_VECTORS","req_id":1,"vocab":10,"nnz":[1]}`), pairs(10, one)))
	// Over the limit: pairs no u32 frame holds; a 4 GiB - 1 frame prefix.
	f.Add(jsonFrame(`{"type":"SPARSE_VECTORS","req_id":1,"vocab":10,"nnz":[1073741824]}`))
	f.Add(concat(jsonFrame(`{"type":"SPARSE_VECTORS","req_id":1,"vocab":10,"nnz":[1]}`), []byte{0xff, 0xff, 0xff, 0xff}))
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
			case *SparseVectors:
				n := 0
				for i := range m.NNZ {
					ix, vals := m.Item(i)
					if len(ix) != len(vals) || !slices.IsSorted(ix) || len(ix) > 0 && int(ix[len(ix)-1]) >= m.Vocab {
						t.Fatalf("item %d: indices %v for vocab %d", i, ix, m.Vocab)
					}
					n += 2 * len(ix)
				}
				if n != len(m.Pairs) {
					t.Fatalf("items hold %d values; pairs %d", n, len(m.Pairs))
				}
			case *EmbedSparse:
				n := 0
				for _, it := range m.Items {
					n += it.NTokens
					if it.PoolFrom != 0 {
						t.Fatalf("EMBED_SPARSE with pool_from %d decoded", it.PoolFrom)
					}
				}
				if n != len(m.IDs) || m.TopK < 0 {
					t.Fatalf("items announce %d ids; got %d (top_k %d)", n, len(m.IDs), m.TopK)
				}
			}
			roundTrip(t, rt, &buf, m)
		}
	})
}

// TestSparseFrames checks the bytes the package documentation shows for
// EMBED_SPARSE and SPARSE_VECTORS, and that Item gives back what
// AppendSparse put.
func TestSparseFrames(t *testing.T) {
	var buf bytes.Buffer
	c := NewConn(&buf)
	if err := c.Send(&EmbedSparse{ReqID: 11, ModelRef: "m1", TopK: 2, Items: []Item{{ID: 0, NTokens: 2}}, IDs: []int32{101, 102}}); err != nil {
		t.Fatal(err)
	}
	ans := &SparseVectors{ReqID: 11, Vocab: 30522}
	ans.AppendSparse([]uint32{7, 2009}, []float32{1.5, 0.25})
	if err := c.Send(ans); err != nil {
		t.Fatal(err)
	}
	want := "5e000000" + hex.EncodeToString([]byte(`{"type":"EMBED_SPARSE","req_id":11,"model_ref":"m1","top_k":2,"items":[{"id":0,"n_tokens":2}]}`)) +
		"08000000" + "65000000" + "66000000" +
		"3d000000" + hex.EncodeToString([]byte(`{"type":"SPARSE_VECTORS","req_id":11,"vocab":30522,"nnz":[2]}`)) +
		"10000000" + "07000000" + "0000c03f" + "d9070000" + "0000803e"
	if got := hex.EncodeToString(buf.Bytes()); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	c.Recv() // the request
	m, err := c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	ix, vals := m.(*SparseVectors).Item(0)
	if !slices.Equal(ix, []uint32{7, 2009}) || !slices.Equal(vals, []float32{1.5, 0.25}) {
		t.Fatalf("got %v %v; want [7 2009] [1.5 0.25]", ix, vals)
	}
}

// TestSparseVectorsRefused checks that Send refuses pairs out of order,
// past the vocabulary or over the frame, with nothing written.
func TestSparseVectorsRefused(t *testing.T) {
	one := math.Float32bits(1)
	tests := []struct {
		name  string
		m     *SparseVectors
		max   uint32
		wantT any
	}{
		{"indices falling", &SparseVectors{Vocab: 10, NNZ: []int{2}, Pairs: []uint32{3, one, 2, one}}, 1 << 10, new(*ProtocolError)},
		{"index repeated", &SparseVectors{Vocab: 10, NNZ: []int{2}, Pairs: []uint32{3, one, 3, one}}, 1 << 10, new(*ProtocolError)},
		{"index past vocab", &SparseVectors{Vocab: 3, NNZ: []int{1}, Pairs: []uint32{3, one}}, 1 << 10, new(*ProtocolError)},
		{"pairs and nnz disagree", &SparseVectors{Vocab: 10, NNZ: []int{2}, Pairs: []uint32{3, one}}, 1 << 10, new(*ProtocolError)},
		{"over the frame", &SparseVectors{Vocab: 10, NNZ: []int{2}, Pairs: []uint32{1, one, 2, one}}, 15, new(*FrameTooLargeError)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			c := NewConn(&buf)
			c.SetMaxFrame(tt.max)
			err := c.Send(tt.m)
			if !errors.As(err, tt.wantT) {
				t.Fatalf("got %v; want %T", err, tt.wantT)
			}
			if buf.Len() != 0 {
				t.Fatalf("got %d bytes written; want 0", buf.Len())
			}
		})
	}
	// The next item's first index may be below the last one's.
	var buf bytes.Buffer
	if err := NewConn(&buf).Send(&SparseVectors{Vocab: 10, NNZ: []int{1, 1}, Pairs: []uint32{5, one, 1, one}}); err != nil {
		t.Fatalf("two items: %v", err)
	}
}
