package wire

import (
	"fmt"
)

// TypeEmbedTokens and TypeTokenStates are the EMBED_TOKENS extension (see
// the package documentation).
const (
	TypeEmbedTokens MsgType = "EMBED_TOKENS"
	TypeTokenStates MsgType = "TOKEN_STATES"
)

func init() {
	register(TypeEmbedTokens, func() Message { return new(EmbedTokens) })
	register(TypeTokenStates, func() Message { return new(TokenStates) })
}

// ExtEmbedTokens: the worker knows EMBED_TOKENS (it answers it, or answers
// ERR unsupported for a model whose engine has no per-token outputs).
const ExtEmbedTokens = "EMBED_TOKENS"

// EmbedTokens (extension) asks for the final hidden state of every token of
// each item, unpooled. JSON: {"type":"EMBED_TOKENS", "req_id", "model_ref",
// "items":[{"id","n_tokens"}]}, followed by one raw frame of the items'
// token ids concatenated in item order, little-endian i32, exactly
// 4 × Σ n_tokens bytes (IDs). Items' pool_from must be 0. Answered by
// TOKEN_STATES, or ERR (unsupported: the model's engine has no per-token
// outputs; bad_request: the answer would not fit the negotiated frame).
type EmbedTokens struct {
	ReqID    uint64  `json:"req_id"`
	ModelRef string  `json:"model_ref"`
	Items    []Item  `json:"items"`
	IDs      []int32 `json:"-"` // raw frame
}

// TokenStates (extension) answers EMBED_TOKENS.
// JSON: {"type":"TOKEN_STATES", "req_id", "dims", "n_tokens":[...]}, one
// count per item, followed by one raw frame of the states, little-endian
// f32, item after item and token after token, each state dims values:
// exactly 4 × dims × Σ n_tokens bytes (Data).
type TokenStates struct {
	ReqID   uint64    `json:"req_id"`
	Dims    int       `json:"dims"`
	NTokens []int     `json:"n_tokens"`
	Data    []float32 `json:"-"` // raw frame
}

func (*EmbedTokens) Type() MsgType            { return TypeEmbedTokens }
func (*TokenStates) Type() MsgType            { return TypeTokenStates }
func (m *EmbedTokens) RequestID() uint64      { return m.ReqID }
func (m *TokenStates) RequestID() uint64      { return m.ReqID }
func (m *EmbedTokens) NamedModel() string     { return m.ModelRef }
func (m *TokenStates) SetRequestID(id uint64) { m.ReqID = id }
func (m *EmbedTokens) TokenIDs() []int32      { return m.IDs }

func (*EmbedTokens) ReplyType() MsgType { return TypeTokenStates }

func (m *EmbedTokens) Readdressed(id uint64, ref string) Request {
	c := *m
	c.ReqID, c.ModelRef = id, orRef(ref, m.ModelRef)
	return &c
}

var (
	_ ModelRequest = (*EmbedTokens)(nil)
	_ Reply        = (*TokenStates)(nil)
)

// Rows returns item i's states as a slice of Data (n_tokens[i] × dims
// values); Recv has checked that Data holds every item's.
func (m *TokenStates) Rows(i int) []float32 {
	off := 0
	for _, n := range m.NTokens[:i] {
		off += n * m.Dims
	}
	n := m.NTokens[i] * m.Dims
	return m.Data[off : off+n : off+n]
}

// tokenStatesCount is TOKEN_STATES' raw count: dims × Σ n_tokens.
func tokenStatesCount(m *TokenStates) (int64, error) {
	var sum int64
	var err error
	for i, n := range m.NTokens {
		if sum, err = addCount(sum, n); err != nil {
			return 0, fmt.Errorf("n_tokens[%d]: %w", i, err)
		}
	}
	return mulCount(int(sum), m.Dims)
}

// check refuses an item that asks for pooling.
func (e *EmbedTokens) check() error {
	for i, it := range e.Items {
		if it.PoolFrom != 0 {
			return protoErrorf("bad EMBED_TOKENS: items[%d].pool_from %d; EMBED_TOKENS does not pool", i, it.PoolFrom)
		}
	}
	return nil
}

// EMBED_TOKENS' raw frame: its items' ids; TOKEN_STATES': dims × Σ n_tokens
// floats (framed).
func (m *EmbedTokens) rawValues() any           { return &m.IDs }
func (m *EmbedTokens) rawCount() (int64, error) { return itemsCount(m.Items) }
func (m *TokenStates) rawValues() any           { return &m.Data }
func (m *TokenStates) rawCount() (int64, error) { return tokenStatesCount(m) }
