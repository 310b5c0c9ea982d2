package wire

import (
	"fmt"
)

// TypeEmbedMulti and TypeMultiVectors are the EMBED_MULTI extension (see
// the package documentation).
const (
	TypeEmbedMulti   MsgType = "EMBED_MULTI"
	TypeMultiVectors MsgType = "MULTI_VECTORS"
)

func init() {
	register(TypeEmbedMulti, func() Message { return new(EmbedMulti) })
	register(TypeMultiVectors, func() Message { return new(MultiVectors) })
}

// ExtEmbedMulti: the worker knows EMBED_MULTI (it answers it, or answers
// ERR unsupported for a model without per-token outputs or without a
// multi-vector projection).
const ExtEmbedMulti = "EMBED_MULTI"

// MultiItem is one sequence of an EMBED_MULTI: its n_tokens ids in the raw
// frame, of which the first attend are in the attention mask (0: all of
// them). The tokens after attend are ColBERT's query expansion ([MASK]
// tokens the model does not attend to): their vectors are answered all the
// same.
type MultiItem struct {
	ID      int `json:"id"`
	NTokens int `json:"n_tokens"`
	Attend  int `json:"attend,omitempty"`
}

// EmbedMulti (extension) asks for one vector per token of each item,
// ColBERT's: the token's final hidden state through the model's
// projection (the Dense modules of its sentence-transformers chain, with
// no Pooling before them), L2-normalised. JSON: {"type":"EMBED_MULTI",
// "req_id", "model_ref", "items":[{"id","n_tokens","attend"}]}, followed
// by one raw frame of the items' token ids concatenated in item order,
// little-endian i32, exactly 4 × Σ n_tokens bytes (IDs). Each attend is 0
// or in [1, n_tokens]. Answered by MULTI_VECTORS, or ERR (unsupported: no
// per-token outputs, or no projection; bad_request: the answer would not
// fit the negotiated frame).
type EmbedMulti struct {
	ReqID    uint64      `json:"req_id"`
	ModelRef string      `json:"model_ref"`
	Items    []MultiItem `json:"items"`
	IDs      []int32     `json:"-"` // raw frame
}

// MultiVectors (extension) answers EMBED_MULTI.
// JSON: {"type":"MULTI_VECTORS", "req_id", "dims", "n_tokens":[...]}, one
// count per item (its n_tokens), followed by one raw frame of the token
// vectors, little-endian f32, item after item and token after token, each
// vector dims values of unit length: exactly 4 × dims × Σ n_tokens bytes
// (Data).
type MultiVectors struct {
	ReqID   uint64    `json:"req_id"`
	Dims    int       `json:"dims"`
	NTokens []int     `json:"n_tokens"`
	Data    []float32 `json:"-"` // raw frame
}

func (*EmbedMulti) Type() MsgType              { return TypeEmbedMulti }
func (*MultiVectors) Type() MsgType            { return TypeMultiVectors }
func (m *EmbedMulti) RequestID() uint64        { return m.ReqID }
func (m *MultiVectors) RequestID() uint64      { return m.ReqID }
func (m *EmbedMulti) NamedModel() string       { return m.ModelRef }
func (m *MultiVectors) SetRequestID(id uint64) { m.ReqID = id }
func (m *EmbedMulti) TokenIDs() []int32        { return m.IDs }

func (*EmbedMulti) ReplyType() MsgType { return TypeMultiVectors }

func (m *EmbedMulti) Readdressed(id uint64, ref string) Request {
	c := *m
	c.ReqID, c.ModelRef = id, orRef(ref, m.ModelRef)
	return &c
}

var (
	_ ModelRequest = (*EmbedMulti)(nil)
	_ Reply        = (*MultiVectors)(nil)
)

// Rows returns item i's vectors as a slice of Data (n_tokens[i] × dims
// values); Recv has checked that Data holds every item's.
func (m *MultiVectors) Rows(i int) []float32 {
	off := 0
	for _, n := range m.NTokens[:i] {
		off += n * m.Dims
	}
	n := m.NTokens[i] * m.Dims
	return m.Data[off : off+n : off+n]
}

// embedMultiCount is EMBED_MULTI's raw count: Σ n_tokens.
func embedMultiCount(m *EmbedMulti) (int64, error) {
	var sum int64
	var err error
	for i, it := range m.Items {
		if sum, err = addCount(sum, it.NTokens); err != nil {
			return 0, fmt.Errorf("items[%d].n_tokens: %w", i, err)
		}
	}
	return sum, nil
}

// multiVectorsCount is MULTI_VECTORS' raw count: dims × Σ n_tokens.
func multiVectorsCount(m *MultiVectors) (int64, error) {
	return tokenStatesCount(&TokenStates{Dims: m.Dims, NTokens: m.NTokens})
}

// checkEmbedMulti checks each item's attend against its n_tokens.
func checkEmbedMulti(m *EmbedMulti) error {
	for i, it := range m.Items {
		if it.Attend < 0 || it.Attend > it.NTokens {
			return protoErrorf("bad EMBED_MULTI: items[%d].attend %d; want 0 (all) or 1…n_tokens %d", i, it.Attend, it.NTokens)
		}
	}
	return nil
}

func (e *EmbedMulti) check() error { return checkEmbedMulti(e) }

// EMBED_MULTI's raw frame: its items' ids; MULTI_VECTORS': dims × Σ
// n_tokens floats (framed).
func (m *EmbedMulti) rawValues() any             { return &m.IDs }
func (m *EmbedMulti) rawCount() (int64, error)   { return embedMultiCount(m) }
func (m *MultiVectors) rawValues() any           { return &m.Data }
func (m *MultiVectors) rawCount() (int64, error) { return multiVectorsCount(m) }
