//go:build cgo

package engine

import (
	"context"

	"github.com/synapse-embed/synapse/wire"
)

// EmbedTokens returns every token's last_hidden_state row (TokenEmbedder),
// before any pooling or sentence-transformers module: runs are formed as
// for Embed (equal lengths, or padded within ONNXOptions.PadTokens), and
// only the real tokens' rows are returned.
func (e *ONNX) EmbedTokens(ctx context.Context, ref string, seqs [][]int32) ([]float32, int, error) {
	m, err := e.model(ref)
	if err != nil {
		return nil, 0, err
	}
	if m.plan.logits >= 0 {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "model %s is a cross-encoder (loaded with pooling rank): it has no token states to return", ref)
	}
	if m.plan.hidden < 0 {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "per-token states: model %s outputs only sentence_embedding (no last_hidden_state)", ref)
	}
	offs := make([]int, len(seqs)+1)
	for i, s := range seqs {
		if err := m.checkIDs(s); err != nil {
			return nil, 0, wire.Errorf(wire.CodeBadRequest, "sequence %d: %w", i, err)
		}
		offs[i+1] = offs[i] + len(s)
	}
	w := m.width[m.plan.hidden]
	out := make([]float32, offs[len(seqs)]*w)
	for _, run := range m.runs(seqs, m.cfg.pad) {
		if err := ctx.Err(); err != nil {
			return nil, 0, wire.Errorf(wire.CodeInternal, "embed tokens: %w", err)
		}
		l, err := m.evaluate(seqs, run)
		if err != nil {
			return nil, 0, err
		}
		h := m.outs[m.plan.hidden]
		for i, s := range run {
			k := len(seqs[s])
			copy(out[offs[s]*w:offs[s+1]*w], h[i*l*w:i*l*w+k*w])
		}
	}
	return out, w, nil
}
