//go:build cgo

package engine

import (
	"context"

	"github.com/synapse-embed/synapse/wire"
)

// EmbedMulti gives every token of each sequence its ColBERT vector
// (MultiEmbedder): its last_hidden_state row through the chain's Dense
// modules, then L2-normalised, in float64, as PyLate's ColBERT computes
// token_embeddings and normalises them. The model's chain must be a
// multi-vector one (hfmodel.Chain.MultiVector: Dense modules and no
// Pooling); a model without one is refused, not answered with its raw
// states. Runs are formed as for Embed; a sequence's tokens from attend[s]
// on are outside the attention mask and answered all the same.
func (e *ONNX) EmbedMulti(ctx context.Context, ref string, seqs [][]int32, attend []int) ([]float32, int, error) {
	m, err := e.model(ref)
	if err != nil {
		return nil, 0, err
	}
	if m.plan.hidden < 0 || m.plan.logits >= 0 {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "multi-vector outputs: model %s has no last_hidden_state to project", ref)
	}
	if !m.chain.projection {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "multi-vector outputs: model %s has no projection (a sentence-transformers Dense module right after its Transformer, as a PyLate ColBERT model has)", ref)
	}
	offs := make([]int, len(seqs)+1)
	for i, s := range seqs {
		if err := m.checkIDs(s); err != nil {
			return nil, 0, wire.Errorf(wire.CodeBadRequest, "sequence %d: %w", i, err)
		}
		offs[i+1] = offs[i] + len(s)
	}
	w, dims := m.width[m.plan.hidden], m.chain.dims(m.width[m.plan.hidden])
	out := make([]float32, offs[len(seqs)]*dims)
	for _, run := range m.runs(seqs, m.cfg.pad) {
		if err := ctx.Err(); err != nil {
			return nil, 0, wire.Errorf(wire.CodeInternal, "embed multi: %w", err)
		}
		l, err := m.evaluateAttend(seqs, run, attend)
		if err != nil {
			return nil, 0, err
		}
		h := m.outs[m.plan.hidden]
		for i, s := range run {
			for j := range len(seqs[s]) {
				row := h[(i*l+j)*w : (i*l+j+1)*w]
				m.chain.project(row, out[(offs[s]+j)*dims:(offs[s]+j+1)*dims])
			}
		}
	}
	return out, dims, nil
}
