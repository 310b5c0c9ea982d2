package output

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/synapse-embed/synapse/io/files"
)

// ErrUnknownFormat: an output path's extension names no format this job writes.
var ErrUnknownFormat = errors.New("unknown output format")

// TREC run columns: a schema written as FormatTREC must have them.
const (
	ColQueryID = "query_id"
	ColDocID   = "doc_id"
	ColRank    = "rank"
	ColScore   = "score"
	// MetaRunTag is the metadata key whose value is the run's tag column.
	MetaRunTag = "synapse.run_tag"
)

// checkFormat reports a format that cannot hold the schema.
func checkFormat(f Format, sc *arrow.Schema) error {
	switch f {
	case FormatArrow, FormatParquet, FormatJSONL:
		return nil
	case FormatTREC:
		for _, c := range []string{ColQueryID, ColDocID, ColRank, ColScore} {
			if len(sc.FieldIndices(c)) == 0 {
				return fmt.Errorf("%w: a TREC run needs a %s column", ErrUnknownFormat, c)
			}
		}
		return nil
	}
	return fmt.Errorf("%w: %q", ErrUnknownFormat, f)
}

// finalSink writes the output file in its final format.
type finalSink struct {
	out *files.Sink
	bw  *bufio.Writer
	ipc *ipc.FileWriter
	pq  *pqarrow.FileWriter
	row func(rec arrow.RecordBatch) error // JSONL and TREC
}

// newFinalSink writes the output file out in format; on failure out is
// discarded.
func newFinalSink(out *files.Sink, format Format, sc *arrow.Schema, mem memory.Allocator) (*finalSink, error) {
	s := &finalSink{out: out, bw: bufio.NewWriterSize(out, 1<<20)}
	var err error
	switch format {
	case FormatParquet:
		props := parquet.NewWriterProperties(parquet.WithAllocator(mem),
			parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(false),
			parquet.WithMaxRowGroupLength(1<<20))
		s.pq, err = pqarrow.NewFileWriter(sc, s.bw, props,
			pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(mem)))
	case FormatJSONL:
		s.row = func(rec arrow.RecordBatch) error { return writeJSONL(s.bw, rec) }
	case FormatTREC:
		tag, _ := sc.Metadata().GetValue(MetaRunTag)
		if tag == "" {
			tag = "synapse"
		}
		s.row = func(rec arrow.RecordBatch) error { return writeTREC(s.bw, rec, tag) }
	default:
		s.ipc, err = ipc.NewFileWriter(s.bw, ipc.WithSchema(sc), ipc.WithAllocator(mem))
	}
	if err != nil {
		out.Discard()
		return nil, fmt.Errorf("%s: %w", out.Path(), err)
	}
	return s, nil
}

func (s *finalSink) write(rec arrow.RecordBatch) error {
	var err error
	switch {
	case s.pq != nil:
		err = s.pq.Write(rec)
	case s.ipc != nil:
		err = s.ipc.Write(rec)
	default:
		err = s.row(rec)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", s.out.Name(), err)
	}
	return nil
}

// finish ends the file and makes it durable; an object appears now, a
// local file when it is published.
func (s *finalSink) finish() error {
	var err error
	switch {
	case s.pq != nil:
		err = s.pq.Close()
	case s.ipc != nil:
		err = s.ipc.Close()
	}
	if err = errors.Join(err, s.bw.Flush()); err == nil {
		err = s.out.Finish()
	}
	if err != nil {
		s.out.Discard()
		return fmt.Errorf("finish %s: %w", s.out.Name(), err)
	}
	return nil
}

// abort drops the file (a local temporary is removed, an upload aborted).
func (s *finalSink) abort() {
	switch {
	case s.pq != nil:
		s.pq.Close()
	case s.ipc != nil:
		s.ipc.Close()
	}
	s.out.Discard()
}

// writeJSONL writes one JSON object per row, keys in schema order; fixed-size
// binary values (hashes) as hex, null values as null. A sparse output's
// sparse_indices and sparse_values are one member, "sparse":
// {"indices":[…],"values":[…]}, the form Qdrant's sparse vectors and
// Milvus's JSON import take.
func writeJSONL(w *bufio.Writer, rec arrow.RecordBatch) error {
	fields := rec.Schema().Fields()
	sparse := -1 // the sparse_indices column, followed by sparse_values
	if i := rec.Schema().FieldIndices(ColSparseIndices); len(i) == 1 && i[0]+1 < len(fields) && fields[i[0]+1].Name == ColSparseValues {
		sparse = i[0]
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		w.WriteByte('{')
		for j, col := range rec.Columns() {
			if j == sparse+1 && sparse >= 0 {
				continue
			}
			if j > 0 {
				w.WriteByte(',')
			}
			if j == sparse {
				if err := writeSparseJSON(w, col, rec.Column(j+1), i); err != nil {
					return fmt.Errorf("row %d: %w", i, err)
				}
				continue
			}
			k, _ := json.Marshal(fields[j].Name)
			w.Write(k)
			w.WriteByte(':')
			var v any
			switch {
			case col.IsNull(i):
			case col.DataType().ID() == arrow.FIXED_SIZE_BINARY:
				v = hex.EncodeToString(col.(*array.FixedSizeBinary).Value(i))
			default:
				v = col.GetOneForMarshal(i)
			}
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("row %d column %s: %w", i, fields[j].Name, err)
			}
			w.Write(b)
		}
		if _, err := w.WriteString("}\n"); err != nil {
			return err
		}
	}
	return nil
}

// writeSparseJSON writes row i's sparse vector as "sparse":{"indices":
// […],"values":[…]}.
func writeSparseJSON(w *bufio.Writer, ix, vals arrow.Array, i int) error {
	b, err := json.Marshal(map[string]any{"indices": ix.GetOneForMarshal(i), "values": vals.GetOneForMarshal(i)})
	if err != nil {
		return err
	}
	w.WriteString(`"sparse":`)
	_, err = w.Write(b)
	return err
}

// writeTREC writes the rows as a TREC run, "qid Q0 docid rank score tag",
// each query's rows by rank. A batch holds whole queries (batches end on
// record boundaries), so sorting within it is enough.
func writeTREC(w *bufio.Writer, rec arrow.RecordBatch, tag string) error {
	sc := rec.Schema()
	col := func(name string) arrow.Array { return rec.Column(sc.FieldIndices(name)[0]) }
	qids, dids := col(ColQueryID).(*array.String), col(ColDocID).(*array.String)
	ranks, scores := col(ColRank).(*array.Int32), col(ColScore).(*array.Float32)
	rows := make([]int, rec.NumRows())
	first := map[string]int{} // a query's first row: queries keep their input order
	for i := range rows {
		rows[i] = i
		if _, ok := first[qids.Value(i)]; !ok {
			first[qids.Value(i)] = i
		}
	}
	slices.SortStableFunc(rows, func(a, b int) int {
		if qa, qb := first[qids.Value(a)], first[qids.Value(b)]; qa != qb {
			return qa - qb
		}
		return int(ranks.Value(a) - ranks.Value(b))
	})
	for _, i := range rows {
		line := qids.Value(i) + " Q0 " + dids.Value(i) + " " + strconv.Itoa(int(ranks.Value(i))) + " " +
			strconv.FormatFloat(float64(scores.Value(i)), 'g', -1, 32) + " " + tag + "\n"
		if _, err := w.WriteString(line); err != nil {
			return err
		}
	}
	return nil
}

// TableWriter writes record batches of one schema to a file or an object
// in a Format: it appears at its path only on Commit.
type TableWriter struct {
	out  *files.Sink
	sink *finalSink
}

// CreateTable starts writing path (a local path or an s3:// URL) in format
// f (Arrow, Parquet, JSON Lines or TREC, whose schema must have the run
// columns).
func CreateTable(ctx context.Context, path string, f Format, sc *arrow.Schema) (*TableWriter, error) {
	if err := checkFormat(f, sc); err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	out, err := files.CreateSink(ctx, path)
	if err != nil {
		return nil, err
	}
	s, err := newFinalSink(out, f, sc, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	return &TableWriter{out: out, sink: s}, nil
}

// Write writes one batch.
func (t *TableWriter) Write(rec arrow.RecordBatch) error { return t.sink.write(rec) }

// Commit finishes the file and makes it appear at its path.
func (t *TableWriter) Commit() error {
	if err := t.sink.finish(); err != nil {
		return err
	}
	return t.out.Publish()
}

// Abort drops the unfinished file.
func (t *TableWriter) Abort() { t.sink.abort() }
