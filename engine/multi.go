package engine

import (
	"context"

	"github.com/synapse-embed/synapse/wire"
)

// MultiEmbedder is an Engine that gives ColBERT-style multi-vector outputs
// (EMBED_MULTI, an extension): one unit vector per token, the token's final
// hidden state through the model's projection.
type MultiEmbedder interface {
	// EmbedMulti returns, for each sequence in order, its tokens' projected
	// and L2-normalised vectors (len(seq) × dims values), concatenated in
	// one flat slice. Sequence i's tokens from attend[i] on are outside the
	// attention mask (attend[i] 0: none are).
	EmbedMulti(ctx context.Context, modelRef string, seqs [][]int32, attend []int) (vecs []float32, dims int, err error)
}

func init() {
	handleExtension(wire.TypeEmbedMulti, func(s *server, ctx context.Context, m wire.Message) (wire.Message, error) {
		return s.embedMulti(ctx, m.(*wire.EmbedMulti))
	})
}

// embedMulti answers EMBED_MULTI.
func (s *server) embedMulti(ctx context.Context, m *wire.EmbedMulti) (wire.Message, error) {
	total := 0
	for _, it := range m.Items {
		total += it.NTokens
	}
	if total != len(m.IDs) {
		return nil, wire.Errorf(wire.CodeBadRequest, "items announce %d ids; the raw frame holds %d", total, len(m.IDs))
	}
	me, ok := s.eng.(MultiEmbedder)
	if !ok {
		return nil, wire.Errorf(wire.CodeUnsupported, "engine %s gives no multi-vector outputs", s.eng.Info().Name)
	}
	seqs := make([][]int32, len(m.Items))
	counts := make([]int, len(m.Items))
	attend := make([]int, len(m.Items))
	off := 0
	for i, it := range m.Items {
		seqs[i] = m.IDs[off : off+it.NTokens : off+it.NTokens]
		counts[i], attend[i] = it.NTokens, it.Attend
		off += it.NTokens
	}
	vecs, dims, err := me.EmbedMulti(ctx, m.ModelRef, seqs, attend)
	if err != nil {
		return nil, err
	}
	return &wire.MultiVectors{ReqID: m.ReqID, Dims: dims, NTokens: counts, Data: vecs}, nil
}

// EmbedMulti runs on the engine that loaded the model, when it gives
// multi-vector outputs (the ONNX engine does, for a model with a
// projection; the llama.cpp engine does not).
func (m *Mux) EmbedMulti(ctx context.Context, ref string, seqs [][]int32, attend []int) ([]float32, int, error) {
	e, err := m.engineOf(ref)
	if err != nil {
		return nil, 0, err
	}
	me, ok := e.(MultiEmbedder)
	if !ok {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "multi-vector outputs: the engine of model %s (%s) does not give them; use an ONNX export of a ColBERT model", ref, e.Info().Name)
	}
	return me.EmbedMulti(ctx, ref, seqs, attend)
}
