package search

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/vector"
)

// Multi-vector outputs (synapse embed --vectors tokens) are searched by
// ColBERT's MaxSim, exactly (no candidate generation, every chunk of the
// corpus scored): a chunk's score for a query is the sum over the query's
// token vectors of the largest dot product with one of the chunk's token
// vectors. Each group of 4 query tokens is scored against all the token
// vectors of a corpus batch with the dense block kernel (float32 products,
// as dense search), each chunk's maxima are taken over its own tokens and
// summed in float64, rounded to float32. A document's score is its best
// chunk's, ties broken by document id as for dense vectors (fold, topK).

// tokenCols are a multi-vector batch's token vectors as float32: row i's
// tokens are vals[off[i]*dims : off[i+1]*dims].
type tokenCols struct {
	off  []int
	vals []float32
}

// tokens returns row i's token vectors, dims values each.
func (c *tokenCols) tokens(i, dims int) []float32 {
	return c.vals[c.off[i]*dims : c.off[i+1]*dims]
}

// tokensSchema reports whether an embedding output's schema holds token
// vectors, checking their column's type: list<fixed_size_list<float32 or
// float16, dims>>.
func tokensSchema(sc *arrow.Schema, dims int) (vector.Dtype, bool, error) {
	if !output.IsTokens(sc) {
		return "", false, nil
	}
	idx := sc.FieldIndices(output.ColTokenVectors)
	l, ok := sc.Field(idx[0]).Type.(*arrow.ListType)
	if len(idx) != 1 || !ok {
		return "", false, fmt.Errorf("%s is not a list", output.ColTokenVectors)
	}
	for _, d := range []vector.Dtype{vector.Float32, vector.Float16} {
		if vector.CheckType(l.Elem(), d, dims) == nil {
			return d, true, nil
		}
	}
	return "", false, fmt.Errorf("%s is a list of %s: synapse search scores float32 or float16 token vectors of %d dims", output.ColTokenVectors, l.Elem(), dims)
}

// tokensOf reads a multi-vector batch's token vectors as float32 and
// checks them: finite, and every row with at least one.
func (v *Vectors) tokensOf(b *batch) error {
	sc := b.rec.Schema()
	l, ok := b.rec.Column(sc.FieldIndices(output.ColTokenVectors)[0]).(*array.List)
	if !ok {
		return fmt.Errorf("%w: %s of another type", ErrInput, output.ColTokenVectors)
	}
	fsl, ok := l.ListValues().(*array.FixedSizeList)
	if !ok {
		return fmt.Errorf("%w: %s of another type", ErrInput, output.ColTokenVectors)
	}
	n := int(b.rec.NumRows())
	c := &tokenCols{off: make([]int, n+1)}
	a0, _ := l.ValueOffsets(0)
	for i := range n {
		a, e := l.ValueOffsets(i)
		if e <= a || int(e) > fsl.Len() {
			return fmt.Errorf("%w: %s %s: row %d (id %s): no token vectors", ErrInput, v.what, b.path, b.row0+int64(i), b.ids.Value(i))
		}
		c.off[i+1] = int(e - a0)
	}
	total := c.off[n] * v.Dims
	base := int(a0) * v.Dims
	switch vals := fsl.ListValues().(type) {
	case *array.Float32:
		c.vals = vals.Float32Values()[base : base+total]
	case *array.Float16:
		c.vals = make([]float32, total)
		for k := range c.vals {
			c.vals[k] = vals.Value(base + k).Float32()
		}
	default:
		return fmt.Errorf("%w: %s of %s", ErrInput, output.ColTokenVectors, fsl.ListValues().DataType())
	}
	for i := range n {
		if err := v.checkFinite(b, i, c.tokens(i, v.Dims), v.Dims*(c.off[i+1]-c.off[i])); err != nil {
			return err
		}
	}
	b.tokens = c
	return nil
}

// compatibleTokens refuses queries and a corpus that MaxSim cannot score
// together: not both token vectors, the corpus not documents or the
// queries not queries (embed --as-query), or embedded otherwise (model,
// projection, width, markers and lengths).
func compatibleTokens(queries, corpus *Vectors) error {
	q, c := queries.Settings, corpus.Settings
	switch {
	case !corpus.Tokens:
		return fmt.Errorf("%w: token-vector queries (embed --vectors tokens) cannot search a corpus of one vector a chunk: embed the corpus with --vectors tokens", ErrInput)
	case !queries.Tokens:
		return fmt.Errorf("%w: a token-vector corpus (embed --vectors tokens) is searched by MaxSim: embed the queries with --vectors tokens --as-query", ErrInput)
	case c.Output != "tokens":
		return fmt.Errorf("%w: the corpus holds token vectors of queries (output %q): embed it without --as-query", ErrInput, c.Output)
	case q.Output != "tokens-query":
		return fmt.Errorf("%w: the queries were embedded as documents (output %q): embed them with --vectors tokens --as-query (the query marker and expansion)", ErrInput, q.Output)
	}
	for _, f := range []struct {
		name   string
		qv, cv any
	}{
		{"model_digest", q.ModelDigest, c.ModelDigest}, {"dims", queries.Dims, corpus.Dims}, {"modules", q.Modules, c.Modules}, {"tokens", q.Tokens, c.Tokens},
	} {
		if f.qv != f.cv {
			return fmt.Errorf("%w: the queries and the corpus were embedded otherwise: %s: queries %v, corpus %v", ErrInput, f.name, f.qv, f.cv)
		}
	}
	return nil
}

// tokenQuery is one query's token vectors, padded with zero vectors to a
// multiple of 4.
type tokenQuery struct {
	n    int // its real tokens
	vecs []float32
}

// runTokens is Run for a multi-vector corpus.
func (s *searcher) runTokens(ctx context.Context, emit func(query string, hits []Hit) error) error {
	dims := s.o.Corpus.Dims
	var ids []string
	var qs []tokenQuery
	flush := func() error {
		tops, err := s.maxSimPass(ctx, qs)
		if err != nil {
			return err
		}
		s.stats.Queries += len(ids)
		for i, id := range ids {
			if err := emit(id, tops[i].hits()); err != nil {
				return err
			}
		}
		ids, qs = nil, nil
		return nil
	}
	err := s.o.Queries.eachBatch(ctx, func(bt *batch) error {
		for i := range int(bt.rec.NumRows()) {
			id := bt.ids.Value(i)
			if c := bt.chunks.Value(i); c != 0 {
				return fmt.Errorf("%w: query %s has more than one chunk (chunk %d): embed the queries with --as-query", ErrInput, id, c)
			}
			t := bt.tokens.tokens(i, dims)
			n := len(t) / dims
			q := tokenQuery{n: n, vecs: make([]float32, (n+3)/4*4*dims)}
			copy(q.vecs, t)
			ids, qs = append(ids, strings.Clone(id)), append(qs, q)
			if len(ids) == s.o.Block {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil && len(ids) > 0 {
		err = flush()
	}
	return err
}

// maxSim writes query q's MaxSim with each of the n chunks of tc to acc:
// docs holds tc's token vectors, zero ones after them to stride rows (a
// multiple of 4); dots is scratch space of 4 × stride floats.
func maxSim(q tokenQuery, tc *tokenCols, n, dims int, docs []float32, stride int, dots []float32, acc []float64) {
	nt := tc.off[n]
	clear(acc)
	for g := 0; g < q.n; g += 4 {
		kern.f32(q.vecs[g*dims:(g+4)*dims], docs, stride, dims, dots, stride)
		for i := range min(4, q.n-g) {
			row := dots[i*stride : i*stride+nt]
			for r := range n {
				acc[r] += float64(maxOf(row[tc.off[r]:tc.off[r+1]]))
			}
		}
	}
}

// maxSimPass streams the corpus once, scoring every chunk against the
// block's queries by MaxSim, the queries split among Threads goroutines.
func (s *searcher) maxSimPass(ctx context.Context, qs []tokenQuery) ([]*topK, error) {
	dims := s.o.Corpus.Dims
	st := newPassState(len(qs), s.o.K)
	workers := max(1, min(s.o.Threads, len(qs)))
	scratch := make([]maxSimScratch, workers)
	var docs []float32
	var rows int64
	err := s.o.Corpus.eachBatch(ctx, func(bt *batch) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(bt.rec.NumRows())
		tc := bt.tokens
		nt := tc.off[n]
		stride := (nt + 3) / 4 * 4 // the kernel takes rows in multiples of 4
		docs = grow(docs, stride*dims)
		copy(docs, tc.vals[:nt*dims])
		clear(docs[nt*dims:])
		st.starts = docStarts(bt, st.lastID, rows == 0)
		g := errgroup.Group{}
		for w := range workers {
			g.Go(func() error {
				sc := &scratch[w]
				sc.dots, sc.scores, sc.acc = grow(sc.dots, 4*stride), grow(sc.scores, n), grow(sc.acc, n)
				for q := w; q < len(qs); q += workers { // each query's state is its own goroutine's
					if err := ctx.Err(); err != nil {
						return err
					}
					maxSim(qs[q], tc, n, dims, docs, stride, sc.dots, sc.acc)
					for r := range n {
						sc.scores[r] = float32(sc.acc[r])
					}
					if n > 0 {
						fold(st.tops[q], &st.best[q], &st.floor[q], sc.scores, st.starts, bt, 0, st.lastID)
					}
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
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

// maxSimScratch is one goroutine's buffers of a MaxSim pass.
type maxSimScratch struct {
	dots, scores []float32
	acc          []float64
}
