package search

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/output"
)

// RunFormats are the extensions a run output may have.
const RunFormats = ".trec (or .run), .tsv, .arrow, .parquet or .jsonl"

// Stdout is the output path that names standard output (a TREC run).
const Stdout = "-"

// CheckRunPath refuses an output path of an unknown format.
func CheckRunPath(path string) error {
	if path == Stdout || strings.EqualFold(filepath.Ext(path), ".tsv") {
		return nil
	}
	if _, err := output.FormatOf(path); err != nil {
		return fmt.Errorf("%w: output %s: want %s", ErrInput, path, RunFormats)
	}
	return nil
}

// RunSchema is the columns of a table run output: one row per hit.
func RunSchema(meta map[string]string) *arrow.Schema {
	return output.NewSchema([]arrow.Field{
		{Name: output.ColQueryID, Type: arrow.BinaryTypes.String},
		{Name: output.ColDocID, Type: arrow.BinaryTypes.String},
		{Name: output.ColRank, Type: arrow.PrimitiveTypes.Int32},
		{Name: output.ColScore, Type: arrow.PrimitiveTypes.Float32},
	}, meta)
}

// RunWriter writes the hits of each query: a TREC run ("qid Q0 docid rank
// score tag"), a BEIR TSV ("query-id corpus-id score" under a header), or
// a table of RunSchema, to a local file or an s3:// object. It appears at
// its path on Commit. One goroutine owns it.
type RunWriter struct {
	tsv    *files.OutputFile
	table  *output.TableWriter
	bld    *array.RecordBuilder
	stream *bufio.Writer // Stdout: TREC lines as they come
	tag    string
}

// CreateRun starts a run output; meta is a table's schema metadata (its
// output.MetaRunTag is the TREC tag). The path Stdout writes a TREC run to
// stdout, query by query (nothing to take back on Abort).
func CreateRun(ctx context.Context, path string, meta map[string]string, stdout io.Writer) (*RunWriter, error) {
	w := &RunWriter{}
	if path == Stdout {
		w.stream, w.tag = bufio.NewWriterSize(stdout, 1<<16), meta[output.MetaRunTag]
		if w.tag == "" {
			w.tag = "synapse"
		}
		return w, nil
	}
	if strings.EqualFold(filepath.Ext(path), ".tsv") {
		f, err := files.CreateOutput(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		w.tsv = f
		_, err = io.WriteString(f, "query-id\tcorpus-id\tscore\n")
		return w, err
	}
	format, err := output.FormatOf(path)
	if err != nil {
		return nil, err
	}
	sc := RunSchema(meta)
	if w.table, err = output.CreateTable(ctx, path, format, sc); err != nil {
		return nil, err
	}
	w.bld = array.NewRecordBuilder(memory.DefaultAllocator, sc)
	return w, nil
}

// Put writes one query's hits, best first.
func (w *RunWriter) Put(query string, hits []Hit) error {
	if w.stream != nil {
		for i, h := range hits { // io/output's TREC line
			line := query + " Q0 " + h.Doc + " " + strconv.Itoa(i+1) + " " + strconv.FormatFloat(float64(h.Score), 'g', -1, 32) + " " + w.tag + "\n"
			if _, err := w.stream.WriteString(line); err != nil {
				return err
			}
		}
		return nil
	}
	if w.tsv != nil {
		for _, h := range hits {
			if _, err := io.WriteString(w.tsv, query+"\t"+h.Doc+"\t"+strconv.FormatFloat(float64(h.Score), 'g', -1, 32)+"\n"); err != nil {
				return err
			}
		}
		return nil
	}
	f := w.bld.Fields()
	for i, h := range hits {
		f[0].(*array.StringBuilder).Append(query)
		f[1].(*array.StringBuilder).Append(h.Doc)
		f[2].(*array.Int32Builder).Append(int32(i + 1))
		f[3].(*array.Float32Builder).Append(h.Score)
	}
	if f[0].Len() >= 1<<16 {
		return w.flush()
	}
	return nil
}

func (w *RunWriter) flush() error {
	if w.bld.Field(0).Len() == 0 {
		return nil
	}
	rec := w.bld.NewRecordBatch()
	defer rec.Release()
	return w.table.Write(rec)
}

// Commit finishes the output: it appears at its path.
func (w *RunWriter) Commit() error {
	if w.stream != nil {
		return w.stream.Flush()
	}
	if w.tsv != nil {
		return w.tsv.Commit()
	}
	defer w.bld.Release()
	if err := w.flush(); err != nil {
		w.table.Abort()
		return err
	}
	return w.table.Commit()
}

// Abort drops the unfinished output.
func (w *RunWriter) Abort() {
	if w.stream != nil {
		w.stream.Flush() // the queries written so far, whole
		return
	}
	if w.tsv != nil {
		w.tsv.Abort()
		return
	}
	w.bld.Release()
	w.table.Abort()
}
