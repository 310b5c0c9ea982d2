package output

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"

	"github.com/synapse-embed/synapse/io/vector"
)

// Column names of the embedding output.
const (
	ColID         = "id"
	ColChunk      = "chunk"
	ColTokenStart = "token_start"
	ColTokenEnd   = "token_end"
	ColCharStart  = "char_start"
	ColCharEnd    = "char_end"
	ColNTokens    = "n_tokens"
	ColEmbedding  = "embedding"
	ColDocHash    = "doc_hash"
)

// DocHashSize is the width of the doc_hash column: a SHA-256 of the
// document's joined text (after the prefix).
const DocHashSize = 32

// EmbedSchema is the embedding output's schema: one row per chunk, the
// embedding a fixed_size_list<float32>[dims], and last the document's
// doc_hash, a fixed_size_binary[32] (zeros when a chunk of the document
// failed: such a document is never reused); meta is its metadata.
func EmbedSchema(dims int, meta map[string]string) *arrow.Schema {
	return EmbedSchemaOf(dims, vector.Float32, meta)
}

// EmbedSchemaOf is EmbedSchema with the embedding column of dtype d
// (vector.Dtype.ArrowType).
func EmbedSchemaOf(dims int, d vector.Dtype, meta map[string]string) *arrow.Schema {
	i32 := func(name string) arrow.Field { return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int32} }
	return NewSchema([]arrow.Field{
		{Name: ColID, Type: arrow.BinaryTypes.String},
		i32(ColChunk), i32(ColTokenStart), i32(ColTokenEnd), i32(ColCharStart), i32(ColCharEnd), i32(ColNTokens),
		{Name: ColEmbedding, Type: d.ArrowType(dims)},
		{Name: ColDocHash, Type: &arrow.FixedSizeBinaryType{ByteWidth: DocHashSize}},
	}, meta)
}

// EmbedRow is one row of the embedding output: one chunk of a document.
type EmbedRow struct {
	ID                   string
	Chunk                int32 // 0-based chunk number in the document
	TokenStart, TokenEnd int32 // token range of the chunk
	CharStart, CharEnd   int32 // byte range of the chunk in the joined text
	NTokens              int32
	Embedding            []float32 // exactly the schema's dims values (a float32 schema)
	// Vector is the vector in the schema's dtype, as vector.Quantizer.Append
	// writes it, for any other dtype.
	Vector  []byte
	DocHash [DocHashSize]byte
}

// EmbedRows are a document's rows, in chunk order.
type EmbedRows []EmbedRow

// Len implements Rows.
func (rs EmbedRows) Len() int { return len(rs) }

// AppendTo implements Rows for a builder of an EmbedSchemaOf.
func (rs EmbedRows) AppendTo(b *array.RecordBuilder) error {
	f := b.Fields()
	if len(f) != 9 {
		return fmt.Errorf("embedding rows for a schema of %d columns", len(f))
	}
	hb, ok := f[8].(*array.FixedSizeBinaryBuilder)
	if !ok {
		return fmt.Errorf("embedding rows for a schema without %s", ColDocHash)
	}
	appendVec, err := vectorAppender(f[7])
	if err != nil {
		return err
	}
	for _, r := range rs {
		if err := appendVec(r, true); err != nil {
			return err
		}
	}
	for _, r := range rs {
		f[0].(*array.StringBuilder).Append(r.ID)
		for i, v := range [...]int32{r.Chunk, r.TokenStart, r.TokenEnd, r.CharStart, r.CharEnd, r.NTokens} {
			f[1+i].(*array.Int32Builder).Append(v)
		}
		appendVec(r, false)
		hb.Append(r.DocHash[:])
	}
	return nil
}

// vectorAppender checks (check: true) or appends a row's vector to the
// embedding column's builder, whatever its dtype.
func vectorAppender(b array.Builder) (func(r EmbedRow, check bool) error, error) {
	switch b := b.(type) {
	case *array.FixedSizeBinaryBuilder:
		w := b.Type().(*arrow.FixedSizeBinaryType).ByteWidth
		return func(r EmbedRow, check bool) error {
			if check {
				return checkWidth(r, len(r.Vector), w)
			}
			b.Append(r.Vector)
			return nil
		}, nil
	case *array.FixedSizeListBuilder:
		dims := int(b.Type().(*arrow.FixedSizeListType).Len())
		switch vb := b.ValueBuilder().(type) {
		case *array.Float32Builder:
			return func(r EmbedRow, check bool) error {
				if check {
					return checkWidth(r, len(r.Embedding), dims)
				}
				b.Append(true)
				vb.AppendValues(r.Embedding, nil)
				return nil
			}, nil
		case *array.Float16Builder:
			return func(r EmbedRow, check bool) error {
				if check {
					return checkWidth(r, len(r.Vector), 2*dims)
				}
				b.Append(true)
				for i := range dims {
					vb.Append(float16.FromBits(binary.LittleEndian.Uint16(r.Vector[2*i:])))
				}
				return nil
			}, nil
		case *array.Int8Builder:
			return func(r EmbedRow, check bool) error {
				if check {
					return checkWidth(r, len(r.Vector), dims)
				}
				b.Append(true)
				vb.AppendValues(unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(r.Vector))), dims), nil)
				return nil
			}, nil
		case *array.Uint8Builder:
			return func(r EmbedRow, check bool) error {
				if check {
					return checkWidth(r, len(r.Vector), dims)
				}
				b.Append(true)
				vb.AppendValues(r.Vector, nil)
				return nil
			}, nil
		}
	}
	return nil, fmt.Errorf("embedding rows for an embedding column of type %s", b.Type())
}

func checkWidth(r EmbedRow, got, want int) error {
	if got != want {
		return fmt.Errorf("%s chunk %d: embedding has %d values; want %d", r.ID, r.Chunk, got, want)
	}
	return nil
}
