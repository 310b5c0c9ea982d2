package engine

import (
	"context"

	"github.com/hybridgroup/yzma/pkg/llama"

	"github.com/synapse-embed/synapse/wire"
)

// EmbedTokens returns every token's output embedding (TokenEmbedder), from
// a context with pooling none (llama_get_embeddings_ith), created on first
// use beside the model's other contexts. Sequences are packed into calls
// as Embed packs them.
func (e *Llama) EmbedTokens(ctx context.Context, ref string, seqs [][]int32) ([]float32, int, error) {
	m, err := e.runnable(ref, "embed tokens")
	if err != nil {
		return nil, 0, err
	}
	if !m.cfg.embeddings {
		return nil, 0, wire.Errorf(wire.CodeBadRequest, "model %s was loaded for generation (embeddings: false)", ref)
	}
	c, err := m.context(llama.PoolingTypeNone)
	if err != nil {
		return nil, 0, err
	}
	dims := m.width(llama.PoolingTypeNone)
	limit := min(m.cfg.nUBatch, m.cfg.nCtx)
	total := 0
	for i, s := range seqs {
		if err := m.checkIDs(s, limit); err != nil {
			return nil, 0, wire.Errorf(wire.CodeBadRequest, "sequence %d: %w", i, err)
		}
		total += len(s)
	}
	out := make([]float32, 0, total*dims)
	for start := 0; start < len(seqs); {
		if err := ctx.Err(); err != nil {
			return nil, 0, wire.Errorf(wire.CodeInternal, "embed tokens: %w", err)
		}
		end, tokens := start, 0
		for end < len(seqs) && end-start < m.cfg.seqMax && tokens+len(seqs[end]) <= limit {
			tokens += len(seqs[end])
			end++
		}
		if err := m.eval(c, seqs[start:end], tokens); err != nil {
			return nil, 0, err
		}
		for i := range tokens {
			v, _ := llama.GetEmbeddingsIth(c, int32(i), int32(dims))
			if v == nil {
				return nil, 0, wire.Errorf(wire.CodeInternal, "llama.cpp returned no embedding for token %d of the call", i)
			}
			out = append(out, v...)
		}
		start = end
	}
	return out, dims, nil
}
