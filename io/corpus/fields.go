package corpus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/objstore"
)

// FieldSampleRows is how many records of a JSON Lines input CheckFields
// looks at: when none of these objects has a field the run needs, the
// field name is wrong for the file rather than missing from some rows.
const FieldSampleRows = 100

// FieldError says that an input lacks a field the run reads from every
// row: a column of a Parquet, CSV or TSV file, or a key of all the first
// FieldSampleRows objects of a JSON Lines file.
type FieldError struct {
	File   string
	Field  string
	Option string   // the option that named it, e.g. "text-field" (Need.Option)
	Have   []string // the file's columns, or the keys its sampled objects have
	// Sampled is the JSON objects looked at (0 for a file with a schema).
	Sampled int
}

func (e *FieldError) Error() string {
	have := strings.Join(shortList(e.Have, 30), ", ")
	if have == "" {
		have = "none"
	}
	if e.Sampled == 0 {
		return fmt.Sprintf("%s has no column %q; its columns are %s", e.File, e.Field, have)
	}
	rows := fmt.Sprintf("its first %d rows", e.Sampled)
	if e.Sampled == 1 {
		rows = "its first row"
	}
	return fmt.Sprintf("%s has no field %q in %s; they have %s", e.File, e.Field, rows, have)
}

// shortList is names, the rest counted when there are more than n.
func shortList(names []string, n int) []string {
	if len(names) <= n {
		return names
	}
	return append(slices.Clone(names[:n]), fmt.Sprintf("and %d more", len(names)-n))
}

// Need is a field every row of an input must have, and the option (a flag
// name, for the message) that names it.
type Need struct{ Field, Option string }

// DocNeeds are the fields a document reader with opts reads from every
// row: the TextFields (default "text") and an explicit IDField.
func DocNeeds(opts ReadOptions) []Need {
	fields := opts.TextFields
	if len(fields) == 0 {
		fields = []string{"text"}
	}
	var need []Need
	for _, f := range fields {
		need = append(need, Need{f, "text-field"})
	}
	if opts.IDField != "" {
		need = append(need, Need{opts.IDField, "id-field"})
	}
	return need
}

// Needs are the fields every rerank row has, grouped or flat: the query id
// and the query text.
func (o QueryOptions) Needs() []Need {
	o.fill()
	return []Need{{o.QueryIDField, "query-id-field"}, {o.QueryField, "query-field"}}
}

// CheckFields looks, before any work, at the fields need of each input and
// returns a *FieldError for the first input that lacks one: by its schema
// (a Parquet footer, a CSV or TSV header) or, for JSON Lines, when none of
// the objects among its first FieldSampleRows records has it. Stdin and
// pipes are not looked at (they can be read once), nor a file that cannot
// be opened or parsed (its reader reports it, row by row or as a
// FileError); an unknown extension is InputFormat's error.
func CheckFields(ctx context.Context, inputs []string, need []Need) error {
	var opts ReadOptions
	if err := opts.fill(); err != nil {
		return err
	}
	opts.Context = ctx
	for _, name := range inputs {
		format, err := InputFormat(name)
		if err != nil {
			return err
		}
		if name == "-" || !regular(name) {
			continue
		}
		have, sampled, err := fieldsOf(ctx, name, format, opts)
		if err != nil || have == nil {
			continue // the reader reports it
		}
		for _, n := range need {
			if !slices.Contains(have, n.Field) {
				return &FieldError{File: name, Field: n.Field, Option: n.Option, Have: have, Sampled: sampled}
			}
		}
	}
	return nil
}

// regular reports whether name is an object or a regular local file.
func regular(name string) bool {
	if objstore.IsURL(name) {
		return true
	}
	st, err := os.Stat(name)
	return err == nil && st.Mode().IsRegular()
}

// fieldsOf returns the columns of a Parquet, CSV or TSV file, or the keys
// of the objects among a JSON Lines file's first FieldSampleRows records
// and how many objects there were (nil when there were none).
func fieldsOf(ctx context.Context, name string, format Format, opts ReadOptions) (have []string, sampled int, err error) {
	if format == FormatCSV || format == FormatTSV {
		return csvHeader(ctx, name, format == FormatTSV)
	}
	f, _, err := files.OpenRandom(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if format == FormatArrow {
		have, err := arrowColumns(f)
		return have, 0, err
	}
	if hasParquetMagic(f) {
		have, err := parquetColumns(f)
		return have, 0, err
	}
	return jsonlKeys(ctx, name, opts)
}

// parquetColumns are the top-level columns of a Parquet file's schema.
func parquetColumns(f files.Input) (cols []string, err error) {
	defer func() {
		if p := recover(); p != nil {
			cols, err = nil, fmt.Errorf("parquet: reading footer: panic: %v", p)
		}
	}()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	sc, err := pqarrow.FromParquet(pf.MetaData().Schema, nil, pf.MetaData().KeyValueMetadata())
	if err != nil {
		return nil, err
	}
	for _, fd := range sc.Fields() {
		cols = append(cols, fd.Name)
	}
	return cols, nil
}

// arrowColumns are the top-level columns of an Arrow IPC file's schema.
func arrowColumns(f files.Input) (cols []string, err error) {
	defer func() {
		if p := recover(); p != nil {
			cols, err = nil, fmt.Errorf("arrow: reading footer: panic: %v", p)
		}
	}()
	r, err := ipc.NewFileReader(f)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	for _, fd := range r.Schema().Fields() {
		cols = append(cols, fd.Name)
	}
	return cols, nil
}

// csvHeader is the header row of a CSV or TSV file.
func csvHeader(ctx context.Context, name string, tsv bool) ([]string, int, error) {
	rc, err := openStream(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	defer rc.Close()
	r, _, err := csvReader(rc, tsv, defaultMaxLine)
	if err != nil {
		return nil, 0, err
	}
	header, err := r.Read()
	if err != nil {
		return nil, 0, err // an empty file has no rows to miss a field
	}
	return header, 0, nil
}

// jsonlKeys are the keys of the JSON objects among the first
// FieldSampleRows records of a JSON Lines file, sorted, and their number.
func jsonlKeys(ctx context.Context, name string, opts ReadOptions) ([]string, int, error) {
	rc, err := openStream(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	opts.Raw, opts.StartIndex, opts.Shards, opts.Parts = []string{}, 0, 0, nil
	opts.Unembedded, opts.OnUnembedded = nil, nil
	src, err := newJSONL(name, rc, 0, &opts, -1, Part{RowGroup1: -1})
	if err != nil {
		return nil, 0, err
	}
	defer src.close()
	seen := map[string]bool{}
	objects := 0
	for range FieldSampleRows {
		d, err := src.next()
		if errors.Is(err, io.EOF) {
			break
		}
		var re *RowError
		if err != nil && !errors.As(err, &re) {
			return nil, 0, err
		}
		if err != nil {
			continue
		}
		objects++
		for k := range d.Fields {
			seen[k] = true
		}
	}
	if objects == 0 {
		return nil, 0, nil
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, objects, nil
}

// openStream opens a local file or an object for one sequential read.
func openStream(ctx context.Context, name string) (io.ReadCloser, error) {
	if objstore.IsURL(name) {
		return objstore.Open(ctx, name)
	}
	return os.Open(name)
}
