package search

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/vector"
)

// ErrInput marks an input that cannot be searched: not an embedding
// output, parts that do not go together, queries and corpus of other
// models or settings. Running again unchanged cannot succeed.
var ErrInput = errors.New("search: unusable input")

// Vectors is an embedding output of synapse embed: one file or the parts
// of a sharded run, read in order.
type Vectors struct {
	Paths    []string
	Dtype    vector.Dtype
	Dims     int
	Ranges   *vector.Ranges // int8, uint8
	Settings vector.Settings
	Model    string // the model's name, for the run's tag
	// Sparse: the output holds sparse vectors (sparse_indices,
	// sparse_values over Dims terms) instead of an embedding column.
	Sparse bool
	// Tokens: the output holds token vectors (token_vectors, Dims wide,
	// of Dtype float32 or float16) instead of an embedding column.
	Tokens bool
	what   string // the flag that names it (--corpus), for errors
}

// OpenVectors reads the schemas of an embedding output's files and checks
// that they go together; what names it (--corpus) prefixes errors. Paths
// may be s3:// objects (their footers are read by range requests).
func OpenVectors(ctx context.Context, what string, paths []string) (*Vectors, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: %s: no file", ErrInput, what)
	}
	var v *Vectors
	for _, p := range paths {
		sc, err := output.FileSchema(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("%w: %s %s: not an Arrow IPC or Parquet file: %w", ErrInput, what, p, err)
		}
		w, err := vectorsOf(sc)
		if err != nil {
			return nil, fmt.Errorf("%w: %s %s: %w", ErrInput, what, p, err)
		}
		if v == nil {
			v = w
			continue
		}
		if d := w.Settings.Diff(v.Settings); d != "" {
			return nil, fmt.Errorf("%w: %s %s is not a part of the same run as %s: %s", ErrInput, what, p, paths[0], d)
		}
	}
	v.Paths, v.what = paths, what
	return v, nil
}

// vectorsOf checks an embedding output's schema.
func vectorsOf(sc *arrow.Schema) (*Vectors, error) {
	md := sc.Metadata()
	s, err := vector.SettingsFromMetadata(md.GetValue)
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name string
		id   arrow.Type
	}{{output.ColID, arrow.STRING}, {output.ColChunk, arrow.INT32}} {
		if idx := sc.FieldIndices(c.name); len(idx) != 1 || sc.Field(idx[0]).Type.ID() != c.id {
			return nil, fmt.Errorf("no %s column of type %s: not an embedding output", c.name, c.id)
		}
	}
	dims := s.Dims
	sparse, err := sparseSchema(sc)
	if err != nil {
		return nil, err
	}
	if sparse {
		if dims <= 0 {
			return nil, errors.New("a sparse output without its vocabulary's size (dims) in its settings")
		}
		return &Vectors{Dtype: vector.Float32, Dims: dims, Settings: s, Model: metaValue(md, "synapse.model_name"), Sparse: true}, nil
	}
	if d, ok, err := tokensSchema(sc, dims); ok || err != nil {
		if err != nil {
			return nil, err
		}
		return &Vectors{Dtype: d, Dims: dims, Settings: s, Model: metaValue(md, "synapse.model_name"), Tokens: true}, nil
	}
	idx := sc.FieldIndices(output.ColEmbedding)
	if len(idx) != 1 {
		return nil, errors.New("no embedding column: not an embedding output")
	}
	if dims <= 0 {
		dims, _ = strconv.Atoi(metaValue(md, "synapse.dims"))
	}
	d, r, err := vector.FromMetadata(md.GetValue, dims)
	if err != nil {
		return nil, err
	}
	if err := vector.CheckType(sc.Field(idx[0]).Type, d, dims); err != nil {
		return nil, err
	}
	return &Vectors{Dtype: d, Dims: dims, Ranges: r, Settings: s, Model: metaValue(md, "synapse.model_name")}, nil
}

func metaValue(md arrow.Metadata, key string) string {
	v, _ := md.GetValue(key)
	return v
}

// Compatible refuses queries that were not embedded as the corpus was:
// another model, pooling, normalisation, dims or sentence-transformers
// modules (the difference named).
// Text fields, prefix, chunking and dtype may differ: queries are short
// texts with their own prompt, and a float query searches a quantized
// corpus.
func Compatible(queries, corpus *Vectors) error {
	q, c := queries.Settings, corpus.Settings
	switch {
	case corpus.Sparse && !queries.Sparse:
		return fmt.Errorf("%w: dense queries cannot search a sparse corpus (embed --vectors sparse): embed the queries with --vectors sparse and the corpus's model", ErrInput)
	case queries.Sparse && !corpus.Sparse:
		return fmt.Errorf("%w: sparse queries (embed --vectors sparse) cannot search a dense corpus: embed the queries as the corpus was", ErrInput)
	case corpus.Tokens || queries.Tokens:
		return compatibleTokens(queries, corpus)
	}
	for _, f := range []struct {
		name   string
		qv, cv any
	}{
		{"model_digest", q.ModelDigest, c.ModelDigest}, {"pooling", q.Pooling, c.Pooling},
		{"normalize", q.Normalize, c.Normalize}, {"dims", queries.Dims, corpus.Dims}, {"modules", q.Modules, c.Modules},
	} {
		if f.qv != f.cv {
			return fmt.Errorf("%w: the queries and the corpus were embedded otherwise: %s: queries %v, corpus %v", ErrInput, f.name, f.qv, f.cv)
		}
	}
	switch {
	case queries.Dtype.Float():
	case queries.Dtype.Bits() && corpus.Dtype.Bits():
	case queries.Dtype == corpus.Dtype && queries.Ranges.Digest() == corpus.Ranges.Digest():
	case queries.Dtype == corpus.Dtype:
		return fmt.Errorf("%w: the queries' %s ranges are not the corpus's: embed them with --calibration %s (or as float32)", ErrInput, queries.Dtype, corpus.Paths[0])
	default:
		return fmt.Errorf("%w: %s queries cannot search a %s corpus: embed the queries as float32", ErrInput, queries.Dtype, corpus.Dtype)
	}
	return nil
}

// batch is one record batch of an embedding output: ids, chunks and vectors.
type batch struct {
	ids    *array.String
	chunks *array.Int32
	vecs   vector.Column
	sparse *sparseCols // a sparse output's vectors (then vecs holds only Rows)
	tokens *tokenCols  // a multi-vector output's (then vecs holds only Rows)
	rec    arrow.RecordBatch
	path   string // its file
	row0   int64  // the file's rows before it
}

// eachBatch calls fn with every batch of v's files, in order.
func (v *Vectors) eachBatch(ctx context.Context, fn func(b *batch) error) error {
	for _, p := range v.Paths {
		var rows int64
		err := output.EachBatch(ctx, p, nil, func(rec arrow.RecordBatch) error {
			b, err := v.batchOf(rec)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			b.path, b.row0 = p, rows
			rows += rec.NumRows()
			if v.Sparse {
				if err := v.sparseOf(b); err != nil {
					return err
				}
			}
			if v.Tokens {
				if err := v.tokensOf(b); err != nil {
					return err
				}
			}
			return fn(b)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (v *Vectors) batchOf(rec arrow.RecordBatch) (*batch, error) {
	sc := rec.Schema()
	col := func(name string) arrow.Array { return rec.Column(sc.FieldIndices(name)[0]) }
	ids, ok := col(output.ColID).(*array.String)
	chunks, ok2 := col(output.ColChunk).(*array.Int32)
	if !ok || !ok2 || ids.NullN() > 0 {
		return nil, fmt.Errorf("%w: id or chunk column of another type, or null ids", ErrInput)
	}
	if v.Sparse || v.Tokens { // vecs holds no vectors, only the rows' count
		return &batch{ids: ids, chunks: chunks, vecs: vector.Column{Rows: int(rec.NumRows())}, rec: rec}, nil
	}
	vecs, err := vector.ColumnOf(col(output.ColEmbedding), v.Dtype, v.Dims)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	return &batch{ids: ids, chunks: chunks, vecs: vecs, rec: rec}, nil
}

// checkFinite refuses rows of a batch whose float values (f: its rows from
// r0 on, dims values each, as searched) hold a NaN or an infinity, naming the file, the row
// (counted from 0 in the file) and the id: no score of such a vector means
// anything.
func (v *Vectors) checkFinite(b *batch, r0 int, f []float32, dims int) error {
	i := vector.NonFinite(f)
	if i < 0 {
		return nil
	}
	r := r0 + i/dims
	return fmt.Errorf("%w: %s %s: row %d (id %s, chunk %d): dimension %d is %v; a vector with NaN or infinite values cannot be searched",
		ErrInput, v.what, b.path, b.row0+int64(r), b.ids.Value(r), b.chunks.Value(r), i%dims, f[i])
}
