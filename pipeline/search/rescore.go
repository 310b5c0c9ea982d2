package search

import (
	"context"
	"fmt"

	"github.com/synapse-embed/synapse/io/vector"
)

// candidate is a (query, document) pair kept for rescoring.
type candidate struct {
	q    int
	best float32
	seen bool
}

// rescore re-scores the candidates of a block with the float queries
// against the vectors of Options.RescoreWith (or the corpus's own), a
// document's score again being its best chunk's, and keeps the K best.
func (s *searcher) rescore(ctx context.Context, b *queryBlock, tops []*topK) ([][]Hit, error) {
	src := s.o.RescoreWith
	if src == nil {
		src = s.o.Corpus
	}
	var cands []candidate
	byDoc := map[string][]int32{}
	for q, t := range tops {
		for _, h := range t.h {
			byDoc[h.Doc] = append(byDoc[h.Doc], int32(len(cands)))
			cands = append(cands, candidate{q: q, best: noDoc})
		}
	}
	dims := s.o.Queries.Dims
	var v []float32
	err := src.eachBatch(ctx, func(bt *batch) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		for i := range bt.vecs.Rows {
			idx, ok := byDoc[bt.ids.Value(i)]
			if !ok {
				continue
			}
			v = vector.Decode(v[:0], src.Dtype, dims, bt.vecs.Row(i), src.Ranges)
			if err := src.checkFinite(bt, i, v, dims); err != nil {
				return err
			}
			for _, c := range idx {
				cd := &cands[c]
				sc := dotF32(b.float[cd.q*dims:(cd.q+1)*dims], v)
				cd.best, cd.seen = max(cd.best, sc), true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([][]Hit, len(tops))
	for doc, idx := range byDoc {
		for _, c := range idx {
			cd := cands[c]
			if !cd.seen {
				return nil, fmt.Errorf("%w: --rescore-with %s has no document %s of the corpus", ErrInput, src.Paths[0], doc)
			}
			out[cd.q] = append(out[cd.q], Hit{Doc: doc, Score: cd.best})
		}
	}
	for q := range out {
		sortHits(out[q])
		out[q] = out[q][:min(len(out[q]), s.o.K)]
	}
	s.stats.Pairs += int64(len(cands))
	return out, nil
}
