package wire

import (
	"encoding/json"
	"fmt"
)

// rawCount returns the number of 4-byte values in the raw frame that follows
// m, -1 if any count is valid (GENERATE), and ok=false if m has no raw frame
// (is not framed). Negative counts and totals whose byte length overflows
// the u32 prefix are a *ProtocolError.
func rawCount(m Message) (n int64, ok bool, err error) {
	f, ok := m.(framed)
	if !ok {
		return 0, false, nil
	}
	n, err = f.rawCount()
	return n, true, err
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
func mulCount(n, dims int) (int64, error) {
	if n < 0 || dims < 0 {
		return 0, fmt.Errorf("negative n %d or dims %d", n, dims)
	}
	if dims != 0 && int64(n) > maxRawElems/int64(dims) {
		return 0, fmt.Errorf("n %d × dims %d makes the raw frame overflow the u32 length", n, dims)
	}
	return int64(n) * int64(dims), nil
}

// itemsCount is the sum of the items' n_tokens.
func itemsCount(items []Item) (int64, error) {
	var sum int64
	var err error
	for i, it := range items {
		if sum, err = addCount(sum, it.NTokens); err != nil {
			return 0, fmt.Errorf("items[%d].n_tokens: %w", i, err)
		}
	}
	return sum, nil
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

// checked is a message whose members its file checks once decoded (a
// *ProtocolError), besides its raw count.
type checked interface{ check() error }

// validate checks the members of m that decide how much is read after it.
func validate(m Message) error {
	if _, _, err := rawCount(m); err != nil {
		return &ProtocolError{Msg: "bad " + string(m.Type()), Err: err}
	}
	if l, ok := m.(*Loaded); ok && l.Dims < 0 {
		return protoErrorf("bad LOADED: negative dims %d", l.Dims)
	}
	if c, ok := m.(checked); ok {
		if err := c.check(); err != nil {
			return err
		}
	}
	if q, ok := m.(*Quantized); ok && q.OutSize < 0 {
		return protoErrorf("bad QUANTIZED: negative out_size %d", q.OutSize)
	}
	return nil
}
