package corpus

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// outcome is what a Reader gave for one record, in a comparable form.
type outcome struct {
	Index  int64
	Line   int
	Row    int64
	ID     string
	Text   string
	Reason string // "" for a document
}

// readAll drains r and returns its records and file errors.
func readAll(t testing.TB, r *Reader) ([]outcome, []*FileError) {
	t.Helper()
	var got []outcome
	var fes []*FileError
	for {
		d, err := r.Next()
		var re *RowError
		var fe *FileError
		switch {
		case err == nil:
			got = append(got, outcome{Index: d.Index, Line: d.Line, Row: d.Row, ID: d.ID, Text: d.Text})
		case errors.Is(err, io.EOF):
			if err := r.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return got, fes
		case errors.As(err, &re):
			got = append(got, outcome{Index: re.Index, Line: re.Line, Row: re.Row, ID: re.ID, Reason: re.Reason})
		case errors.As(err, &fe):
			fes = append(fes, fe)
		default:
			t.Fatalf("Next: unexpected error %T %v", err, err)
		}
	}
}

func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeParquet writes the columns (all of one length) to path with the given
// row group length, storing the Arrow schema so that dictionary and
// large_string columns read back as such.
func writeParquet(t testing.TB, path string, rowGroup int64, names []string, cols []arrow.Array) {
	t.Helper()
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: names[i], Type: c.DataType(), Nullable: true}
	}
	sc := arrow.NewSchema(fields, nil)
	rec := array.NewRecordBatch(sc, cols, int64(cols[0].Len()))
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rowGroup))
	fw, err := pqarrow.NewFileWriter(sc, bw, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(fw.Close(), bw.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

// strings builds a string array; a nil entry is null.
func stringsArr(vals ...*string) arrow.Array {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for _, v := range vals {
		if v == nil {
			b.AppendNull()
		} else {
			b.Append(*v)
		}
	}
	return b.NewArray()
}

func sp(s string) *string { return &s }

func int64Arr(vals ...int64) arrow.Array {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(vals, nil)
	return b.NewArray()
}
