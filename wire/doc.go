// Package wire encodes and decodes protocol v1, the messages a synapse module
// and its worker processes exchange over a Unix socket.
//
// # Frames
//
// Everything on the socket is a frame: a u32 little-endian payload length,
// then the payload.
//
//	byte 0       1       2       3       4                 4+length
//	     +-------+-------+-------+-------+------- ... -------+
//	     | length: u32, little-endian    | payload           |
//	     +-------+-------+-------+-------+------- ... -------+
//
// A reader checks the length against the negotiated maximum (HELLO_ACK's
// max_frame, DefaultMaxFrame until then) before allocating anything, and
// refuses a larger frame with *FrameTooLargeError. A stream that ends
// between frames yields io.EOF; one that ends inside a frame,
// io.ErrUnexpectedEOF.
//
// A message is one control frame, a JSON object whose "type" member holds
// the message name (HELLO, EMBED_BATCH, ...) and whose other members are the
// spec's fields, and for EMBED_BATCH, RERANK, GENERATE, VECTORS, SCORES and
// TOKENS (and the extensions' EMBED_TOKENS, TOKEN_STATES, EMBED_SPARSE,
// SPARSE_VECTORS, EMBED_MULTI and MULTI_VECTORS) exactly one raw frame right after it: the token ids (i32)
// or values (f32; SPARSE_VECTORS' (u32, f32) pairs) as a little-endian
// array, with no per-value header. The raw frame's length must match the
// control frame: 4 × Σ n_tokens for EMBED_BATCH, 4 × (query_n_tokens +
// Σ n_tokens) for RERANK, any multiple of 4 for GENERATE, 4 × n × dims for
// VECTORS, 4 × n for SCORES and TOKENS, 8 × Σ nnz for SPARSE_VECTORS,
// 4 × dims × Σ n_tokens for TOKEN_STATES and MULTI_VECTORS. Both
// Send and Recv enforce this; a mismatch is a *ProtocolError. On
// little-endian hosts raw frames are read into and written from the
// []int32/[]uint32/[]float32 slices' own memory, without per-value
// conversion.
//
// # Handshake and one request
//
//	module (listens)                               worker (connects)
//	      |                                               |
//	      |<-- HELLO {v:1, nonce, engine, pid, max_frame} |
//	      |--- HELLO_ACK {v:1, accept:true, max_frame} -->|  both: SetMaxFrame
//	      |                                               |
//	      |--- LOAD {req_id:1, artifact_path, ...} ------>|
//	      |<-- LOADED {req_id:1, model_ref, dims:384} ----|
//	      |                                               |
//	      |--- EMBED_BATCH {req_id:2, model_ref, pooling, |
//	      |      normalize, items:[{id,n_tokens:5},       |
//	      |                        {id,n_tokens:3}]}      |
//	      |--- raw: 8 × i32 token ids (32 bytes) -------->|
//	      |<-- VECTORS {req_id:2, dims:384, n:2} ---------|
//	      |<-- raw: 2 × 384 f32 (3072 bytes) -------------|
//	      |                                               |
//	      |--- SHUTDOWN {} ------------------------------>|  worker exits 0
//
// The bytes Send writes for EMBED_BATCH {req_id:2, model_ref:"m1",
// pooling:"mean", normalize:true, items:[{id:0,n_tokens:2},{id:1,n_tokens:1}]}
// with ids 101, -1, 102 (testdata/embed_batch.golden):
//
//	8a 00 00 00                          control frame, 138 bytes:
//	{"type":"EMBED_BATCH","req_id":2,"model_ref":"m1","pooling":"mean",...}
//	0c 00 00 00                          raw frame, 12 bytes = 4 × (2+1):
//	65 00 00 00  ff ff ff ff  66 00 00 00
//
// # Conn
//
// A Conn carries messages on one socket: Send writes a message (control frame
// plus raw frame) and flushes; Recv reads one and checks the raw frame's
// length against its header before allocating it. Message types implement
// Message with pointer receivers: send &Ping{ReqID: 1}, and switch on
// *EmbedBatch, *Vectors, ... after Recv. One goroutine may Send while another
// Recvs. Any Recv error except *UnknownTypeError leaves the stream position
// unknown and is returned again by later Recv calls; this includes a read
// deadline expiring, so a deadline is a way to give up on the peer, not to
// poll it.
//
// Any request may instead be answered by ERR {req_id, code, msg}; Err.AsError
// turns it into an *Error, which is kept apart from *ProtocolError (the peer
// broke the protocol) and *UnknownTypeError (the peer sent a type this
// version does not know). Codes are stable strings: see Code.
//
// # Versioning and the extensions
//
// Version is the protocol version byte; a module refuses a HELLO with
// another major. Within v1, additions are new message types: a decoder
// facing a well-formed control frame of an unknown type returns
// *UnknownTypeError, with the frame consumed and the Conn still usable, so a
// worker answers ERR{code: unknown_type} and keeps serving, and the module
// treats that answer as the capability being absent. A known type's unknown
// members are ignored, so a peer may add members an older reader skips.
// (SCORES' n, which this package adds, is required: Recv checks the raw
// frame against it.)
//
// TOKENIZE and TOKENS are such an addition, outside the v1 spec text:
//
//	TOKENIZE {req_id, model_ref, text, add_special, parse_special}
//	   → TOKENS {req_id, n} + raw frame of n i32 ids | ERR
//
// A worker tokenizes text with the loaded model's own vocabulary, so the
// module can compare its tokenizer with the engine's. SCORES also carries an
// additive "n" member, the number of f32 scores in its raw frame.
//
// HELLO's additive "extensions" member lists the further extensions a
// worker serves; the module uses one only with workers that announced it:
//
//	RERANK_GROUPS {req_id, model_ref, groups:[{query_n_tokens, candidates:[{n_tokens}]}]}
//	   + raw frame: per group, the query's ids then each candidate's
//	   → SCORES {req_id, n} + raw frame of n f32, candidates of all groups in order | ERR
//
// lets pairs of many queries share one request ("RERANK_GROUPS"), and
//
//	GENERATE {…, temperature, seed}
//
// samples instead of decoding greedily ("GENERATE.sampling"; both members
// are omitted for greedy decoding, which every worker does). A worker that
// announces neither is served with RERANK per query, and a job that asks
// for sampling is refused.
//
// LOAD's runtime_config may carry an "st_modules" member
// ("LOAD.st_modules"): the sentence-transformers chain the module read in an
// ONNX model directory (modules.json and its modules' configs), as one
// string such as "Pooling(mean) + Dense(384->256 tanh bias sha256:…) +
// Normalize". The worker reads the same directory, applies that chain after
// the graph (when it pools last_hidden_state) and refuses the LOAD with
// artifact_invalid when what it reads differs, so that both sides agree on
// the vectors' width and on the modules recorded in the output; LOADED's
// dims is the chain's output width. The member is omitted when the
// directory has no modules. The same extension adds EMBED_BATCH items'
// "pool_from" member (omitted when 0): the number of leading tokens the
// pooling leaves out, the prompt's, for a Pooling module with
// include_prompt false (a worker answers bad_request when it exceeds the
// item's n_tokens). A worker without the extension would ignore both
// members and pool every token, so the module refuses a model with Dense
// or Normalize modules, pooling other than one mean, cls or lasttoken, or
// a prompt left out of the pooling, unless the workers announced
// "LOAD.st_modules".
//
// QUANTIZE and QUANTIZED are another, for the module's model cache:
//
//	QUANTIZE {req_id, artifact_path, artifact_digest, out_path, ftype, threads}
//	   → QUANTIZED {req_id, out_digest, out_size, ms} | ERR
//
// The worker verifies the source's digest, runs the engine's quantizer
// (llama.cpp's llama_model_quantize) into out_path and hashes what it
// wrote. It runs in a worker so that a quantizer crash costs that worker,
// under the request's deadline, like any other request. A worker without
// the extension answers ERR{code: unknown_type}, which the module reports as
// "quantization needs a newer worker"; an engine that has no quantizer
// answers ERR{code: unsupported}. The frames of QUANTIZE {req_id:9,
// artifact_path:"/m/src.gguf", artifact_digest:"sha256:00ff",
// out_path:"/m/tmp/out.gguf", ftype:"q8_0", threads:2}
// (testdata/quantize.golden):
//
//	94 00 00 00                          control frame, 148 bytes, no raw frame:
//	{"type":"QUANTIZE","req_id":9,"artifact_path":"/m/src.gguf",...}
//
// EMBED_TOKENS and TOKEN_STATES are another ("EMBED_TOKENS"), for token-level
// outputs (late chunking, multi-vector):
//
//	EMBED_TOKENS {req_id, model_ref, items:[{id, n_tokens}]} + raw frame of Σ n_tokens i32 ids
//	   → TOKEN_STATES {req_id, dims, n_tokens:[…]} + raw frame of dims × Σ n_tokens f32 | ERR
//
// The answer holds every token's final hidden state (an ONNX graph's
// last_hidden_state), unpooled and unnormalised, item after item. A
// TOKEN_STATES answer is dims times larger than its request, so the
// module sizes each request so that the answer's raw frame, 4 × dims ×
// Σ n_tokens bytes, fits the negotiated max_frame; a worker whose answer would not fit sends
// ERR{code: bad_request} instead, never the oversized frame. A worker that
// announces the extension but whose engine has no per-token outputs for a
// model (an ONNX graph without last_hidden_state) answers
// ERR{code: unsupported}; the
// module probes a loaded model with a one-token EMBED_TOKENS before any
// work and refuses the job on unsupported or unknown_type. The frames of
// EMBED_TOKENS {req_id:10, model_ref:"m1", items:[{id:0,n_tokens:2},{id:1,n_tokens:1}]}
// with ids 101, 7592, 102:
//
//	6a 00 00 00                          control frame, 106 bytes:
//	{"type":"EMBED_TOKENS","req_id":10,"model_ref":"m1","items":[...]}
//	0c 00 00 00                          raw frame, 12 bytes = 4 × (2+1):
//	65 00 00 00  a0 1d 00 00  66 00 00 00
//
// EMBED_SPARSE and SPARSE_VECTORS are another ("EMBED_SPARSE"), for
// SPLADE-style sparse vectors over a masked-LM's vocabulary:
//
//	EMBED_SPARSE {req_id, model_ref, top_k, items:[{id, n_tokens}]} + raw frame of Σ n_tokens i32 ids
//	   → SPARSE_VECTORS {req_id, vocab, nnz:[…]} + raw frame of Σ nnz (u32 index, f32 value) pairs | ERR
//
// The worker runs the model's logits [batch, sequence, vocab] and keeps,
// per item, w_v = max over its tokens of log(1 + relu(logit_tv)) where
// w_v > 0; with top_k > 0 only the top_k largest (ties: the smaller index).
// Each item's pairs are sorted by strictly rising index below vocab, which
// Send and Recv check (a *ProtocolError otherwise); the raw frame is 8 ×
// Σ nnz bytes. Pooling in the worker keeps the answer small: at most a
// pair per distinct token and expansion, not a vocab-wide row per token.
// An answer that would not fit the negotiated max_frame is ERR{code:
// bad_request}; the module splits requests so that even a dense answer
// (vocab pairs per item) fits. An engine or model without masked-LM
// logits answers ERR{code: unsupported}. The frames of EMBED_SPARSE
// {req_id:11, model_ref:"m1", top_k:2, items:[{id:0,n_tokens:2}]} with ids
// 101, 102 and its answer SPARSE_VECTORS {req_id:11, vocab:30522, nnz:[2]}
// with pairs (7, 1.5), (2009, 0.25):
//
//	5e 00 00 00                          control frame, 94 bytes:
//	{"type":"EMBED_SPARSE","req_id":11,"model_ref":"m1","top_k":2,"items":[...]}
//	08 00 00 00                          raw frame, 8 bytes = 4 × 2:
//	65 00 00 00  66 00 00 00
//	3d 00 00 00                          control frame, 61 bytes:
//	{"type":"SPARSE_VECTORS","req_id":11,"vocab":30522,"nnz":[2]}
//	10 00 00 00                          raw frame, 16 bytes = 8 × 2:
//	07 00 00 00  00 00 c0 3f  d9 07 00 00  00 00 80 3e
//
// EMBED_MULTI and MULTI_VECTORS are another ("EMBED_MULTI"), for
// ColBERT-style multi-vector outputs:
//
//	EMBED_MULTI {req_id, model_ref, items:[{id, n_tokens, attend}]} + raw frame of Σ n_tokens i32 ids
//	   → MULTI_VECTORS {req_id, dims, n_tokens:[…]} + raw frame of dims × Σ n_tokens f32 | ERR
//
// The worker runs the model's last_hidden_state, puts every token's state
// through the projection (the Dense modules of a sentence-transformers
// chain that has no Pooling module, as PyLate saves a ColBERT model) and
// L2-normalises it, in float64; the answer holds a unit vector per token,
// item after item. An item's tokens after its first attend (0: none) are
// outside the attention mask, as ColBERT's query expansion runs its
// [MASK] tokens, and are answered too. The answer is 4 × dims × Σ
// n_tokens bytes, which the module keeps within max_frame by splitting
// requests; an answer that would not fit is ERR{code: bad_request}, never
// the frame. A model without last_hidden_state or without a projection
// answers ERR{code: unsupported}. The frames of EMBED_MULTI {req_id:12,
// model_ref:"m1", items:[{id:0,n_tokens:2,attend:1}]} with ids 101, 103:
//
//	5e 00 00 00                          control frame, 94 bytes:
//	{"type":"EMBED_MULTI","req_id":12,"model_ref":"m1","items":[...]}
//	08 00 00 00                          raw frame, 8 bytes = 4 × 2:
//	65 00 00 00  67 00 00 00
//
// A decoder can only skip an unknown message whose raw frame, if any, it
// knows about: an old peer would read the raw frame of an unknown type as a
// control frame and fail with *ProtocolError. So a new type that carries a
// raw frame is sent only to peers known to have it; TOKENIZE and QUANTIZE
// have none, and only a worker that knows them answers with TOKENS or
// QUANTIZED. EMBED_TOKENS has one, so it is sent only to workers that
// announce ExtEmbedTokens in HELLO; the module refuses a token-level job
// before any work when they do not. EMBED_SPARSE and EMBED_MULTI likewise
// go only to workers announcing ExtEmbedSparse and ExtEmbedMulti.
package wire
