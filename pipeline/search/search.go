// Package search is exact (brute-force) nearest-neighbour search over the
// embedding outputs of synapse embed: every query of a block against every
// chunk of the corpus, the corpus streamed once per block of queries and
// never held whole. The module process (synapse search) runs it.
//
// A document's score is its best chunk's. The similarity follows the
// corpus's dtype: the dot product for float32 and float16 (the cosine, the
// vectors being normalized), the integer dot product of the codes for int8
// and uint8 (the query quantized with the corpus's stored ranges, as
// sentence-transformers and usearch score them), dims − Hamming distance
// for binary and ubinary (the number of dimensions whose signs agree).
// Ties are broken by document id, the smaller first. A sparse output's
// (synapse embed --vectors sparse) similarity is the exact sparse dot
// product (sparse.go); a multi-vector output's (--vectors tokens),
// ColBERT's MaxSim over every chunk (tokens.go).
//
// Memory: one corpus record batch, the block's query vectors, its top-k
// lists (at most k × Rescore entries per query, and never more than the
// corpus's documents, whatever k is) and a score tile of 4 × TileRows
// floats per thread. Cancellation is seen between tiles, within
// milliseconds.
//
// Scores come from block kernels that score 4 queries × 4 corpus rows at a
// time (kernel.go): Go assembly on amd64, chosen by the CPU's features
// (kernel_amd64.go), and the Go kernels, the reference, elsewhere.
//
// A NaN or infinite value in a float query or corpus vector is refused
// (ErrInput, naming the file, row and id): no run writes one.
package search

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sync/errgroup"

	"github.com/synapse-embed/synapse/io/vector"
)

// Defaults.
const (
	DefaultK     = 100
	DefaultBlock = 1024 // queries per pass over the corpus
	TileRows     = 256  // corpus rows scored per query at a time
)

// Options are one search.
type Options struct {
	Queries, Corpus *Vectors
	K               int // hits per query; 0 = DefaultK
	// Rescore, when > 1 with a binary or int8/uint8 corpus, keeps the best
	// Rescore × K documents of the search and re-scores them with the float
	// query against RescoreWith's vectors (nil: the corpus's own codes,
	// dequantized, or its bits as 0 and 1, as sentence-transformers does).
	Rescore     int
	RescoreWith *Vectors
	Block       int // queries per pass over the corpus; 0 = DefaultBlock
	Threads     int // 0 = the cores
}

// Stats say what a search did.
type Stats struct {
	Queries int
	Passes  int    // passes over the corpus
	Chunks  int64  // corpus rows, per pass
	Pairs   int64  // query × chunk similarities computed
	Kernels string // the block kernels this CPU ran ("avx512+vnni+vpopcntdq", "avx2", "go")
}

// Run searches every query and calls emit with its hits, best first, in
// the order of the queries file.
func Run(ctx context.Context, o Options, emit func(query string, hits []Hit) error) (Stats, error) {
	if err := Check(&o); err != nil {
		return Stats{}, err
	}
	if o.Corpus.Sparse {
		s := &searcher{o: o, stats: Stats{Kernels: "sparse"}}
		err := s.runSparse(ctx, emit)
		return s.stats, err
	}
	if o.Corpus.Tokens {
		s := &searcher{o: o, stats: Stats{Kernels: "maxsim " + kern.name}}
		err := s.runTokens(ctx, emit)
		return s.stats, err
	}
	s := &searcher{o: o, sp: newSpace(o.Corpus.Dtype, o.Corpus.Dims), stats: Stats{Kernels: kern.name}}
	if o.Corpus.Dtype.Ranged() || o.Corpus.Dtype.Bits() {
		d := o.Corpus.Dtype
		if d.Bits() {
			d = vector.UBinary
		}
		q, err := vector.NewQuantizer(d, o.Corpus.Dims, o.Corpus.Ranges)
		if err != nil {
			return Stats{}, err
		}
		s.quant = q
	}
	err := s.eachBlock(ctx, func(b *queryBlock) error {
		hits, err := s.block(ctx, b)
		if err != nil {
			return err
		}
		for i, id := range b.ids {
			if err := emit(id, hits[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return s.stats, err
}

// Check fills o's defaults and refuses options that cannot work: queries
// and corpus embedded otherwise, a rescore that cannot be done.
func Check(o *Options) error {
	if o.K <= 0 {
		o.K = DefaultK
	}
	if o.Block <= 0 {
		o.Block = DefaultBlock
	}
	if o.Threads <= 0 {
		o.Threads = runtime.NumCPU()
	}
	if err := Compatible(o.Queries, o.Corpus); err != nil {
		return err
	}
	if o.Corpus.Sparse && (o.Rescore > 1 || o.RescoreWith != nil) {
		return fmt.Errorf("%w: --rescore with a sparse corpus: its scores are exact already", ErrInput)
	}
	if o.Corpus.Tokens && (o.Rescore > 1 || o.RescoreWith != nil) {
		return fmt.Errorf("%w: --rescore with a token-vector corpus: its MaxSim scores are exact already", ErrInput)
	}
	if o.Rescore <= 1 {
		if o.RescoreWith != nil {
			return fmt.Errorf("%w: --rescore-with needs --rescore N (N > 1)", ErrInput)
		}
		o.Rescore = 0
		return nil
	}
	if o.Corpus.Dtype.Float() {
		return fmt.Errorf("%w: --rescore: the corpus is %s already; rescoring is for a binary, int8 or uint8 corpus", ErrInput, o.Corpus.Dtype)
	}
	if !o.Queries.Dtype.Float() {
		return fmt.Errorf("%w: --rescore needs float queries (float32 or float16), not %s", ErrInput, o.Queries.Dtype)
	}
	if r := o.RescoreWith; r != nil {
		if err := Compatible(o.Queries, r); err != nil {
			return fmt.Errorf("--rescore-with: %w", err)
		}
		if r.Settings.ModelDigest != o.Corpus.Settings.ModelDigest || strings.Join(r.Settings.TextFields, "\n") != strings.Join(o.Corpus.Settings.TextFields, "\n") ||
			r.Settings.Prefix != o.Corpus.Settings.Prefix || r.Settings.ChunkTokens != o.Corpus.Settings.ChunkTokens || r.Settings.Overlap != o.Corpus.Settings.Overlap {
			return fmt.Errorf("%w: --rescore-with %s is not the corpus's embedding (text fields, prefix or chunking differ)", ErrInput, r.Paths[0])
		}
	}
	return nil
}

// searcher is one search's state.
type searcher struct {
	o     Options
	sp    space
	quant *vector.Quantizer // turns float queries into the corpus's codes or bits
	stats Stats
}

// queryBlock is up to Options.Block queries.
type queryBlock struct {
	ids   []string
	float []float32 // the float queries, for rescoring
	q     tile      // the queries in the corpus's space, zero ones after them to a multiple of 4
}

// eachBlock reads the queries in blocks.
func (s *searcher) eachBlock(ctx context.Context, fn func(*queryBlock) error) error {
	qv := s.o.Queries
	b := &queryBlock{}
	buf := make([]byte, 0, vector.Float32.Width(qv.Dims))
	var fl []float32
	err := qv.eachBatch(ctx, func(bt *batch) error {
		for i := range bt.vecs.Rows {
			id := bt.ids.Value(i)
			if c := bt.chunks.Value(i); c != 0 {
				return fmt.Errorf("%w: query %s has more than one chunk (chunk %d): embed the queries with --chunk-tokens large enough for each", ErrInput, id, c)
			}
			row := bt.vecs.Row(i)
			if qv.Dtype.Float() {
				fl = vector.Decode(fl[:0], qv.Dtype, qv.Dims, row, nil)
				if err := qv.checkFinite(bt, i, fl, qv.Dims); err != nil {
					return err
				}
				if s.o.Rescore > 0 {
					b.float = append(b.float, fl...)
				}
			}
			s.appendQuery(&b.q, row, fl, buf)
			b.ids = append(b.ids, strings.Clone(id))
			if len(b.ids) == s.o.Block {
				s.sp.pad(&b.q, len(b.ids))
				if err := fn(b); err != nil {
					return err
				}
				b = &queryBlock{}
			}
		}
		return nil
	})
	if err == nil && len(b.ids) > 0 {
		s.sp.pad(&b.q, len(b.ids))
		err = fn(b)
	}
	return err
}

// appendQuery adds a query (row in the queries' dtype, fl its float values
// when it is a float) to t in the corpus's space.
func (s *searcher) appendQuery(t *tile, row []byte, fl []float32, buf []byte) {
	qd := s.o.Queries.Dtype
	switch cd := s.sp.dtype; {
	case cd.Float():
		t.f = append(t.f, fl...)
	case cd.Ranged() && qd.Float():
		code := s.quant.Append(buf[:0], fl)
		s.appendCodes(t, code)
	case cd.Ranged():
		s.appendCodes(t, row)
	case qd.Float():
		t.u64 = appendWords(t.u64, s.quant.Append(buf[:0], fl), false, s.sp.width)
	default:
		t.u64 = appendWords(t.u64, row, qd == vector.Binary, s.sp.width)
	}
}

func (s *searcher) appendCodes(t *tile, code []byte) {
	if s.sp.dtype == vector.Uint8 {
		t.u8 = append(t.u8, code...)
		return
	}
	for _, c := range code {
		t.i8 = append(t.i8, int8(c))
	}
}

// block searches one block of queries: a pass over the corpus, and one
// over the rescoring vectors when asked.
func (s *searcher) block(ctx context.Context, b *queryBlock) ([][]Hit, error) {
	keep := s.o.K
	if s.o.Rescore > 0 {
		keep = satMul(keep, s.o.Rescore)
	}
	tops, err := s.pass(ctx, b, keep)
	if err != nil {
		return nil, err
	}
	s.stats.Queries += len(b.ids)
	if s.o.Rescore > 0 {
		return s.rescore(ctx, b, tops)
	}
	out := make([][]Hit, len(tops))
	for i, t := range tops {
		out[i] = t.hits()
	}
	return out, nil
}

// pass streams the corpus once, scoring every chunk against the block's
// queries, split among Threads goroutines by groups of 4 queries.
func (s *searcher) pass(ctx context.Context, b *queryBlock, keep int) ([]*topK, error) {
	nq := len(b.ids)
	st := newPassState(nq, keep)
	workers := min(s.o.Threads, (nq+3)/4)
	scratch := make([][]float32, workers)
	for w := range scratch {
		scratch[w] = make([]float32, 4*TileRows)
	}
	var ct tile
	var rows int64
	err := s.o.Corpus.eachBatch(ctx, func(bt *batch) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := bt.vecs.Rows
		s.sp.load(&ct, bt.vecs)
		if s.sp.dtype.Float() && s.stats.Passes == 0 {
			if err := s.o.Corpus.checkFinite(bt, 0, ct.f[:n*s.sp.dims], s.sp.dims); err != nil {
				return err
			}
		}
		st.starts = docStarts(bt, st.lastID, rows == 0)
		g := errgroup.Group{}
		for w := range workers {
			g.Go(func() error { return s.scoreBatch(ctx, b, &ct, bt, st, w, workers, scratch[w]) })
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

// newPassState is the state of a pass of nq queries keeping keep hits each.
func newPassState(nq, keep int) *passState {
	st := &passState{tops: make([]*topK, nq), best: make([]float32, nq), floor: make([]float32, nq)}
	for i := range st.tops {
		st.tops[i], st.best[i], st.floor[i] = newTopK(keep), noDoc, noDoc
	}
	return st
}

// endPass closes a pass over rows chunks: each query's open document (the
// corpus's last) is offered to its list, and the pass is counted.
func (s *searcher) endPass(st *passState, rows int64) []*topK {
	if rows > 0 {
		for q, t := range st.tops {
			if st.best[q] != noDoc && t.admits(st.best[q]) {
				t.add(st.lastID, st.best[q])
			}
		}
	}
	s.stats.Passes++
	s.stats.Chunks = rows
	s.stats.Pairs += rows * int64(len(st.tops))
	return st.tops
}

// passState is a pass's state between batches: each query's top list,
// its floor and its open document's score, the batch's document starts and the last batch's
// last id.
type passState struct {
	tops   []*topK
	best   []float32
	floor  []float32 // each list's floor, for fold
	starts []bool
	lastID string
}

// scoreBatch is worker w of workers's share of a batch: its groups of 4
// queries against every tile of the batch's rows.
func (s *searcher) scoreBatch(ctx context.Context, b *queryBlock, ct *tile, bt *batch, st *passState, w, workers int, scratch []float32) error {
	nq := len(b.ids)
	groups := (nq + 3) / 4
	g0, g1 := w*groups/workers, (w+1)*groups/workers
	n := bt.vecs.Rows
	for r0 := 0; r0 < n; r0 += TileRows {
		if err := ctx.Err(); err != nil { // a tile is milliseconds: cancellation is honoured within one
			return err
		}
		if tileHook != nil {
			tileHook()
		}
		r1 := min(n, r0+TileRows)
		for q := 4 * g0; q < 4*g1; q += 4 {
			s.sp.score4(&b.q, q, ct, r0, r1, scratch)
			for i := range min(4, nq-q) {
				fold(st.tops[q+i], &st.best[q+i], &st.floor[q+i], scratch[i*TileRows:i*TileRows+r1-r0], st.starts[r0:r1], bt, r0, st.lastID)
			}
		}
	}
	return nil
}

// tileHook, when set (by tests), is called before each tile is scored.
var tileHook func()

// satMul is a × b for positive a and b, math.MaxInt when it overflows.
func satMul(a, b int) int {
	if a > math.MaxInt/b {
		return math.MaxInt
	}
	return a * b
}

// docStarts marks the rows of a batch that start a document: an id other
// than the row before's (the last batch's last row for the first).
func docStarts(bt *batch, lastID string, first bool) []bool {
	n := bt.vecs.Rows
	starts := make([]bool, n)
	for i := range n {
		switch {
		case i == 0:
			starts[i] = first || bt.ids.Value(0) != lastID
		default:
			starts[i] = bt.ids.Value(i) != bt.ids.Value(i-1) || bt.chunks.Value(i) <= bt.chunks.Value(i-1)
		}
	}
	return starts
}

// noDoc is the score of no open document (scores are finite).
var noDoc = float32(math.Inf(-1))

// fold folds the scores of rows [r0, r0+len(scores)) of a batch into the
// query's documents: a document that ends is offered to the top list with
// its best chunk's score; *best is the open document's score so far, and
// *floor the list's floor (noDoc until it is full), kept beside the list
// so that a tile none of whose scores can enter costs a scan of them.
func fold(t *topK, best, floor *float32, scores []float32, starts []bool, bt *batch, r0 int, lastID string) {
	b := *best
	if f := *floor; b < f && maxOf(scores) < f {
		// Nothing that ends here can enter (the usual case once the list is
		// full): only the open document's best moves on.
		last := bytes.LastIndexByte(boolBytes(starts), 1)
		if last < 0 {
			*best = max(b, maxOf(scores))
		} else {
			*best = maxOf(scores[last:])
		}
		return
	}
	for i, sc := range scores {
		if !starts[i] {
			b = max(b, sc)
			continue
		}
		r := r0 + i
		if b != noDoc && t.admits(b) {
			if r > 0 {
				t.add(bt.ids.Value(r-1), b)
			} else {
				t.add(lastID, b)
			}
		}
		b = sc
	}
	*best = b
	if f, full := t.floor(); full {
		*floor = f
	}
}

// maxOf is the largest of s (not empty; no NaN: inputs are checked):
// maxGo, or the CPU's kernel.
var maxOf = maxGo

// maxGo is maxOf in four running maxima.
func maxGo(s []float32) float32 {
	m0 := s[0]
	m1, m2, m3 := m0, m0, m0
	i := 0
	for ; i+4 <= len(s); i += 4 {
		x := s[i : i+4 : i+4]
		if x[0] > m0 {
			m0 = x[0]
		}
		if x[1] > m1 {
			m1 = x[1]
		}
		if x[2] > m2 {
			m2 = x[2]
		}
		if x[3] > m3 {
			m3 = x[3]
		}
	}
	for ; i < len(s); i++ {
		if s[i] > m0 {
			m0 = s[i]
		}
	}
	return max(max(m0, m1), max(m2, m3))
}

// boolBytes is s as bytes (a bool is one byte, 0 or 1).
func boolBytes(s []bool) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}
