package output

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/synapse-embed/synapse/io/vector"
)

// ColTokenVectors replaces embedding in a multi-vector output
// (TokensSchema): a chunk's token vectors, one list per row.
const ColTokenVectors = "token_vectors"

// TokensSchema is the schema of a multi-vector output (embed --vectors
// tokens): EmbedSchemaWith's columns with, instead of the embedding,
// token_vectors, a list of the embedding column's type per row
// (list<fixed_size_list<float32, dims>> for float32): the chunk's token
// vectors in token order.
func TokensSchema(dims int, d vector.Dtype, withText bool, meta map[string]string) *arrow.Schema {
	return rowSchema(withText, meta, arrow.Field{Name: ColTokenVectors, Type: arrow.ListOf(d.ArrowType(dims))})
}

// IsTokens reports whether sc is a multi-vector output's schema.
func IsTokens(sc *arrow.Schema) bool { return sc.HasField(ColTokenVectors) }

// tokensAppender checks (check: true) or appends a row's token vectors
// (TokenEmbeddings for float32, TokenVectors in the dtype otherwise) to
// the token_vectors builder.
func tokensAppender(b array.Builder) (func(r EmbedRow, check bool) error, error) {
	lb, ok := b.(*array.ListBuilder)
	if !ok {
		return nil, fmt.Errorf("token rows for a %s column of type %s", ColTokenVectors, b.Type())
	}
	one, err := vectorAppender(lb.ValueBuilder())
	if err != nil {
		return nil, err
	}
	each := func(r EmbedRow, fn func(EmbedRow) error) error {
		for _, v := range r.TokenEmbeddings {
			if err := fn(EmbedRow{ID: r.ID, Chunk: r.Chunk, Embedding: v}); err != nil {
				return err
			}
		}
		for _, v := range r.TokenVectors {
			if err := fn(EmbedRow{ID: r.ID, Chunk: r.Chunk, Vector: v}); err != nil {
				return err
			}
		}
		return nil
	}
	return func(r EmbedRow, check bool) error {
		if check {
			if len(r.TokenEmbeddings) > 0 && len(r.TokenVectors) > 0 {
				return fmt.Errorf("%s chunk %d: token vectors in two forms", r.ID, r.Chunk)
			}
			return each(r, func(t EmbedRow) error { return one(t, true) })
		}
		lb.Append(true)
		return each(r, func(t EmbedRow) error { return one(t, false) })
	}, nil
}
