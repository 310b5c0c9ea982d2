package supervise

import (
	"fmt"
	"strings"

	"github.com/synapse-embed/synapse/wire"
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
	if r, ok := m.(wire.ModelRequest); ok {
		return r.NamedModel(), true
	}
	return "", false
}

// prepare returns request m readdressed for a worker: a shallow copy
// carrying req_id id and, if m names a model and ref is not empty,
// model_ref ref (wire.Request.Readdressed). The caller's message is not
// modified. A message that is not a request is refused.
func prepare(m wire.Message, id uint64, ref string) (wire.Message, error) {
	if m == nil {
		return nil, fmt.Errorf("supervise: nil request")
	}
	r, ok := m.(wire.Request)
	if !ok {
		return nil, fmt.Errorf("supervise: %s is not a request", m.Type())
	}
	return r.Readdressed(id, ref), nil
}

// setReplyID gives a reply the caller's req_id back.
func setReplyID(m wire.Message, id uint64) {
	if r, ok := m.(wire.Reply); ok {
		r.SetRequestID(id)
	}
}

// requestID returns m's req_id, 0 if it has none.
func requestID(m wire.Message) uint64 {
	if r, ok := m.(interface{ RequestID() uint64 }); ok {
		return r.RequestID()
	}
	return 0
}
