package wire

// MsgType is a message's name, carried in a control frame's "type" member
// exactly as protocol v1 writes it.
type MsgType string

// Message types of protocol v1, plus the TOKENIZE/TOKENS and
// QUANTIZE/QUANTIZED extensions (EMBED_TOKENS/TOKEN_STATES: tokens.go;
// EMBED_SPARSE/SPARSE_VECTORS: sparse.go; EMBED_MULTI/MULTI_VECTORS:
// multi.go).
const (
	TypeHello      MsgType = "HELLO"
	TypeHelloAck   MsgType = "HELLO_ACK"
	TypeLoad       MsgType = "LOAD"
	TypeLoaded     MsgType = "LOADED"
	TypeEmbedBatch MsgType = "EMBED_BATCH"
	TypeVectors    MsgType = "VECTORS"
	TypeRerank     MsgType = "RERANK"
	TypeScores     MsgType = "SCORES"
	TypeGenerate   MsgType = "GENERATE"
	TypeText       MsgType = "TEXT"
	TypeUnload     MsgType = "UNLOAD"
	TypeUnloaded   MsgType = "UNLOADED"
	TypePing       MsgType = "PING"
	TypePong       MsgType = "PONG"
	TypeShutdown   MsgType = "SHUTDOWN"
	TypeErr        MsgType = "ERR"
	TypeTokenize   MsgType = "TOKENIZE"
	TypeTokens     MsgType = "TOKENS"
	TypeQuantize   MsgType = "QUANTIZE"
	TypeQuantized  MsgType = "QUANTIZED"
	// TypeRerankGroups is an extension (see the package documentation).
	TypeRerankGroups MsgType = "RERANK_GROUPS"
)

// Extensions a worker announces in HELLO's "extensions" member.
const (
	// ExtRerankGroups: the worker answers RERANK_GROUPS.
	ExtRerankGroups = "RERANK_GROUPS"
	// ExtSampling: the worker honours GENERATE's "temperature" and "seed".
	ExtSampling = "GENERATE.sampling"
	// ExtQuantizeONNX: the worker answers QUANTIZE with "format": "onnx"
	// (an ONNX graph quantized to "int8").
	ExtQuantizeONNX = "QUANTIZE.onnx"
	// ExtSTModules: the ONNX engine applies an ONNX model directory's
	// sentence-transformers modules (LOAD's st_modules).
	ExtSTModules = "LOAD.st_modules"
)

// Message is one protocol message: a control frame and, for EMBED_BATCH,
// RERANK, GENERATE, VECTORS, SCORES, TOKENS, EMBED_TOKENS, TOKEN_STATES,
// EMBED_SPARSE, SPARSE_VECTORS, EMBED_MULTI and MULTI_VECTORS, the raw
// frame that follows it.
// Every message type implements Message with a pointer receiver; Recv returns
// pointers (*Hello, *EmbedBatch, ...) and Send takes them.
//
// Every message with a req_id also implements interface{ RequestID() uint64 }.
type Message interface{ Type() MsgType }

// EngineInfo names the engine a worker runs.
// JSON: {"name", "version", "build_flags"}.
type EngineInfo struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	BuildFlags string `json:"build_flags"`
}

// Hello is the worker's first message.
// JSON: {"type":"HELLO", "v", "nonce", "engine":{...}, "pid", "max_frame"}.
// No raw frame. V is the protocol version byte (Version); Nonce must equal the
// --nonce the worker was spawned with; MaxFrame is the largest frame the
// worker accepts.
//
// "extensions" (additive, omitted when empty) lists the extensions beyond
// v1 the worker serves (ExtRerankGroups, ExtSampling): the module sends an
// extension only to a worker that announced it.
type Hello struct {
	V          int        `json:"v"`
	Nonce      string     `json:"nonce"`
	Engine     EngineInfo `json:"engine"`
	PID        int        `json:"pid"`
	MaxFrame   uint32     `json:"max_frame"`
	Extensions []string   `json:"extensions,omitempty"`
}

// HelloAck is the module's answer to HELLO.
// JSON: {"type":"HELLO_ACK", "v", "accept", "max_frame"}. No raw frame.
// MaxFrame is the negotiated maximum both sides use from then on.
type HelloAck struct {
	V        int    `json:"v"`
	Accept   bool   `json:"accept"`
	MaxFrame uint32 `json:"max_frame"`
}

// RuntimeConfig is LOAD's runtime_config. Zero values mean the engine default.
// JSON: {"n_ctx", "n_batch", "n_ubatch", "n_threads", "n_seq_max", "pooling",
// "embeddings"} and the extension member "vocab_only" (written only when true).
type RuntimeConfig struct {
	ContextSize int    `json:"n_ctx"`
	BatchSize   int    `json:"n_batch"`
	UBatchSize  int    `json:"n_ubatch"`
	Threads     int    `json:"n_threads"`
	SeqMax      int    `json:"n_seq_max"`
	Pooling     string `json:"pooling"`    // one of the Pooling names: "" (model default), "none", "mean", "cls", "last", "rank"
	Embeddings  bool   `json:"embeddings"` // true for embedding/rerank contexts, false for generation
	// VocabOnly (extension) loads the vocabulary alone, no weights and no
	// context: the model serves TOKENIZE only. The other fields must be zero.
	VocabOnly bool `json:"vocab_only,omitempty"`
	// STModules (extension "LOAD.st_modules") is the sentence-transformers
	// chain the module read in an ONNX model directory and expects the
	// worker to apply after the graph (hfmodel.Chain.String: "Pooling(mean)
	// + Dense(384->256 tanh bias sha256:…) + Normalize"); a worker that
	// reads other modules there refuses the LOAD (artifact_invalid).
	STModules string `json:"st_modules,omitempty"`
}

// Load asks the worker to load a model artifact.
// JSON: {"type":"LOAD", "req_id", "artifact_path", "artifact_digest",
// "format", "runtime_config":{...}}. No raw frame. ArtifactDigest is
// "sha256:<hex>"; Format is FormatGGUF or FormatONNX. Answered by LOADED or ERR.
type Load struct {
	ReqID          uint64        `json:"req_id"`
	ArtifactPath   string        `json:"artifact_path"`
	ArtifactDigest string        `json:"artifact_digest"`
	Format         string        `json:"format"`
	RuntimeConfig  RuntimeConfig `json:"runtime_config"`
}

// Loaded answers LOAD.
// JSON: {"type":"LOADED", "req_id", "model_ref", "dims", "cold_load_ms"}.
// No raw frame. ModelRef names the model in later requests; Dims is the
// embedding width (0 for models without embeddings).
type Loaded struct {
	ReqID      uint64 `json:"req_id"`
	ModelRef   string `json:"model_ref"`
	Dims       int    `json:"dims"`
	ColdLoadMS int64  `json:"cold_load_ms"`
}

// Item is one sequence of an EMBED_BATCH. JSON: {"id", "n_tokens"} and the
// extension member "pool_from" (LOAD.st_modules; omitted when 0): pooling
// leaves out the sequence's first pool_from tokens, as a
// sentence-transformers Pooling module with include_prompt false leaves
// out the prompt.
type Item struct {
	ID       uint64 `json:"id"`
	NTokens  int    `json:"n_tokens"`
	PoolFrom int    `json:"pool_from,omitempty"`
}

// EmbedBatch asks for one embedding per item.
// JSON: {"type":"EMBED_BATCH", "req_id", "model_ref", "pooling", "normalize",
// "items":[{"id","n_tokens"}]}, followed by one raw frame of the items'
// token ids concatenated in item order, little-endian i32, exactly
// 4 × Σ n_tokens bytes (IDs). Pooling "" means the model's default.
// Answered by VECTORS or ERR.
type EmbedBatch struct {
	ReqID     uint64  `json:"req_id"`
	ModelRef  string  `json:"model_ref"`
	Pooling   string  `json:"pooling"`
	Normalize bool    `json:"normalize"`
	Items     []Item  `json:"items"`
	IDs       []int32 `json:"-"` // raw frame
}

// Vectors answers EMBED_BATCH.
// JSON: {"type":"VECTORS", "req_id", "dims", "n"}, followed by one raw frame
// of N vectors of Dims little-endian f32 each, row-major in item order,
// exactly 4 × n × dims bytes (Data).
type Vectors struct {
	ReqID uint64    `json:"req_id"`
	Dims  int       `json:"dims"`
	N     int       `json:"n"`
	Data  []float32 `json:"-"` // raw frame, N*Dims values
}

// Candidate is one document of a RERANK. JSON: {"n_tokens"}.
type Candidate struct {
	NTokens int `json:"n_tokens"`
}

// Rerank asks for one relevance score per candidate.
// JSON: {"type":"RERANK", "req_id", "model_ref", "query_n_tokens",
// "candidates":[{"n_tokens"}]}, followed by one raw frame of little-endian
// i32 ids: the query's ids, then each candidate's ids in order, exactly
// 4 × (query_n_tokens + Σ n_tokens) bytes (IDs). Answered by SCORES or ERR.
type Rerank struct {
	ReqID        uint64      `json:"req_id"`
	ModelRef     string      `json:"model_ref"`
	QueryNTokens int         `json:"query_n_tokens"`
	Candidates   []Candidate `json:"candidates"`
	IDs          []int32     `json:"-"` // raw frame
}

// Scores answers RERANK.
// JSON: {"type":"SCORES", "req_id", "n"}, followed by one raw frame of N
// little-endian f32 scores in candidate order, exactly 4 × n bytes (Data).
// The spec writes SCORES {req_id}; "n" is an additive member so the reader
// can check the raw frame.
type Scores struct {
	ReqID uint64    `json:"req_id"`
	N     int       `json:"n"`
	Data  []float32 `json:"-"` // raw frame
}

// RerankGroup is one query and its candidates in RERANK_GROUPS.
// JSON: {"query_n_tokens", "candidates":[{"n_tokens"}]}.
type RerankGroup struct {
	QueryNTokens int         `json:"query_n_tokens"`
	Candidates   []Candidate `json:"candidates"`
}

// RerankGroups (extension) is RERANK for several queries in one request.
// JSON: {"type":"RERANK_GROUPS", "req_id", "model_ref", "groups":[...]},
// followed by one raw frame of little-endian i32 ids: for each group in
// order, its query's ids, then each candidate's ids, exactly
// 4 × Σ (query_n_tokens + Σ n_tokens) bytes (IDs). Answered by SCORES with
// one score per candidate, groups in order, or ERR.
type RerankGroups struct {
	ReqID    uint64        `json:"req_id"`
	ModelRef string        `json:"model_ref"`
	Groups   []RerankGroup `json:"groups"`
	IDs      []int32       `json:"-"` // raw frame
}

// Generate asks for a completion of a prompt.
// JSON: {"type":"GENERATE", "req_id", "model_ref", "max_tokens", "grammar"?,
// "temperature"?, "seed"?}, followed by one raw frame of the prompt's
// little-endian i32 ids, any multiple of 4 bytes (IDs). "grammar" is omitted
// when empty. Answered by TEXT or ERR. "temperature" and "seed" are the
// ExtSampling extension's additive members, omitted when zero (greedy
// decoding): they are sent only to workers that announce ExtSampling, since
// an older worker would ignore them.
type Generate struct {
	ReqID       uint64  `json:"req_id"`
	ModelRef    string  `json:"model_ref"`
	MaxTokens   int     `json:"max_tokens"`
	Grammar     string  `json:"grammar,omitempty"`
	Temperature float32 `json:"temperature,omitempty"`
	Seed        uint32  `json:"seed,omitempty"`
	IDs         []int32 `json:"-"` // raw frame
}

// Text answers GENERATE.
// JSON: {"type":"TEXT", "req_id", "text", "n_prompt", "n_gen",
// "finish_reason"}. No raw frame. FinishReason is "stop", "length" or, from
// workers that say so, "grammar" (the grammar allowed nothing but the end).
type Text struct {
	ReqID        uint64 `json:"req_id"`
	Text         string `json:"text"`
	NPrompt      int    `json:"n_prompt"`
	NGen         int    `json:"n_gen"`
	FinishReason string `json:"finish_reason"`
}

// Unload asks the worker to free a model.
// JSON: {"type":"UNLOAD", "req_id", "model_ref"}. No raw frame.
// Answered by UNLOADED or ERR.
type Unload struct {
	ReqID    uint64 `json:"req_id"`
	ModelRef string `json:"model_ref"`
}

// Unloaded answers UNLOAD. JSON: {"type":"UNLOADED", "req_id"}. No raw frame.
type Unloaded struct {
	ReqID uint64 `json:"req_id"`
}

// Ping asks for the worker's state. JSON: {"type":"PING", "req_id"}.
// No raw frame. Answered by PONG.
type Ping struct {
	ReqID uint64 `json:"req_id"`
}

// Pong answers PING.
// JSON: {"type":"PONG", "req_id", "rss_mb", "models_loaded",
// "placement_share"?}. No raw frame. PlacementShare is omitted when nil.
type Pong struct {
	ReqID          uint64   `json:"req_id"`
	RSSMB          int      `json:"rss_mb"`
	ModelsLoaded   []string `json:"models_loaded"`
	PlacementShare *float64 `json:"placement_share,omitempty"`
}

// Shutdown asks the worker to exit 0 after its current request.
// JSON: {"type":"SHUTDOWN"}. No raw frame, no answer.
type Shutdown struct{}

// Err answers any request that failed.
// JSON: {"type":"ERR", "req_id", "code", "msg"}. No raw frame.
type Err struct {
	ReqID uint64 `json:"req_id"`
	Code  Code   `json:"code"`
	Msg   string `json:"msg"`
}

// AsError returns the reported failure as an *Error.
func (m *Err) AsError() *Error { return &Error{Code: m.Code, Msg: m.Msg, ReqID: m.ReqID} }

// Tokenize (extension) asks the worker to tokenize text with a loaded
// model's own tokenizer. JSON: {"type":"TOKENIZE", "req_id", "model_ref",
// "text", "add_special", "parse_special"}. No raw frame. Answered by TOKENS,
// or ERR{code: unknown_type} from a worker without the extension.
type Tokenize struct {
	ReqID        uint64 `json:"req_id"`
	ModelRef     string `json:"model_ref"`
	Text         string `json:"text"`
	AddSpecial   bool   `json:"add_special"`
	ParseSpecial bool   `json:"parse_special"`
}

// Tokens (extension) answers TOKENIZE.
// JSON: {"type":"TOKENS", "req_id", "n"}, followed by one raw frame of N
// little-endian i32 ids, exactly 4 × n bytes (IDs).
type Tokens struct {
	ReqID uint64  `json:"req_id"`
	N     int     `json:"n"`
	IDs   []int32 `json:"-"` // raw frame
}

// Quantize (extension) asks the worker to write a quantized copy of a model
// artifact. JSON: {"type":"QUANTIZE", "req_id", "artifact_path",
// "artifact_digest", "out_path", "ftype", "threads"}. No raw frame. The
// worker verifies artifact_digest ("sha256:<hex>") as LOAD does, refuses an
// out_path that exists, and writes the copy there with every weight matrix
// it can quantize stored as FType, a file type name ("q8_0", "q4_k_m",
// "f16": gguf.ParseFileType). Threads 0 means the engine's default.
// Answered by QUANTIZED, or ERR (artifact_invalid, bad_request, unsupported
// for an engine that cannot quantize, unknown_type from a worker without the
// extension).
//
// The additive member "format" (omitted for GGUF) is "onnx" for an ONNX
// graph (a .onnx file), whose FType is "int8": the worker writes its
// dynamically quantized form. It is sent only to workers that announce
// ExtQuantizeONNX; an older worker would ignore it.
type Quantize struct {
	ReqID          uint64 `json:"req_id"`
	ArtifactPath   string `json:"artifact_path"`
	ArtifactDigest string `json:"artifact_digest"`
	OutPath        string `json:"out_path"`
	FType          string `json:"ftype"`
	Threads        int    `json:"threads"`
	Format         string `json:"format,omitempty"`
}

// Quantized (extension) answers QUANTIZE.
// JSON: {"type":"QUANTIZED", "req_id", "out_digest", "out_size", "ms"}. No
// raw frame. OutDigest is "sha256:<hex>" of the file written, OutSize its
// size in bytes, MS the time the quantizer took.
type Quantized struct {
	ReqID     uint64 `json:"req_id"`
	OutDigest string `json:"out_digest"`
	OutSize   int64  `json:"out_size"`
	MS        int64  `json:"ms"`
}

func (*Hello) Type() MsgType        { return TypeHello }
func (*HelloAck) Type() MsgType     { return TypeHelloAck }
func (*Load) Type() MsgType         { return TypeLoad }
func (*Loaded) Type() MsgType       { return TypeLoaded }
func (*EmbedBatch) Type() MsgType   { return TypeEmbedBatch }
func (*Vectors) Type() MsgType      { return TypeVectors }
func (*Rerank) Type() MsgType       { return TypeRerank }
func (*Scores) Type() MsgType       { return TypeScores }
func (*Generate) Type() MsgType     { return TypeGenerate }
func (*Text) Type() MsgType         { return TypeText }
func (*Unload) Type() MsgType       { return TypeUnload }
func (*Unloaded) Type() MsgType     { return TypeUnloaded }
func (*Ping) Type() MsgType         { return TypePing }
func (*Pong) Type() MsgType         { return TypePong }
func (*Shutdown) Type() MsgType     { return TypeShutdown }
func (*Err) Type() MsgType          { return TypeErr }
func (*Tokenize) Type() MsgType     { return TypeTokenize }
func (*Tokens) Type() MsgType       { return TypeTokens }
func (*RerankGroups) Type() MsgType { return TypeRerankGroups }

func (m *Load) RequestID() uint64         { return m.ReqID }
func (m *Loaded) RequestID() uint64       { return m.ReqID }
func (m *EmbedBatch) RequestID() uint64   { return m.ReqID }
func (m *Vectors) RequestID() uint64      { return m.ReqID }
func (m *Rerank) RequestID() uint64       { return m.ReqID }
func (m *Scores) RequestID() uint64       { return m.ReqID }
func (m *Generate) RequestID() uint64     { return m.ReqID }
func (m *Text) RequestID() uint64         { return m.ReqID }
func (m *Unload) RequestID() uint64       { return m.ReqID }
func (m *Unloaded) RequestID() uint64     { return m.ReqID }
func (m *Ping) RequestID() uint64         { return m.ReqID }
func (m *Pong) RequestID() uint64         { return m.ReqID }
func (m *Err) RequestID() uint64          { return m.ReqID }
func (m *Tokenize) RequestID() uint64     { return m.ReqID }
func (m *Tokens) RequestID() uint64       { return m.ReqID }
func (m *RerankGroups) RequestID() uint64 { return m.ReqID }
func (*Quantize) Type() MsgType           { return TypeQuantize }
func (*Quantized) Type() MsgType          { return TypeQuantized }
func (m *Quantize) RequestID() uint64     { return m.ReqID }
func (m *Quantized) RequestID() uint64    { return m.ReqID }

// newMessage returns a zero message of a known type, or nil.
func newMessage(t MsgType) Message {
	switch t {
	case TypeHello:
		return new(Hello)
	case TypeHelloAck:
		return new(HelloAck)
	case TypeLoad:
		return new(Load)
	case TypeLoaded:
		return new(Loaded)
	case TypeEmbedBatch:
		return new(EmbedBatch)
	case TypeVectors:
		return new(Vectors)
	case TypeRerank:
		return new(Rerank)
	case TypeScores:
		return new(Scores)
	case TypeGenerate:
		return new(Generate)
	case TypeText:
		return new(Text)
	case TypeUnload:
		return new(Unload)
	case TypeUnloaded:
		return new(Unloaded)
	case TypePing:
		return new(Ping)
	case TypePong:
		return new(Pong)
	case TypeShutdown:
		return new(Shutdown)
	case TypeErr:
		return new(Err)
	case TypeTokenize:
		return new(Tokenize)
	case TypeTokens:
		return new(Tokens)
	case TypeRerankGroups:
		return new(RerankGroups)
	case TypeQuantize:
		return new(Quantize)
	case TypeQuantized:
		return new(Quantized)
	}
	if f := extensions[t]; f != nil {
		return f()
	}
	return nil
}

// extensions are the message types an extension's file adds (register).
var extensions = map[MsgType]func() Message{}

// register adds an extension's message type, from its file's init: the
// one line that makes the codec know it.
func register(t MsgType, zero func() Message) {
	if _, dup := extensions[t]; dup {
		panic("wire: message type " + string(t) + " registered twice")
	}
	extensions[t] = zero
}
