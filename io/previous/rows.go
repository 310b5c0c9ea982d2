package previous

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/vector"
)

// locate is the global batch holding global row and the row's place in it.
func (s *Set) locate(row int64) (g, i int) {
	g = sort.Search(len(s.batches), func(b int) bool { return s.starts[b+1] > row })
	return g, int(row - s.starts[g])
}

// doc is the document whose first row is start: its id and doc_hash and the
// row after its last. A document's rows are consecutive, with one id and
// rising chunk numbers.
func (s *Set) doc(start int64) (id string, hash [output.DocHashSize]byte, end int64, err error) {
	end = start
	lastChunk := int32(-1)
	for end < s.Rows() {
		g, i := s.locate(end)
		rec, err := s.cache.get(g)
		if err != nil {
			return "", hash, 0, err
		}
		c := s.files[s.batches[g].file].cols
		ids := rec.Column(c.id).(*array.String)
		chunks := rec.Column(c.chunk).(*array.Int32)
		if end == start {
			id = strings.Clone(ids.Value(i)) // the mapping's bytes are not the string's to keep
			copy(hash[:], rec.Column(c.hash).(*array.FixedSizeBinary).Value(i))
			s.touch(int64(len(id) + output.DocHashSize))
		}
		for ; i < ids.Len(); i++ {
			if ids.Value(i) != id || chunks.Value(i) <= lastChunk {
				return id, hash, end, nil
			}
			lastChunk = chunks.Value(i)
			end++
		}
	}
	return id, hash, end, nil
}

// Copy returns rows [start, end) as embedding rows: vectors, token and
// byte offsets and counts as the previous run wrote them, and their
// tokens. Their code point offsets and text are not read
// (output.FillSpans makes them from the document's text).
func (s *Set) Copy(start, end int64) (output.EmbedRows, int64, error) {
	rows := make(output.EmbedRows, 0, end-start)
	var tokens int64
	for row := start; row < end; {
		g, i := s.locate(row)
		rec, err := s.cache.get(g)
		if err != nil {
			return nil, 0, err
		}
		c := s.files[s.batches[g].file].cols
		i32 := func(col int) *array.Int32 { return rec.Column(col).(*array.Int32) }
		ids, hashes := rec.Column(c.id).(*array.String), rec.Column(c.hash).(*array.FixedSizeBinary)
		var emb vector.Column
		var sp *sparseCols
		var tc *tokenCols
		switch {
		case c.tokens >= 0:
			tc, err = tokenColumns(rec, c.tokens, s.dtype, s.dims)
		case c.emb < 0:
			sp, err = sparseColumns(rec, c)
		default:
			emb, err = vector.ColumnOf(rec.Column(c.emb), s.dtype, s.dims)
		}
		if err != nil {
			return nil, 0, err
		}
		for ; i < int(rec.NumRows()) && row < end; i, row = i+1, row+1 {
			r := output.EmbedRow{ID: strings.Clone(ids.Value(i)), Chunk: i32(c.chunk).Value(i),
				TokenStart: i32(c.tokenStart).Value(i), TokenEnd: i32(c.tokenEnd).Value(i),
				ByteStart: i32(c.byteStart).Value(i), ByteEnd: i32(c.byteEnd).Value(i), NTokens: i32(c.nTokens).Value(i)}
			switch {
			case tc != nil:
				s.touch(int64(tc.setRow(&r, i, s.dtype, s.dims)))
			case sp != nil:
				ix, vals := sp.row(i)
				r.SparseIndices, r.SparseValues = slices.Clone(ix), slices.Clone(vals)
				s.touch(int64(8*len(ix) + 64))
			case s.dtype == vector.Float32:
				r.Embedding = vector.Decode(make([]float32, 0, s.dims), vector.Float32, s.dims, emb.Row(i), nil)
			default:
				r.Vector = append([]byte(nil), emb.Row(i)...)
			}
			copy(r.DocHash[:], hashes.Value(i))
			tokens += int64(r.NTokens)
			rows = append(rows, r)
			s.touch(int64(emb.Width + 64))
		}
	}
	if int64(len(rows)) != end-start {
		return nil, 0, fmt.Errorf("previous: rows %d to %d: only %d", start, end, len(rows))
	}
	return rows, tokens, nil
}

// sparseCols are a sparse output's vector columns in one batch.
type sparseCols struct {
	ix, vals *array.List
	ixv      []uint32
	valv     []float32
}

// sparseColumns reads a batch's sparse columns and checks that every
// row's indices and values are as many and within the lists' values.
func sparseColumns(rec arrow.RecordBatch, c columns) (*sparseCols, error) {
	ix, ok1 := rec.Column(c.sparseIx).(*array.List)
	vals, ok2 := rec.Column(c.sparseVal).(*array.List)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("sparse columns of types %s, %s", rec.Column(c.sparseIx).DataType(), rec.Column(c.sparseVal).DataType())
	}
	ixa, ok1 := ix.ListValues().(*array.Uint32)
	vala, ok2 := vals.ListValues().(*array.Float32)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("sparse columns' values of types %s, %s", ix.ListValues().DataType(), vals.ListValues().DataType())
	}
	sp := &sparseCols{ix: ix, vals: vals, ixv: ixa.Uint32Values(), valv: vala.Float32Values()}
	for i := range ix.Len() {
		a, e := ix.ValueOffsets(i)
		va, ve := vals.ValueOffsets(i)
		if a < 0 || e < a || e-a != ve-va || va < 0 || int(e) > len(sp.ixv) || int(ve) > len(sp.valv) {
			return nil, fmt.Errorf("row %d: sparse indices [%d,%d) and values [%d,%d) do not match", i, a, e, va, ve)
		}
	}
	return sp, nil
}

// row is row i's indices and values (sparseColumns checked them).
func (c *sparseCols) row(i int) ([]uint32, []float32) {
	a, e := c.ix.ValueOffsets(i)
	va, ve := c.vals.ValueOffsets(i)
	return c.ixv[a:e], c.valv[va:ve]
}
