package previous

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/vector"
)

// tokensColumn finds a multi-vector output's token_vectors column
// (output.TokensSchema): a list of the dtype's vectors of dims values; -1
// when sc has none or it is of another type.
func tokensColumn(sc *arrow.Schema, dtype vector.Dtype, dims int) int {
	idx := sc.FieldIndices(output.ColTokenVectors)
	if len(idx) != 1 {
		return -1
	}
	l, ok := sc.Field(idx[0]).Type.(*arrow.ListType)
	if !ok || vector.CheckType(l.Elem(), dtype, dims) != nil {
		return -1
	}
	return idx[0]
}

// tokenCols are a multi-vector output's token vectors in one batch.
type tokenCols struct {
	list *array.List
	vecs vector.Column
}

// tokenColumns reads a batch's token_vectors and checks that every row's
// vectors are within the list's values.
func tokenColumns(rec arrow.RecordBatch, col int, dtype vector.Dtype, dims int) (*tokenCols, error) {
	l, ok := rec.Column(col).(*array.List)
	if !ok {
		return nil, fmt.Errorf("%s of type %s", output.ColTokenVectors, rec.Column(col).DataType())
	}
	vecs, err := vector.ColumnOf(l.ListValues(), dtype, dims)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", output.ColTokenVectors, err)
	}
	for i := range l.Len() {
		if a, e := l.ValueOffsets(i); a < 0 || e < a || int(e) > vecs.Rows {
			return nil, fmt.Errorf("row %d: token vectors [%d,%d) outside the %d of the batch", i, a, e, vecs.Rows)
		}
	}
	return &tokenCols{list: l, vecs: vecs}, nil
}

// setRow puts row i's token vectors in r as the dtype has them, and
// returns their bytes.
func (c *tokenCols) setRow(r *output.EmbedRow, i int, dtype vector.Dtype, dims int) int {
	a, e := c.list.ValueOffsets(i)
	for k := int(a); k < int(e); k++ {
		if dtype == vector.Float32 {
			r.TokenEmbeddings = append(r.TokenEmbeddings, vector.Decode(make([]float32, 0, dims), vector.Float32, dims, c.vecs.Row(k), nil))
		} else {
			r.TokenVectors = append(r.TokenVectors, append([]byte(nil), c.vecs.Row(k)...))
		}
	}
	return int(e-a) * c.vecs.Width
}
