package dataio

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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
	i32 := func(name string) arrow.Field { return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int32} }
	return NewSchema([]arrow.Field{
		{Name: ColID, Type: arrow.BinaryTypes.String},
		i32(ColChunk), i32(ColTokenStart), i32(ColTokenEnd), i32(ColCharStart), i32(ColCharEnd), i32(ColNTokens),
		{Name: ColEmbedding, Type: arrow.FixedSizeListOfNonNullable(int32(dims), arrow.PrimitiveTypes.Float32)},
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
	Embedding            []float32 // exactly the schema's dims values
	DocHash              [DocHashSize]byte
}

// EmbedRows are a document's rows, in chunk order.
type EmbedRows []EmbedRow

// Len implements Rows.
func (rs EmbedRows) Len() int { return len(rs) }

// AppendTo implements Rows for a builder of an EmbedSchema.
func (rs EmbedRows) AppendTo(b *array.RecordBuilder) error {
	f := b.Fields()
	if len(f) != 9 {
		return fmt.Errorf("dataio: embedding rows for a schema of %d columns", len(f))
	}
	lb, ok := f[7].(*array.FixedSizeListBuilder)
	hb, ok2 := f[8].(*array.FixedSizeBinaryBuilder)
	if !ok || !ok2 {
		return fmt.Errorf("dataio: embedding rows for a schema of %d columns", len(f))
	}
	dims := int(lb.Type().(*arrow.FixedSizeListType).Len())
	for _, r := range rs {
		if len(r.Embedding) != dims {
			return fmt.Errorf("dataio: %s chunk %d: embedding has %d values; want %d", r.ID, r.Chunk, len(r.Embedding), dims)
		}
	}
	for _, r := range rs {
		f[0].(*array.StringBuilder).Append(r.ID)
		for i, v := range [...]int32{r.Chunk, r.TokenStart, r.TokenEnd, r.CharStart, r.CharEnd, r.NTokens} {
			f[1+i].(*array.Int32Builder).Append(v)
		}
		lb.Append(true)
		lb.ValueBuilder().(*array.Float32Builder).AppendValues(r.Embedding, nil)
		hb.Append(r.DocHash[:])
	}
	return nil
}
