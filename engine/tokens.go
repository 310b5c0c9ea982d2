package engine

import (
	"context"

	"github.com/synapse-embed/synapse/wire"
)

// TokenEmbedder is an Engine that returns every token's final hidden state
// (EMBED_TOKENS, an extension): what late chunking and multi-vector outputs
// pool or keep.
type TokenEmbedder interface {
	// EmbedTokens returns, for each sequence in order, its tokens' hidden
	// states (len(seq) × dims values), concatenated in one flat slice.
	EmbedTokens(ctx context.Context, modelRef string, seqs [][]int32) (states []float32, dims int, err error)
}

func init() {
	handleExtension(wire.TypeEmbedTokens, func(s *server, ctx context.Context, m wire.Message) (wire.Message, error) {
		return s.embedTokens(ctx, m.(*wire.EmbedTokens))
	})
}

// embedTokens answers EMBED_TOKENS.
func (s *server) embedTokens(ctx context.Context, m *wire.EmbedTokens) (wire.Message, error) {
	total := 0
	for _, it := range m.Items {
		total += it.NTokens
	}
	if total != len(m.IDs) {
		return nil, wire.Errorf(wire.CodeBadRequest, "items announce %d ids; the raw frame holds %d", total, len(m.IDs))
	}
	te, ok := s.eng.(TokenEmbedder)
	if !ok {
		return nil, wire.Errorf(wire.CodeUnsupported, "engine %s has no per-token outputs", s.eng.Info().Name)
	}
	seqs := make([][]int32, len(m.Items))
	counts := make([]int, len(m.Items))
	off := 0
	for i, it := range m.Items {
		seqs[i] = m.IDs[off : off+it.NTokens : off+it.NTokens]
		counts[i] = it.NTokens
		off += it.NTokens
	}
	states, dims, err := te.EmbedTokens(ctx, m.ModelRef, seqs)
	if err != nil {
		return nil, err
	}
	return &wire.TokenStates{ReqID: m.ReqID, Dims: dims, NTokens: counts, Data: states}, nil
}

// EmbedTokens runs on the engine that loaded the model, when it has
// per-token outputs (both engines do).
func (m *Mux) EmbedTokens(ctx context.Context, ref string, seqs [][]int32) ([]float32, int, error) {
	e, err := m.engineOf(ref)
	if err != nil {
		return nil, 0, err
	}
	te, ok := e.(TokenEmbedder)
	if !ok {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "per-token states: the engine of model %s (%s) does not return them; use an ONNX export of the model", ref, e.Info().Name)
	}
	return te.EmbedTokens(ctx, ref, seqs)
}
