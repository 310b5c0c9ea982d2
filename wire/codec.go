package wire

import (
	"encoding/json"
	"fmt"
)

// rawCount returns the number of 4-byte values in the raw frame that follows
// m, -1 if any count is valid (GENERATE), and ok=false if m has no raw frame.
// Negative counts and totals whose byte length overflows the u32 prefix are
// a *ProtocolError.
func rawCount(m Message) (n int64, ok bool, err error) {
	switch m := m.(type) {
	case *EmbedBatch:
		var sum int64
		for i, it := range m.Items {
			if sum, err = addCount(sum, it.NTokens); err != nil {
				return 0, true, fmt.Errorf("items[%d].n_tokens: %w", i, err)
			}
		}
		return sum, true, nil
	case *Rerank:
		sum, err := addCount(0, m.QueryNTokens)
		if err != nil {
			return 0, true, fmt.Errorf("query_n_tokens: %w", err)
		}
		for i, c := range m.Candidates {
			if sum, err = addCount(sum, c.NTokens); err != nil {
				return 0, true, fmt.Errorf("candidates[%d].n_tokens: %w", i, err)
			}
		}
		return sum, true, nil
	case *RerankGroups:
		var sum int64
		for g, grp := range m.Groups {
			if sum, err = addCount(sum, grp.QueryNTokens); err != nil {
				return 0, true, fmt.Errorf("groups[%d].query_n_tokens: %w", g, err)
			}
			for i, c := range grp.Candidates {
				if sum, err = addCount(sum, c.NTokens); err != nil {
					return 0, true, fmt.Errorf("groups[%d].candidates[%d].n_tokens: %w", g, i, err)
				}
			}
		}
		return sum, true, nil
	case *EmbedTokens:
		var sum int64
		for i, it := range m.Items {
			if sum, err = addCount(sum, it.NTokens); err != nil {
				return 0, true, fmt.Errorf("items[%d].n_tokens: %w", i, err)
			}
		}
		return sum, true, nil
	case *TokenStates:
		n, err := tokenStatesCount(m)
		return n, true, err
	case *EmbedSparse:
		var sum int64
		for i, it := range m.Items {
			if sum, err = addCount(sum, it.NTokens); err != nil {
				return 0, true, fmt.Errorf("items[%d].n_tokens: %w", i, err)
			}
		}
		return sum, true, nil
	case *SparseVectors:
		n, err := sparseCount(m)
		return n, true, err
	case *EmbedMulti:
		n, err := embedMultiCount(m)
		return n, true, err
	case *MultiVectors:
		n, err := multiVectorsCount(m)
		return n, true, err
	case *Vectors:
		return mulCount(m.N, m.Dims)
	case *Scores:
		n, err := addCount(0, m.N)
		return n, true, err
	case *Tokens:
		n, err := addCount(0, m.N)
		return n, true, err
	case *Generate:
		return -1, true, nil
	}
	return 0, false, nil
}

// addCount returns sum+n, refusing negative n and totals above maxRawElems.
func addCount(sum int64, n int) (int64, error) {
	if n < 0 {
		return 0, fmt.Errorf("negative count %d", n)
	}
	if int64(n) > maxRawElems-sum {
		return 0, fmt.Errorf("count %d makes the raw frame overflow the u32 length", n)
	}
	return sum + int64(n), nil
}

// mulCount returns n×dims for VECTORS, refusing negatives and overflow.
func mulCount(n, dims int) (int64, bool, error) {
	if n < 0 || dims < 0 {
		return 0, true, fmt.Errorf("negative n %d or dims %d", n, dims)
	}
	if dims != 0 && int64(n) > maxRawElems/int64(dims) {
		return 0, true, fmt.Errorf("n %d × dims %d makes the raw frame overflow the u32 length", n, dims)
	}
	return int64(n) * int64(dims), true, nil
}

// rawLen returns the number of values m carries for its raw frame.
func rawLen(m Message) int {
	switch m := m.(type) {
	case *EmbedBatch:
		return len(m.IDs)
	case *Rerank:
		return len(m.IDs)
	case *RerankGroups:
		return len(m.IDs)
	case *Generate:
		return len(m.IDs)
	case *EmbedTokens:
		return len(m.IDs)
	case *TokenStates:
		return len(m.Data)
	case *EmbedSparse:
		return len(m.IDs)
	case *SparseVectors:
		return len(m.Pairs)
	case *EmbedMulti:
		return len(m.IDs)
	case *MultiVectors:
		return len(m.Data)
	case *Tokens:
		return len(m.IDs)
	case *Vectors:
		return len(m.Data)
	case *Scores:
		return len(m.Data)
	}
	return 0
}

// header is what decodeControl reads first from every control frame.
type header struct {
	Type  *string         `json:"type"`
	ReqID json.RawMessage `json:"req_id"`
}

// decodeControl parses a control frame into a message of a known type. The
// raw frame, if any, is read separately.
func decodeControl(payload []byte) (Message, error) {
	var h header
	if err := json.Unmarshal(payload, &h); err != nil {
		return nil, &ProtocolError{Msg: "control frame is not a JSON object with a string type", Err: err}
	}
	if h.Type == nil {
		return nil, protoErrorf("control frame has no type")
	}
	if *h.Type == "" {
		return nil, protoErrorf("control frame has an empty type")
	}
	m := newMessage(MsgType(*h.Type))
	if m == nil {
		var id uint64
		_ = json.Unmarshal(h.ReqID, &id) // best effort: 0 if absent or not a u64
		return nil, &UnknownTypeError{Type: *h.Type, ReqID: id}
	}
	if err := json.Unmarshal(payload, m); err != nil {
		return nil, &ProtocolError{Msg: "bad " + *h.Type, Err: err}
	}
	if err := validate(m); err != nil {
		return nil, err
	}
	return m, nil
}

// validate checks the members of m that decide how much is read after it.
func validate(m Message) error {
	if _, _, err := rawCount(m); err != nil {
		return &ProtocolError{Msg: "bad " + string(m.Type()), Err: err}
	}
	if l, ok := m.(*Loaded); ok && l.Dims < 0 {
		return protoErrorf("bad LOADED: negative dims %d", l.Dims)
	}
	if e, ok := m.(*EmbedTokens); ok {
		for i, it := range e.Items {
			if it.PoolFrom != 0 {
				return protoErrorf("bad EMBED_TOKENS: items[%d].pool_from %d; EMBED_TOKENS does not pool", i, it.PoolFrom)
			}
		}
	}
	if e, ok := m.(*EmbedSparse); ok {
		if e.TopK < 0 {
			return protoErrorf("bad EMBED_SPARSE: negative top_k %d", e.TopK)
		}
		for i, it := range e.Items {
			if it.PoolFrom != 0 {
				return protoErrorf("bad EMBED_SPARSE: items[%d].pool_from %d; EMBED_SPARSE pools every token", i, it.PoolFrom)
			}
		}
	}
	if e, ok := m.(*EmbedMulti); ok {
		if err := checkEmbedMulti(e); err != nil {
			return err
		}
	}
	if v, ok := m.(*SparseVectors); ok && v.Vocab < 0 {
		return protoErrorf("bad SPARSE_VECTORS: negative vocab %d", v.Vocab)
	}
	if q, ok := m.(*Quantized); ok && q.OutSize < 0 {
		return protoErrorf("bad QUANTIZED: negative out_size %d", q.OutSize)
	}
	return nil
}
