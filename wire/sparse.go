package wire

import (
	"fmt"
	"math"
)

// TypeEmbedSparse and TypeSparseVectors are the EMBED_SPARSE extension
// (see the package documentation).
const (
	TypeEmbedSparse   MsgType = "EMBED_SPARSE"
	TypeSparseVectors MsgType = "SPARSE_VECTORS"
)

func init() {
	register(TypeEmbedSparse, func() Message { return new(EmbedSparse) })
	register(TypeSparseVectors, func() Message { return new(SparseVectors) })
}

// ExtEmbedSparse: the worker knows EMBED_SPARSE (it answers it, or answers
// ERR unsupported for a model that has no masked-LM logits).
const ExtEmbedSparse = "EMBED_SPARSE"

// EmbedSparse (extension) asks for one sparse vector per item over the
// model's vocabulary, SPLADE's: w_v = max over the item's tokens of
// log(1 + relu(logit_tv)), the values above 0 kept (with top_k > 0, only
// the top_k largest). JSON: {"type":"EMBED_SPARSE", "req_id", "model_ref",
// "top_k", "items":[{"id","n_tokens"}]}, followed by one raw frame of the
// items' token ids concatenated in item order, little-endian i32, exactly
// 4 × Σ n_tokens bytes (IDs). top_k must be ≥ 0 and items' pool_from 0.
// Answered by SPARSE_VECTORS, or ERR (unsupported: the model has no
// masked-LM logits; bad_request: the answer would not fit the negotiated
// frame).
type EmbedSparse struct {
	ReqID    uint64  `json:"req_id"`
	ModelRef string  `json:"model_ref"`
	TopK     int     `json:"top_k"`
	Items    []Item  `json:"items"`
	IDs      []int32 `json:"-"` // raw frame
}

// SparseVectors (extension) answers EMBED_SPARSE.
// JSON: {"type":"SPARSE_VECTORS", "req_id", "vocab", "nnz":[...]}, one
// count of pairs per item, followed by one raw frame of (u32 index,
// f32 value) pairs, little-endian, item after item, each item's pairs by
// strictly rising index below vocab: exactly 8 × Σ nnz bytes (Pairs, two
// u32 a pair, the value as its IEEE 754 bits).
type SparseVectors struct {
	ReqID uint64   `json:"req_id"`
	Vocab int      `json:"vocab"`
	NNZ   []int    `json:"nnz"`
	Pairs []uint32 `json:"-"` // raw frame: index, value bits, index, ...
}

func (*EmbedSparse) Type() MsgType              { return TypeEmbedSparse }
func (*SparseVectors) Type() MsgType            { return TypeSparseVectors }
func (m *EmbedSparse) RequestID() uint64        { return m.ReqID }
func (m *SparseVectors) RequestID() uint64      { return m.ReqID }
func (m *EmbedSparse) NamedModel() string       { return m.ModelRef }
func (m *SparseVectors) SetRequestID(id uint64) { m.ReqID = id }
func (m *EmbedSparse) TokenIDs() []int32        { return m.IDs }

func (*EmbedSparse) ReplyType() MsgType { return TypeSparseVectors }

func (m *EmbedSparse) Readdressed(id uint64, ref string) Request {
	c := *m
	c.ReqID, c.ModelRef = id, orRef(ref, m.ModelRef)
	return &c
}

var (
	_ ModelRequest = (*EmbedSparse)(nil)
	_ Reply        = (*SparseVectors)(nil)
)

// AppendSparse appends one item's pairs to m (indices rising, as many
// values as indices).
func (m *SparseVectors) AppendSparse(indices []uint32, values []float32) {
	m.NNZ = append(m.NNZ, len(indices))
	for i, ix := range indices {
		m.Pairs = append(m.Pairs, ix, math.Float32bits(values[i]))
	}
}

// Item returns item i's indices and values; Recv has checked that Pairs
// holds every item's.
func (m *SparseVectors) Item(i int) (indices []uint32, values []float32) {
	off := 0
	for _, n := range m.NNZ[:i] {
		off += 2 * n
	}
	n := m.NNZ[i]
	indices, values = make([]uint32, n), make([]float32, n)
	for j := range n {
		indices[j] = m.Pairs[off+2*j]
		values[j] = math.Float32frombits(m.Pairs[off+2*j+1])
	}
	return indices, values
}

// sparseCount is SPARSE_VECTORS' raw count of u32 values: 2 × Σ nnz.
func sparseCount(m *SparseVectors) (int64, error) {
	var sum int64
	var err error
	for i, n := range m.NNZ {
		if sum, err = addCount(sum, n); err != nil {
			return 0, fmt.Errorf("nnz[%d]: %w", i, err)
		}
		if sum, err = addCount(sum, n); err != nil {
			return 0, fmt.Errorf("nnz[%d]: %w", i, err)
		}
	}
	return sum, nil
}

// checkSparse checks a SPARSE_VECTORS' pairs once they are read or before
// they are sent: each item's indices strictly rising and below vocab.
func checkSparse(m *SparseVectors) error {
	off := 0
	for i, n := range m.NNZ {
		for j := range n {
			ix := m.Pairs[off+2*j]
			if int64(ix) >= int64(m.Vocab) {
				return protoErrorf("bad SPARSE_VECTORS: item %d index %d outside the vocabulary of %d", i, ix, m.Vocab)
			}
			if j > 0 && ix <= m.Pairs[off+2*j-2] {
				return protoErrorf("bad SPARSE_VECTORS: item %d indices not strictly rising (%d after %d)", i, ix, m.Pairs[off+2*j-2])
			}
		}
		off += 2 * n
	}
	return nil
}

// check refuses a negative top_k and an item that asks for a pooling start.
func (e *EmbedSparse) check() error {
	if e.TopK < 0 {
		return protoErrorf("bad EMBED_SPARSE: negative top_k %d", e.TopK)
	}
	for i, it := range e.Items {
		if it.PoolFrom != 0 {
			return protoErrorf("bad EMBED_SPARSE: items[%d].pool_from %d; EMBED_SPARSE pools every token", i, it.PoolFrom)
		}
	}
	return nil
}

// check refuses a negative vocabulary.
func (v *SparseVectors) check() error {
	if v.Vocab < 0 {
		return protoErrorf("bad SPARSE_VECTORS: negative vocab %d", v.Vocab)
	}
	return nil
}

// EMBED_SPARSE's raw frame: its items' ids; SPARSE_VECTORS': Σ nnz
// (index, value) pairs, checked once read and before they are sent
// (framed).
func (m *EmbedSparse) rawValues() any             { return &m.IDs }
func (m *EmbedSparse) rawCount() (int64, error)   { return itemsCount(m.Items) }
func (m *SparseVectors) rawValues() any           { return &m.Pairs }
func (m *SparseVectors) rawCount() (int64, error) { return sparseCount(m) }
func (m *SparseVectors) checkRaw() error          { return checkSparse(m) }
