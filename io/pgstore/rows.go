package pgstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/synapse-embed/synapse/io/vector"
)

// Write converts a record batch of the embedding output (columns id,
// chunk, embedding and doc_hash, and text with WithText, found by name)
// into rows of the staging table; they are committed by the next Save.
func (s *Store) Write(rec arrow.RecordBatch) error {
	sc := rec.Schema()
	col := func(name string) arrow.Array {
		if i := sc.FieldIndices(name); len(i) == 1 {
			return rec.Column(i[0])
		}
		return nil
	}
	ids, _ := col("id").(*array.String)
	chunks, _ := col("chunk").(*array.Int32)
	hashes, _ := col("doc_hash").(*array.FixedSizeBinary)
	emb := col("embedding")
	if s.cfg.Sparse {
		emb = col("sparse_indices")
	}
	if ids == nil || chunks == nil || hashes == nil || emb == nil {
		return fmt.Errorf("pgstore: a batch without the embedding output's columns: %s", sc)
	}
	var texts *array.String
	if s.cfg.WithText {
		if texts, _ = col("text").(*array.String); texts == nil {
			return fmt.Errorf("pgstore: a batch without the text column --with-text writes: %s", sc)
		}
	}
	enc, err := s.rowEncoder(emb, col("sparse_values"))
	if err != nil {
		return err
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		id := ids.Value(i)
		row := []any{id, chunks.Value(i), id + "#" + strconv.Itoa(int(chunks.Value(i)))}
		if texts != nil {
			row = append(row, texts.Value(i))
		}
		v, err := enc(i)
		if err != nil {
			return fmt.Errorf("%w (document %s chunk %d)", err, id, chunks.Value(i))
		}
		s.pending = append(s.pending, append(row, v, hashes.Value(i), s.cfg.Digest))
	}
	return nil
}

// rowEncoder is encoder, or sparseEncoder for a sparse run.
func (s *Store) rowEncoder(emb, values arrow.Array) (func(i int) (any, error), error) {
	if s.cfg.Sparse {
		return sparseEncoder(emb, values, s.cfg.Dims)
	}
	enc, err := encoder(emb, s.cfg.Dims, s.cfg.Dtype)
	if err != nil {
		return nil, err
	}
	return func(i int) (any, error) { return enc(i), nil }, nil
}

// encoder returns the COPY value of row i of an embedding column: for
// vector and halfvec, pgvector's binary form (vector_send: int16 dims,
// int16 0, the elements big-endian) as a []byte, which pgx sends as it is
// to a type it does not know; for bit, which pgx knows, a pgtype.Bits, the
// first dimension in the top bit.
func encoder(emb arrow.Array, dims int, dtype vector.Dtype) (func(i int) any, error) {
	switch a := emb.(type) {
	case *array.FixedSizeList:
		off := a.Offset() // rows of a sliced list start there in its values
		switch v := a.ListValues().(type) {
		case *array.Float32:
			return func(i int) any {
				b := vecHeader(dims, 4)
				for _, x := range v.Float32Values()[(off+i)*dims : (off+i+1)*dims] {
					b = binary.BigEndian.AppendUint32(b, math.Float32bits(x))
				}
				return b
			}, nil
		case *array.Float16:
			return func(i int) any {
				b := vecHeader(dims, 2)
				for _, x := range v.Values()[(off+i)*dims : (off+i+1)*dims] {
					b = binary.BigEndian.AppendUint16(b, x.Uint16())
				}
				return b
			}, nil
		}
	case *array.FixedSizeBinary:
		// binary's bytes are ubinary's with the top bit flipped (vector's
		// int8 view); the table holds the sign bits either way.
		flip := byte(0)
		if dtype == vector.Binary {
			flip = 0x80
		}
		return func(i int) any {
			src := a.Value(i)
			b := make([]byte, len(src))
			for j, x := range src {
				b[j] = x ^ flip
			}
			return pgtype.Bits{Bytes: b, Len: int32(dims), Valid: true}
		}, nil
	}
	return nil, fmt.Errorf("pgstore: an embedding column of type %s has no pgvector form", emb.DataType())
}

// sparseEncoder returns the COPY value of row i of the sparse_indices and
// sparse_values columns: pgvector's binary sparsevec (sparsevec_send:
// int32 dims, int32 count, int32 0, the 0-based indices, rising, then the
// values, all big-endian) as a []byte. The sparse output's indices are
// 0-based and rising already. A row of more terms than sparsevec holds
// (the run keeps at most SparseMaxNonZero with --sparse-top-k, checked
// before any work) or of an index outside the vocabulary is an error.
func sparseEncoder(ixCol, valCol arrow.Array, vocab int) (func(i int) (any, error), error) {
	ix, ok1 := ixCol.(*array.List)
	val, ok2 := valCol.(*array.List)
	var ixs *array.Uint32
	var vals *array.Float32
	if ok1 && ok2 {
		ixs, ok1 = ix.ListValues().(*array.Uint32)
		vals, ok2 = val.ListValues().(*array.Float32)
	}
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("pgstore: a sparse batch without list<uint32> sparse_indices and list<float32> sparse_values")
	}
	return func(i int) (any, error) {
		a, b := ix.ValueOffsets(i)
		va, vb := val.ValueOffsets(i)
		n := int(b - a)
		if n != int(vb-va) || n > SparseMaxNonZero {
			return nil, fmt.Errorf("pgstore: a sparse row of %d indices and %d values (sparsevec holds at most %d)", n, vb-va, SparseMaxNonZero)
		}
		out := make([]byte, 12, 12+8*n)
		binary.BigEndian.PutUint32(out, uint32(vocab))
		binary.BigEndian.PutUint32(out[4:], uint32(n))
		for _, x := range ixs.Values()[a:b] {
			if int(x) >= vocab {
				return nil, fmt.Errorf("pgstore: sparse index %d outside the vocabulary of %d terms", x, vocab)
			}
			out = binary.BigEndian.AppendUint32(out, x)
		}
		for _, x := range vals.Values()[va:vb] {
			out = binary.BigEndian.AppendUint32(out, math.Float32bits(x))
		}
		return out, nil
	}, nil
}

func vecHeader(dims, width int) []byte {
	b := make([]byte, 4, 4+width*dims)
	binary.BigEndian.PutUint16(b, uint16(dims))
	return b
}
