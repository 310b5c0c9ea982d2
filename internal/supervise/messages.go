package supervise

import (
	"fmt"
	"strings"

	"github.com/synapse-embed/synapse/internal/wire"
)

// ModelKey identifies a (model, config): the artifact's digest (or its path
// when the LOAD carries no digest) and the runtime config it was loaded
// with. Crash budgets and quarantine are kept per ModelKey.
type ModelKey struct {
	Artifact string // "sha256:<hex>", or "path:<artifact_path>"
	Config   wire.RuntimeConfig
}

// KeyOf returns the ModelKey of a LOAD.
func KeyOf(l wire.Load) ModelKey {
	a := l.ArtifactDigest
	if a == "" {
		a = "path:" + l.ArtifactPath
	}
	return ModelKey{Artifact: a, Config: l.RuntimeConfig}
}

func (k ModelKey) String() string {
	c := k.Config
	var b strings.Builder
	b.WriteString(k.Artifact)
	fmt.Fprintf(&b, "{n_ctx=%d n_batch=%d n_ubatch=%d n_threads=%d n_seq_max=%d pooling=%q embeddings=%t}",
		c.ContextSize, c.BatchSize, c.UBatchSize, c.Threads, c.SeqMax, c.Pooling, c.Embeddings)
	return b.String()
}

// modelRefOf returns the model_ref a request names, if its type has one.
func modelRefOf(m wire.Message) (string, bool) {
	switch m := m.(type) {
	case *wire.EmbedBatch:
		return m.ModelRef, true
	case *wire.Rerank:
		return m.ModelRef, true
	case *wire.RerankGroups:
		return m.ModelRef, true
	case *wire.Generate:
		return m.ModelRef, true
	case *wire.Unload:
		return m.ModelRef, true
	case *wire.Tokenize:
		return m.ModelRef, true
	}
	return "", false
}

// prepare returns a shallow copy of request m carrying req_id id and, if m
// names a model and ref is not empty, model_ref ref. The caller's message is
// not modified. A type this package does not know is refused.
func prepare(m wire.Message, id uint64, ref string) (wire.Message, error) {
	switch m := m.(type) {
	case *wire.Load:
		c := *m
		c.ReqID = id
		return &c, nil
	case *wire.EmbedBatch:
		c := *m
		c.ReqID, c.ModelRef = id, pick(ref, m.ModelRef)
		return &c, nil
	case *wire.Rerank:
		c := *m
		c.ReqID, c.ModelRef = id, pick(ref, m.ModelRef)
		return &c, nil
	case *wire.RerankGroups:
		c := *m
		c.ReqID, c.ModelRef = id, pick(ref, m.ModelRef)
		return &c, nil
	case *wire.Generate:
		c := *m
		c.ReqID, c.ModelRef = id, pick(ref, m.ModelRef)
		return &c, nil
	case *wire.Unload:
		c := *m
		c.ReqID, c.ModelRef = id, pick(ref, m.ModelRef)
		return &c, nil
	case *wire.Tokenize:
		c := *m
		c.ReqID, c.ModelRef = id, pick(ref, m.ModelRef)
		return &c, nil
	case *wire.Quantize:
		c := *m
		c.ReqID = id
		return &c, nil
	case *wire.Ping:
		return &wire.Ping{ReqID: id}, nil
	case nil:
		return nil, fmt.Errorf("supervise: nil request")
	}
	return nil, fmt.Errorf("supervise: %s is not a request", m.Type())
}

func pick(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// replyType is the answer a request expects besides ERR.
var replyType = map[wire.MsgType]wire.MsgType{
	wire.TypeLoad:         wire.TypeLoaded,
	wire.TypeEmbedBatch:   wire.TypeVectors,
	wire.TypeRerank:       wire.TypeScores,
	wire.TypeRerankGroups: wire.TypeScores,
	wire.TypeGenerate:     wire.TypeText,
	wire.TypeUnload:       wire.TypeUnloaded,
	wire.TypePing:         wire.TypePong,
	wire.TypeTokenize:     wire.TypeTokens,
	wire.TypeQuantize:     wire.TypeQuantized,
}

// setReplyID gives a reply the caller's req_id back.
func setReplyID(m wire.Message, id uint64) {
	switch m := m.(type) {
	case *wire.Loaded:
		m.ReqID = id
	case *wire.Vectors:
		m.ReqID = id
	case *wire.Scores:
		m.ReqID = id
	case *wire.Text:
		m.ReqID = id
	case *wire.Unloaded:
		m.ReqID = id
	case *wire.Pong:
		m.ReqID = id
	case *wire.Tokens:
		m.ReqID = id
	case *wire.Quantized:
		m.ReqID = id
	}
}

// requestID returns m's req_id, 0 if it has none.
func requestID(m wire.Message) uint64 {
	if r, ok := m.(interface{ RequestID() uint64 }); ok {
		return r.RequestID()
	}
	return 0
}
