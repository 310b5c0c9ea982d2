//go:build cgo

package engine

import (
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/synapse-embed/synapse/wire"
)

// EmbedSparse gives each sequence its SPLADE vector (SparseEmbedder) from
// the graph's masked-LM logits [batch, sequence, vocab]: the maximum over
// the sequence's real tokens (special tokens included, padding not) of
// log(1 + relu(logit)), as sentence-transformers' SpladePooling computes
// with its defaults. Runs are formed as for Embed.
func (e *ONNX) EmbedSparse(ctx context.Context, ref string, topK int, seqs [][]int32) ([]SparseVector, int, error) {
	m, err := e.model(ref)
	if err != nil {
		return nil, 0, err
	}
	if m.plan.mlm < 0 {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "sparse vectors: model %s has no masked-LM logits output (logits [batch, sequence, vocab])", ref)
	}
	if topK < 0 {
		return nil, 0, wire.Errorf(wire.CodeBadRequest, "top_k %d: want ≥ 0", topK)
	}
	for i, s := range seqs {
		if err := m.checkIDs(s); err != nil {
			return nil, 0, wire.Errorf(wire.CodeBadRequest, "sequence %d: %w", i, err)
		}
	}
	v := m.width[m.plan.mlm]
	out := make([]SparseVector, len(seqs))
	best := make([]float32, v)
	for _, run := range m.runs(seqs, m.cfg.pad) {
		if err := ctx.Err(); err != nil {
			return nil, 0, wire.Errorf(wire.CodeInternal, "embed sparse: %w", err)
		}
		l, err := m.evaluate(seqs, run)
		if err != nil {
			return nil, 0, err
		}
		logits := m.outs[m.plan.mlm]
		for i, s := range run {
			rows := logits[i*l*v : (i*l+len(seqs[s]))*v] // the real tokens; padding rows follow
			out[s] = splade(rows, v, topK, best)
		}
	}
	return out, v, nil
}

// splade pools the logits rows (tokens × v) of one sequence: the weight of
// term t is log(1 + relu(max over tokens of logit_t)), which is the max of
// log(1 + relu(logit_t)) since both functions are monotone. best is
// scratch space of v values.
func splade(rows []float32, v, topK int, best []float32) SparseVector {
	copy(best, rows[:v])
	for off := v; off < len(rows); off += v {
		for t, x := range rows[off : off+v] {
			best[t] = max(best[t], x)
		}
	}
	type pair struct {
		ix  uint32
		val float32
	}
	var kept []pair
	for t, x := range best {
		if x != x { // NaN: kept, so that the module refuses it (never a silent value)
			kept = append(kept, pair{uint32(t), x})
			continue
		}
		if x > 0 {
			if w := float32(math.Log1p(float64(x))); w > 0 {
				kept = append(kept, pair{uint32(t), w})
			}
		}
	}
	if topK > 0 && len(kept) > topK {
		slices.SortFunc(kept, func(a, b pair) int { // largest first; ties: the smaller index
			return cmp.Or(cmp.Compare(b.val, a.val), cmp.Compare(a.ix, b.ix))
		})
		kept = kept[:topK]
		slices.SortFunc(kept, func(a, b pair) int { return cmp.Compare(a.ix, b.ix) })
	}
	sv := SparseVector{Indices: make([]uint32, len(kept)), Values: make([]float32, len(kept))}
	for i, p := range kept {
		sv.Indices[i], sv.Values[i] = p.ix, p.val
	}
	return sv
}
