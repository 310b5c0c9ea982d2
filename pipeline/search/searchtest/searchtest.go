// Package searchtest writes small embedding outputs, as synapse embed
// writes them, for the tests of synapse search (package search and the
// command line); only test binaries use it.
package searchtest

import (
	"fmt"
	"testing"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/vector"
)

// Doc is a test document: its id and its chunks' float32 vectors.
type Doc struct {
	ID   string
	Vecs [][]float32
}

// Settings are the embedding settings every output written here records
// (Write sets Dims, Dtype and Ranges).
var Settings = vector.Settings{ModelDigest: "sha256:test", TextFields: []string{"text"}, ChunkTokens: 64, Pooling: "mean", Normalize: true}

// Write writes docs to path (.arrow or .parquet) as an embedding output of
// dtype d (r: the ranges of int8 and uint8), in record batches of
// batchRows rows. Float32 vectors are written as given, NaN included.
func Write(t testing.TB, path string, docs []Doc, d vector.Dtype, r *vector.Ranges, batchRows int) {
	t.Helper()
	dims := len(docs[0].Vecs[0])
	s := Settings
	s.Dims = dims
	if d != vector.Float32 {
		s.Dtype = string(d)
	}
	if r != nil {
		s.Ranges = r.Digest()
	}
	meta := s.Metadata()
	meta[vector.MetaDtype], meta["synapse.dims"], meta["synapse.model_name"] = string(d), fmt.Sprint(dims), "test"
	if r != nil {
		meta[vector.MetaRanges] = r.JSON()
	}
	q, err := vector.NewQuantizer(d, dims, r)
	if err != nil {
		t.Fatal(err)
	}
	w, err := output.Create(path, output.WriterOptions{Schema: output.EmbedSchemaOf(dims, d, meta), BatchRows: batchRows})
	if err != nil {
		t.Fatal(err)
	}
	for i, dc := range docs {
		var rows output.EmbedRows
		for c, v := range dc.Vecs {
			row := output.EmbedRow{ID: dc.ID, Chunk: int32(c)}
			if d == vector.Float32 {
				row.Embedding = v
			} else {
				row.Vector = q.Append(nil, v)
			}
			rows = append(rows, row)
		}
		if err := w.Put(int64(i), int64(i), rows, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// WriteSparse writes docs to path (.arrow or .parquet) as a sparse output
// (synapse embed --vectors sparse) over len(vector) terms: each chunk's
// non-zero values, by index, in record batches of batchRows rows.
func WriteSparse(t testing.TB, path string, docs []Doc, batchRows int) {
	t.Helper()
	s := Settings
	s.Dims, s.Output, s.Pooling, s.Normalize = len(docs[0].Vecs[0]), "sparse", "splade-max", false
	meta := s.Metadata()
	meta[vector.MetaDtype], meta["synapse.dims"], meta["synapse.model_name"] = string(vector.Float32), fmt.Sprint(s.Dims), "test"
	w, err := output.Create(path, output.WriterOptions{Schema: output.SparseSchema(false, meta), BatchRows: batchRows})
	if err != nil {
		t.Fatal(err)
	}
	for i, dc := range docs {
		var rows output.EmbedRows
		for c, v := range dc.Vecs {
			row := output.EmbedRow{ID: dc.ID, Chunk: int32(c), SparseIndices: []uint32{}, SparseValues: []float32{}}
			for j, x := range v {
				if x != 0 {
					row.SparseIndices, row.SparseValues = append(row.SparseIndices, uint32(j)), append(row.SparseValues, x)
				}
			}
			rows = append(rows, row)
		}
		if err := w.Put(int64(i), int64(i), rows, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// WriteTokens writes docs to path (.arrow or .parquet) as a multi-vector
// output (synapse embed --vectors tokens) of dims-wide token vectors of
// dtype d (float32 or float16): each chunk's vector in Vecs is its token
// vectors one after another. query writes it as embed --as-query does
// (the settings' output "tokens-query"). Record batches of batchRows rows.
func WriteTokens(t testing.TB, path string, docs []Doc, dims int, d vector.Dtype, query bool, batchRows int) {
	t.Helper()
	s := Settings
	s.Dims, s.Output, s.Pooling, s.Tokens = dims, "tokens", "colbert", `["[Q] ","[D] ",32,180,true,false,[]]`
	if query {
		s.Output = "tokens-query"
	}
	if d != vector.Float32 {
		s.Dtype = string(d)
	}
	meta := s.Metadata()
	meta[vector.MetaDtype], meta["synapse.dims"], meta["synapse.model_name"] = string(d), fmt.Sprint(dims), "test"
	q, err := vector.NewQuantizer(d, dims, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := output.Create(path, output.WriterOptions{Schema: output.TokensSchema(dims, d, false, meta), BatchRows: batchRows})
	if err != nil {
		t.Fatal(err)
	}
	for i, dc := range docs {
		var rows output.EmbedRows
		for c, v := range dc.Vecs {
			row := output.EmbedRow{ID: dc.ID, Chunk: int32(c)}
			for k := 0; k < len(v); k += dims {
				if d == vector.Float32 {
					row.TokenEmbeddings = append(row.TokenEmbeddings, v[k:k+dims])
				} else {
					row.TokenVectors = append(row.TokenVectors, q.Append(nil, v[k:k+dims]))
				}
			}
			rows = append(rows, row)
		}
		if err := w.Put(int64(i), int64(i), rows, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}
