package vector

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Column is an embedding column of one record batch as the bytes of its
// vectors, row after row, Width bytes each (the layout Quantizer.Append
// writes): no copy of the batch's buffers.
type Column struct {
	Data  []byte
	Width int
	Rows  int
}

// Row is the bytes of row i's vector.
func (c Column) Row(i int) []byte { return c.Data[i*c.Width : (i+1)*c.Width : (i+1)*c.Width] }

// ColumnOf reads an embedding column of dtype d and dims dimensions; a
// column of another type, or with nulls, is an error.
func ColumnOf(arr arrow.Array, d Dtype, dims int) (Column, error) {
	n, w := arr.Len(), d.Width(dims)
	if arr.NullN() > 0 {
		return Column{}, fmt.Errorf("embedding column: %d null vectors", arr.NullN())
	}
	if err := CheckType(arr.DataType(), d, dims); err != nil {
		return Column{}, err
	}
	var buf []byte
	var start int
	switch a := arr.(type) {
	case *array.FixedSizeBinary:
		buf, start = bufferBytes(a.Data(), 1), a.Data().Offset()*w
	case *array.FixedSizeList:
		child := a.ListValues().Data()
		es := w / max(dims, 1)
		buf, start = bufferBytes(child, 1), (child.Offset()+a.Data().Offset()*dims)*es
	default:
		return Column{}, fmt.Errorf("embedding column of type %s", arr.DataType())
	}
	if len(buf) < start+n*w {
		return Column{}, fmt.Errorf("embedding column: %d bytes of values for %d vectors of %d", len(buf)-start, n, w)
	}
	return Column{Data: buf[start : start+n*w], Width: w, Rows: n}, nil
}

func bufferBytes(d arrow.ArrayData, i int) []byte {
	bufs := d.Buffers()
	if len(bufs) <= i || bufs[i] == nil {
		return nil
	}
	return bufs[i].Bytes()
}

// CheckType refuses an embedding column type that does not hold vectors
// of dtype d and dims dimensions (element nullability aside: Parquet does
// not keep it).
func CheckType(t arrow.DataType, d Dtype, dims int) error {
	want := d.ArrowType(dims)
	ok := false
	switch w := want.(type) {
	case *arrow.FixedSizeBinaryType:
		b, isB := t.(*arrow.FixedSizeBinaryType)
		ok = isB && b.ByteWidth == w.ByteWidth
	case *arrow.FixedSizeListType:
		l, isL := t.(*arrow.FixedSizeListType)
		ok = isL && l.Len() == w.Len() && arrow.TypeEqual(l.Elem(), w.Elem())
	}
	if !ok {
		return fmt.Errorf("embedding column is %s; %s of %d dims is %s", t, d, dims, want)
	}
	return nil
}
