package engine

import (
	"context"

	"github.com/synapse-embed/synapse/wire"
)

// SparseVector is one sequence's SPLADE vector: indices strictly rising,
// each with its weight (> 0).
type SparseVector struct {
	Indices []uint32
	Values  []float32
}

// SparseEmbedder is an Engine that gives SPLADE-style sparse vectors
// (EMBED_SPARSE, an extension) from a masked-LM's logits.
type SparseEmbedder interface {
	// EmbedSparse returns, for each sequence in order, w_v = max over its
	// tokens of log(1 + relu(logit_tv)) where w_v > 0 (with topK > 0, only
	// the topK largest, ties to the smaller index), sorted by index; and
	// the vocabulary's size.
	EmbedSparse(ctx context.Context, modelRef string, topK int, seqs [][]int32) (vecs []SparseVector, vocab int, err error)
}

func init() {
	handleExtension(wire.TypeEmbedSparse, func(s *server, ctx context.Context, m wire.Message) (wire.Message, error) {
		return s.embedSparse(ctx, m.(*wire.EmbedSparse))
	})
}

// embedSparse answers EMBED_SPARSE.
func (s *server) embedSparse(ctx context.Context, m *wire.EmbedSparse) (wire.Message, error) {
	total := 0
	for _, it := range m.Items {
		total += it.NTokens
	}
	if total != len(m.IDs) {
		return nil, wire.Errorf(wire.CodeBadRequest, "items announce %d ids; the raw frame holds %d", total, len(m.IDs))
	}
	se, ok := s.eng.(SparseEmbedder)
	if !ok {
		return nil, wire.Errorf(wire.CodeUnsupported, "engine %s gives no sparse vectors", s.eng.Info().Name)
	}
	seqs := make([][]int32, len(m.Items))
	off := 0
	for i, it := range m.Items {
		seqs[i] = m.IDs[off : off+it.NTokens : off+it.NTokens]
		off += it.NTokens
	}
	vecs, vocab, err := se.EmbedSparse(ctx, m.ModelRef, m.TopK, seqs)
	if err != nil {
		return nil, err
	}
	resp := &wire.SparseVectors{ReqID: m.ReqID, Vocab: vocab, NNZ: make([]int, 0, len(vecs))}
	for _, v := range vecs {
		resp.AppendSparse(v.Indices, v.Values)
	}
	return resp, nil
}

// EmbedSparse runs on the engine that loaded the model, when it gives
// sparse vectors (the ONNX engine does, for a graph with masked-LM
// logits; the llama.cpp engine does not).
func (m *Mux) EmbedSparse(ctx context.Context, ref string, topK int, seqs [][]int32) ([]SparseVector, int, error) {
	e, err := m.engineOf(ref)
	if err != nil {
		return nil, 0, err
	}
	se, ok := e.(SparseEmbedder)
	if !ok {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "sparse vectors: the engine of model %s (%s) does not give them; use an ONNX export of a masked-LM (logits [batch, sequence, vocab])", ref, e.Info().Name)
	}
	return se.EmbedSparse(ctx, ref, topK, seqs)
}
