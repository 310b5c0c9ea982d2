package pgstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/synapse-embed/synapse/io/vector"
)

// Write converts a record batch of the embedding output (columns id,
// chunk, embedding and doc_hash, found by name) into rows of the staging
// table; they are committed by the next Save.
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
	if ids == nil || chunks == nil || hashes == nil || emb == nil {
		return fmt.Errorf("pgstore: a batch without the embedding output's columns: %s", sc)
	}
	enc, err := encoder(emb, s.cfg.Dims, s.cfg.Dtype)
	if err != nil {
		return err
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		id := ids.Value(i)
		s.pending = append(s.pending, []any{id, chunks.Value(i), id + "#" + strconv.Itoa(int(chunks.Value(i))),
			enc(i), hashes.Value(i), s.cfg.Digest})
	}
	return nil
}

// encoder returns the pgvector binary form (its *_send) of row i of an
// embedding column: vector and halfvec are int16 dims, int16 0, then the
// elements big-endian; bit is int32 bits, then the bytes, first dimension
// in the top bit. pgx sends a []byte to a type it does not know as it is.
func encoder(emb arrow.Array, dims int, dtype vector.Dtype) (func(i int) []byte, error) {
	switch a := emb.(type) {
	case *array.FixedSizeList:
		off := a.Offset() // rows of a sliced list start there in its values
		switch v := a.ListValues().(type) {
		case *array.Float32:
			return func(i int) []byte {
				b := vecHeader(dims, 4)
				for _, x := range v.Float32Values()[(off+i)*dims : (off+i+1)*dims] {
					b = binary.BigEndian.AppendUint32(b, math.Float32bits(x))
				}
				return b
			}, nil
		case *array.Float16:
			return func(i int) []byte {
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
		return func(i int) []byte {
			src := a.Value(i)
			b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(src)), uint32(dims))
			for _, x := range src {
				b = append(b, x^flip)
			}
			return b
		}, nil
	}
	return nil, fmt.Errorf("pgstore: an embedding column of type %s has no pgvector form", emb.DataType())
}

func vecHeader(dims, width int) []byte {
	b := make([]byte, 4, 4+width*dims)
	binary.BigEndian.PutUint16(b, uint16(dims))
	return b
}
