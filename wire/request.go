package wire

// Request is a message the module sends and a worker answers (LOAD,
// EMBED_BATCH, EMBED_TOKENS, EMBED_SPARSE, EMBED_MULTI, RERANK, RERANK_GROUPS,
// GENERATE, UNLOAD, TOKENIZE, QUANTIZE, PING). Its req_id is chosen per worker connection, so a supervisor sends
// a caller's request to a worker as a readdressed copy.
type Request interface {
	Message
	RequestID() uint64
	// Readdressed returns a shallow copy of the request carrying req_id id
	// and, when the request names a model (ModelRequest) and ref is not
	// empty, model_ref ref. The receiver is not modified; the copy shares
	// its raw payload.
	Readdressed(id uint64, ref string) Request
	// ReplyType is the answer the request expects besides ERR.
	ReplyType() MsgType
}

// ModelRequest is a request that names a loaded model by its model_ref
// (EMBED_BATCH, EMBED_TOKENS, EMBED_SPARSE, EMBED_MULTI, RERANK,
// RERANK_GROUPS, GENERATE, UNLOAD, TOKENIZE).
type ModelRequest interface {
	Request
	NamedModel() string // the model_ref
}

// Reply is a worker's answer to a Request (LOADED, VECTORS, SCORES, TEXT,
// UNLOADED, PONG, TOKENS, QUANTIZED, TOKEN_STATES, SPARSE_VECTORS, MULTI_VECTORS;
// ERR is an Error).
type Reply interface {
	Message
	RequestID() uint64
	SetRequestID(id uint64) // give the answer the caller's req_id back
}

// orRef is ref, or old when ref is empty.
func orRef(ref, old string) string {
	if ref != "" {
		return ref
	}
	return old
}

// TokenRequest is a request that carries token ids in its raw frame.
type TokenRequest interface {
	Request
	TokenIDs() []int32
}

func (m *EmbedBatch) TokenIDs() []int32   { return m.IDs }
func (m *Rerank) TokenIDs() []int32       { return m.IDs }
func (m *RerankGroups) TokenIDs() []int32 { return m.IDs }
func (m *Generate) TokenIDs() []int32     { return m.IDs }

func (*Load) ReplyType() MsgType         { return TypeLoaded }
func (*Quantize) ReplyType() MsgType     { return TypeQuantized }
func (*Ping) ReplyType() MsgType         { return TypePong }
func (*EmbedBatch) ReplyType() MsgType   { return TypeVectors }
func (*Rerank) ReplyType() MsgType       { return TypeScores }
func (*RerankGroups) ReplyType() MsgType { return TypeScores }
func (*Generate) ReplyType() MsgType     { return TypeText }
func (*Unload) ReplyType() MsgType       { return TypeUnloaded }
func (*Tokenize) ReplyType() MsgType     { return TypeTokens }

func (m *Load) Readdressed(id uint64, _ string) Request     { c := *m; c.ReqID = id; return &c }
func (m *Quantize) Readdressed(id uint64, _ string) Request { c := *m; c.ReqID = id; return &c }
func (m *Ping) Readdressed(id uint64, _ string) Request     { c := *m; c.ReqID = id; return &c }
func (m *EmbedBatch) Readdressed(id uint64, ref string) Request {
	c := *m
	c.ReqID, c.ModelRef = id, orRef(ref, m.ModelRef)
	return &c
}
func (m *Rerank) Readdressed(id uint64, ref string) Request {
	c := *m
	c.ReqID, c.ModelRef = id, orRef(ref, m.ModelRef)
	return &c
}
func (m *RerankGroups) Readdressed(id uint64, ref string) Request {
	c := *m
	c.ReqID, c.ModelRef = id, orRef(ref, m.ModelRef)
	return &c
}
func (m *Generate) Readdressed(id uint64, ref string) Request {
	c := *m
	c.ReqID, c.ModelRef = id, orRef(ref, m.ModelRef)
	return &c
}
func (m *Unload) Readdressed(id uint64, ref string) Request {
	c := *m
	c.ReqID, c.ModelRef = id, orRef(ref, m.ModelRef)
	return &c
}
func (m *Tokenize) Readdressed(id uint64, ref string) Request {
	c := *m
	c.ReqID, c.ModelRef = id, orRef(ref, m.ModelRef)
	return &c
}

func (m *EmbedBatch) NamedModel() string   { return m.ModelRef }
func (m *Rerank) NamedModel() string       { return m.ModelRef }
func (m *RerankGroups) NamedModel() string { return m.ModelRef }
func (m *Generate) NamedModel() string     { return m.ModelRef }
func (m *Unload) NamedModel() string       { return m.ModelRef }
func (m *Tokenize) NamedModel() string     { return m.ModelRef }

func (m *Loaded) SetRequestID(id uint64)    { m.ReqID = id }
func (m *Vectors) SetRequestID(id uint64)   { m.ReqID = id }
func (m *Scores) SetRequestID(id uint64)    { m.ReqID = id }
func (m *Text) SetRequestID(id uint64)      { m.ReqID = id }
func (m *Unloaded) SetRequestID(id uint64)  { m.ReqID = id }
func (m *Pong) SetRequestID(id uint64)      { m.ReqID = id }
func (m *Tokens) SetRequestID(id uint64)    { m.ReqID = id }
func (m *Quantized) SetRequestID(id uint64) { m.ReqID = id }

// Every request and reply type says so at compile time.
var (
	_ ModelRequest = (*EmbedBatch)(nil)
	_ ModelRequest = (*Rerank)(nil)
	_ ModelRequest = (*RerankGroups)(nil)
	_ ModelRequest = (*Generate)(nil)
	_ ModelRequest = (*Unload)(nil)
	_ ModelRequest = (*Tokenize)(nil)
	_ Request      = (*Load)(nil)
	_ Request      = (*Quantize)(nil)
	_ Request      = (*Ping)(nil)
	_ Reply        = (*Loaded)(nil)
	_ Reply        = (*Vectors)(nil)
	_ Reply        = (*Scores)(nil)
	_ Reply        = (*Text)(nil)
	_ Reply        = (*Unloaded)(nil)
	_ Reply        = (*Pong)(nil)
	_ Reply        = (*Tokens)(nil)
	_ Reply        = (*Quantized)(nil)
)
