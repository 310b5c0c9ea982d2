package search

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/synapse-embed/synapse/io/output"
)

// Sparse outputs (synapse embed --vectors sparse) are searched by the
// exact sparse dot product Σ_v q_v × d_v over the terms both hold,
// accumulated in float64 in rising term order and rounded to float32: a
// block's queries as an inverted index (term → queries and weights), every
// corpus row's terms looked up in it. A document's score is its best
// chunk's, ties broken by document id as for dense vectors (fold, topK).

// sparseCols are a sparse batch's sparse_indices and sparse_values.
type sparseCols struct {
	ix, vals *array.List
	ixv      []uint32
	valv     []float32
}

// terms returns row i's indices and values.
func (c *sparseCols) terms(i int) ([]uint32, []float32) {
	a, e := c.ix.ValueOffsets(i)
	va, ve := c.vals.ValueOffsets(i)
	return c.ixv[a:e], c.valv[va:ve]
}

// sparseOf reads a sparse batch's vector columns and checks their terms:
// as many values as indices, indices rising below the vocabulary, values
// finite.
func (v *Vectors) sparseOf(b *batch) error {
	sc := b.rec.Schema()
	ix, ok := b.rec.Column(sc.FieldIndices(output.ColSparseIndices)[0]).(*array.List)
	vals, ok2 := b.rec.Column(sc.FieldIndices(output.ColSparseValues)[0]).(*array.List)
	if !ok || !ok2 {
		return fmt.Errorf("%w: sparse columns of another type", ErrInput)
	}
	ixv, ok := ix.ListValues().(*array.Uint32)
	valv, ok2 := vals.ListValues().(*array.Float32)
	if !ok || !ok2 {
		return fmt.Errorf("%w: sparse columns of another type", ErrInput)
	}
	c := &sparseCols{ix: ix, vals: vals, ixv: ixv.Uint32Values(), valv: valv.Float32Values()}
	for i := range int(b.rec.NumRows()) {
		a, e := ix.ValueOffsets(i)
		va, ve := vals.ValueOffsets(i)
		if e-a != ve-va || a < 0 || int(e) > len(c.ixv) || int(ve) > len(c.valv) {
			return fmt.Errorf("%w: %s %s: row %d (id %s): %d sparse indices, %d values", ErrInput, v.what, b.path, b.row0+int64(i), b.ids.Value(i), e-a, ve-va)
		}
		terms, ws := c.terms(i)
		for j, t := range terms {
			if int(t) >= v.Dims || j > 0 && t <= terms[j-1] || math.IsNaN(float64(ws[j])) || math.IsInf(float64(ws[j]), 0) {
				return fmt.Errorf("%w: %s %s: row %d (id %s): term %d (weight %v) out of order, outside the vocabulary of %d or not finite",
					ErrInput, v.what, b.path, b.row0+int64(i), b.ids.Value(i), t, ws[j], v.Dims)
			}
		}
	}
	b.sparse = c
	return nil
}

// posting is a query's weight for a term.
type posting struct {
	q int32
	w float32
}

// sparseBlock is up to Options.Block sparse queries as an inverted index.
type sparseBlock struct {
	ids   []string
	index map[uint32][]posting
}

// runSparse is Run for a sparse corpus.
func (s *searcher) runSparse(ctx context.Context, emit func(query string, hits []Hit) error) error {
	b := &sparseBlock{index: map[uint32][]posting{}}
	flush := func() error {
		tops, err := s.sparsePass(ctx, b)
		if err != nil {
			return err
		}
		s.stats.Queries += len(b.ids)
		for i, id := range b.ids {
			if err := emit(id, tops[i].hits()); err != nil {
				return err
			}
		}
		b = &sparseBlock{index: map[uint32][]posting{}}
		return nil
	}
	err := s.o.Queries.eachBatch(ctx, func(bt *batch) error {
		for i := range int(bt.rec.NumRows()) {
			id := bt.ids.Value(i)
			if c := bt.chunks.Value(i); c != 0 {
				return fmt.Errorf("%w: query %s has more than one chunk (chunk %d): embed the queries with --chunk-tokens large enough for each", ErrInput, id, c)
			}
			q := int32(len(b.ids))
			terms, ws := bt.sparse.terms(i)
			for j, t := range terms {
				b.index[t] = append(b.index[t], posting{q, ws[j]})
			}
			b.ids = append(b.ids, strings.Clone(id))
			if len(b.ids) == s.o.Block {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil && len(b.ids) > 0 {
		err = flush()
	}
	return err
}

// sparsePass streams the corpus once, scoring every chunk against the
// block's queries.
func (s *searcher) sparsePass(ctx context.Context, b *sparseBlock) ([]*topK, error) {
	nq := len(b.ids)
	st := newPassState(nq, s.o.K)
	var acc []float64
	var scores []float32
	var rows int64
	err := s.o.Corpus.eachBatch(ctx, func(bt *batch) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(bt.rec.NumRows())
		acc = grow(acc, nq*n)
		clear(acc)
		for r := range n {
			terms, ws := bt.sparse.terms(r)
			for j, t := range terms {
				for _, p := range b.index[t] {
					acc[int(p.q)*n+r] += float64(p.w) * float64(ws[j])
				}
			}
		}
		st.starts = docStarts(bt, st.lastID, rows == 0)
		scores = grow(scores, n)
		for q := range nq {
			for r := range n {
				scores[r] = float32(acc[q*n+r])
			}
			if n > 0 {
				fold(st.tops[q], &st.best[q], &st.floor[q], scores[:n], st.starts, bt, 0, st.lastID)
			}
		}
		if n > 0 {
			st.lastID = strings.Clone(bt.ids.Value(n - 1))
		}
		rows += int64(n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.endPass(st, rows), nil
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// sparseSchema reports whether an embedding output's schema holds sparse
// vectors, checking their columns' types.
func sparseSchema(sc *arrow.Schema) (bool, error) {
	if !output.IsSparse(sc) {
		return false, nil
	}
	for _, c := range []struct {
		name string
		elem arrow.DataType
	}{{output.ColSparseIndices, arrow.PrimitiveTypes.Uint32}, {output.ColSparseValues, arrow.PrimitiveTypes.Float32}} {
		idx := sc.FieldIndices(c.name)
		l, ok := sc.Field(idx[0]).Type.(*arrow.ListType)
		if len(idx) != 1 || !ok || !arrow.TypeEqual(l.Elem(), c.elem) {
			return false, fmt.Errorf("%s is not a list<%s>", c.name, c.elem)
		}
	}
	return true, nil
}
