package output

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"

	"github.com/synapse-embed/synapse/io/vector"
)

// Column names of the embedding output (docs/formats.md).
const (
	ColID         = "id"
	ColChunk      = "chunk"
	ColChunkID    = "chunk_id" // ID#CHUNK: unique in an output (ChunkID)
	ColTokenStart = "token_start"
	ColTokenEnd   = "token_end"
	ColByteStart  = "byte_start" // UTF-8 byte offsets in the joined text
	ColByteEnd    = "byte_end"
	ColCPStart    = "codepoint_start" // Unicode code point offsets in the joined text
	ColCPEnd      = "codepoint_end"
	ColNTokens    = "n_tokens"
	ColText       = "text" // the chunk's text, with --with-text
	ColEmbedding  = "embedding"
	ColDocHash    = "doc_hash"
	// ColSparseIndices and ColSparseValues replace embedding in a sparse
	// output (SparseSchema): the terms by rising index and their weights.
	ColSparseIndices = "sparse_indices"
	ColSparseValues  = "sparse_values"

	// ColCharStart and ColCharEnd are the byte offsets' names in the outputs
	// of synapse before byte_start and byte_end (they were bytes, not
	// characters): io/previous still reads them.
	ColCharStart = "char_start"
	ColCharEnd   = "char_end"
)

// ChunkSep separates a chunk_id's document id from its chunk number.
const ChunkSep = "#"

// ChunkID is the chunk_id of chunk c of document id: "ID#C", C in decimal.
// The id may itself hold '#': the chunk number is what follows the last
// '#' (ParseChunkID), so that two chunks never share a chunk_id.
func ChunkID(id string, c int32) string {
	return id + ChunkSep + strconv.FormatInt(int64(c), 10)
}

// ParseChunkID splits a chunk_id at its last '#' into the document id and
// the chunk number.
func ParseChunkID(s string) (id string, chunk int32, err error) {
	i := strings.LastIndex(s, ChunkSep)
	if i < 0 {
		return "", 0, fmt.Errorf("chunk_id %q has no %q", s, ChunkSep)
	}
	n, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil || n < 0 || s[i+1:] != strconv.FormatInt(n, 10) {
		return "", 0, fmt.Errorf("chunk_id %q: %q after the last %q is not a chunk number", s, s[i+1:], ChunkSep)
	}
	return s[:i], int32(n), nil
}

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
	return EmbedSchemaWith(dims, d, false, meta)
}

// EmbedSchemaWith is EmbedSchemaOf with, when withText, the chunks' text
// in a text column before the embedding.
func EmbedSchemaWith(dims int, d vector.Dtype, withText bool, meta map[string]string) *arrow.Schema {
	return rowSchema(withText, meta, arrow.Field{Name: ColEmbedding, Type: d.ArrowType(dims)})
}

// SparseSchema is the schema of a sparse output (embed --output sparse):
// EmbedSchemaWith's columns with, instead of the embedding,
// sparse_indices list<uint32> (rising) and sparse_values list<float32>.
func SparseSchema(withText bool, meta map[string]string) *arrow.Schema {
	return rowSchema(withText, meta, arrow.Field{Name: ColSparseIndices, Type: arrow.ListOf(arrow.PrimitiveTypes.Uint32)},
		arrow.Field{Name: ColSparseValues, Type: arrow.ListOf(arrow.PrimitiveTypes.Float32)})
}

// IsSparse reports whether sc is a sparse output's schema.
func IsSparse(sc *arrow.Schema) bool {
	return sc.HasField(ColSparseIndices) && sc.HasField(ColSparseValues)
}

// rowSchema is the columns of a chunk's row around its vector's.
func rowSchema(withText bool, meta map[string]string, vec ...arrow.Field) *arrow.Schema {
	i32 := func(name string) arrow.Field { return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int32} }
	str := func(name string) arrow.Field { return arrow.Field{Name: name, Type: arrow.BinaryTypes.String} }
	fields := []arrow.Field{str(ColID), i32(ColChunk), str(ColChunkID), i32(ColTokenStart), i32(ColTokenEnd),
		i32(ColByteStart), i32(ColByteEnd), i32(ColCPStart), i32(ColCPEnd), i32(ColNTokens)}
	if withText {
		fields = append(fields, str(ColText))
	}
	fields = append(fields, vec...)
	fields = append(fields, arrow.Field{Name: ColDocHash, Type: &arrow.FixedSizeBinaryType{ByteWidth: DocHashSize}})
	return NewSchema(fields, meta)
}

// EmbedRow is one row of the embedding output: one chunk of a document.
// Its chunk_id is ChunkID(ID, Chunk).
type EmbedRow struct {
	ID                   string
	Chunk                int32 // 0-based chunk number in the document
	TokenStart, TokenEnd int32 // token range of the chunk
	ByteStart, ByteEnd   int32 // UTF-8 byte range of the chunk in the joined text
	CPStart, CPEnd       int32 // the same range in Unicode code points
	NTokens              int32
	Text                 string    // the joined text's bytes [ByteStart, ByteEnd), for a schema with text
	Embedding            []float32 // exactly the schema's dims values (a float32 schema)
	// Vector is the vector in the schema's dtype, as vector.Quantizer.Append
	// writes it, for any other dtype.
	Vector []byte
	// SparseIndices and SparseValues are the vector of a sparse schema
	// (SparseSchema): indices rising, a value each.
	SparseIndices []uint32
	SparseValues  []float32
	// TokenEmbeddings (float32) or TokenVectors (any other dtype, as
	// vector.Quantizer.Append writes each) are the token vectors of a
	// multi-vector schema (TokensSchema), in token order.
	TokenEmbeddings [][]float32
	TokenVectors    [][]byte
	DocHash         [DocHashSize]byte
}

// EmbedRows are a document's rows, in chunk order.
type EmbedRows []EmbedRow

// Len implements Rows.
func (rs EmbedRows) Len() int { return len(rs) }

// AppendTo implements Rows for a builder of an EmbedSchemaWith, a
// SparseSchema or a TokensSchema.
func (rs EmbedRows) AppendTo(b *array.RecordBuilder) error {
	f := b.Fields()
	sc := b.Schema()
	text, vec := -1, 1 // the text column; the vector's columns
	if IsSparse(sc) {
		vec = 2
	}
	switch n := len(f); {
	case n == 12+vec && sc.Field(10).Name == ColText:
		text = 10
	case n != 11+vec:
		return fmt.Errorf("embedding rows for a schema of %d columns", n)
	}
	hb, ok := f[len(f)-1].(*array.FixedSizeBinaryBuilder)
	if !ok {
		return fmt.Errorf("embedding rows for a schema without %s", ColDocHash)
	}
	var appendVec func(r EmbedRow, check bool) error
	var err error
	switch {
	case vec == 2:
		appendVec, err = sparseAppender(f[len(f)-3], f[len(f)-2])
	case IsTokens(sc):
		appendVec, err = tokensAppender(f[len(f)-2])
	default:
		appendVec, err = vectorAppender(f[len(f)-2])
	}
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
		f[1].(*array.Int32Builder).Append(r.Chunk)
		f[2].(*array.StringBuilder).Append(ChunkID(r.ID, r.Chunk))
		for i, v := range [...]int32{r.TokenStart, r.TokenEnd, r.ByteStart, r.ByteEnd, r.CPStart, r.CPEnd, r.NTokens} {
			f[3+i].(*array.Int32Builder).Append(v)
		}
		if text >= 0 {
			f[text].(*array.StringBuilder).Append(r.Text)
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

// sparseAppender checks (check: true) or appends a row's sparse vector to
// the sparse_indices and sparse_values builders.
func sparseAppender(ib, vb array.Builder) (func(r EmbedRow, check bool) error, error) {
	il, ok1 := ib.(*array.ListBuilder)
	vl, ok2 := vb.(*array.ListBuilder)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("sparse rows for columns of types %s and %s", ib.Type(), vb.Type())
	}
	iv, ok1 := il.ValueBuilder().(*array.Uint32Builder)
	vv, ok2 := vl.ValueBuilder().(*array.Float32Builder)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("sparse rows for columns of types %s and %s", ib.Type(), vb.Type())
	}
	return func(r EmbedRow, check bool) error {
		if check {
			if len(r.SparseIndices) != len(r.SparseValues) {
				return fmt.Errorf("%s chunk %d: %d sparse indices, %d values", r.ID, r.Chunk, len(r.SparseIndices), len(r.SparseValues))
			}
			for i := 1; i < len(r.SparseIndices); i++ {
				if r.SparseIndices[i] <= r.SparseIndices[i-1] {
					return fmt.Errorf("%s chunk %d: sparse indices not rising (%d after %d)", r.ID, r.Chunk, r.SparseIndices[i], r.SparseIndices[i-1])
				}
			}
			return nil
		}
		il.Append(true)
		iv.AppendValues(r.SparseIndices, nil)
		vl.Append(true)
		vv.AppendValues(r.SparseValues, nil)
		return nil
	}, nil
}

func checkWidth(r EmbedRow, got, want int) error {
	if got != want {
		return fmt.Errorf("%s chunk %d: embedding has %d values; want %d", r.ID, r.Chunk, got, want)
	}
	return nil
}
