// Package previous reads the output of an earlier `synapse embed` run, one
// file or the part files of a sharded run, so that an incremental run can
// copy the chunks of the documents that did not change instead of
// embedding them again, without loading that output into memory.
//
// # Access
//
// The files are taken as one sequence of record batches (Arrow IPC record
// batches, or Parquet row groups), in the order given, and of rows (a
// document's chunks are consecutive rows). An Arrow IPC file is memory
// mapped and read without copies; the pages it touched are handed back to
// the kernel after every [TouchBudget] bytes read, so that the module's
// resident memory stays flat whatever the file's size. A Parquet file is
// decoded one row group at a time. At most [CacheBatches] decoded Parquet
// row groups are held at once, or [CacheMapped] Arrow batches (their arrays
// only: the data stays in the mapping).
//
// # Lookup
//
// [Set.Find] is called once per input document, in input order. The input
// is usually in the previous run's order: a cursor walks the previous rows
// along the input (a streaming merge-join), and a document found at the
// cursor costs no search. The first document not at the cursor (an added,
// deleted or moved document, or a shard that starts in the middle) builds
// the index once: an entry of [EntrySize] bytes per previous document (a
// 128-bit hash of its id, its doc_hash, first row and row count), sorted
// on disk in runs of [SortRun] entries and merged into a temporary file;
// the first key of each [IndexBlock] entries stays in memory, and a lookup
// reads one block of the file. The cursor moves to every document found
// through the index, so that a run that goes on in the
// previous order streams again.
//
// A bit per previous row marks the documents found; [Set.Deleted] lists
// the others.
package previous

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/vector"
)

// Bounds of the module's memory while it reads a previous output.
const (
	CacheBatches = 8        // decoded Parquet row groups held
	CacheMapped  = 1024     // Arrow record batches held (a few KiB each: their data is mapped)
	TouchBudget  = 32 << 20 // bytes read from mapped files between returns of their pages
	SortRun      = 1 << 18  // index entries sorted in memory at a time (16 MiB)
)

// ErrInvalid: a previous output that cannot be used (truncated, corrupt,
// not an embedding output, files that do not go together).
var ErrInvalid = errors.New("previous: unusable previous output")

// Set is the previous output: one or more files read as one sequence.
type Set struct {
	files   []*batchFile
	batches []batchRef // every batch of every file, in order
	starts  []int64    // first global row of each batch, and the total last
	meta    arrow.Metadata
	dims    int
	dtype   vector.Dtype
	cache   *cache
	tmpDir  string

	sortRun int      // SortRun; smaller in tests
	found   []uint64 // a bit per row: the document starting there was found
	cursor  int64    // global row of the next document in the previous order
	index   *index
	Stats   Stats
	touched int64
}

// Stats says what the lookups cost.
type Stats struct {
	Cursor, Indexed int64 // documents found at the cursor, through the index
	IndexBuilt      bool
}

type batchRef struct {
	file, batch int
}

// column positions in an embedding output
type columns struct {
	id, chunk, tokenStart, tokenEnd, byteStart, byteEnd, nTokens, emb, hash int
	// sparseIx and sparseVal are a sparse output's vector columns
	// (output.SparseSchema; emb is then -1), else -1.
	sparseIx, sparseVal int
	// tokens is a multi-vector output's token_vectors column
	// (output.TokensSchema; emb is then -1), else -1.
	tokens int
}

// batchFile is one previous file.
type batchFile struct {
	path string
	ipc  *ipc.FileReader
	mm   *mapping
	pq   *pqarrow.FileReader
	pqf  parquetFile
	n    int // batches
	cols columns
	// the embedding column's dtype and dims
	dtype vector.Dtype
	dims  int
}

// Open opens and checks the previous files: each must be a complete Arrow
// IPC or Parquet embedding output with a doc_hash column, of the same
// width and metadata settings as the first. An Arrow IPC file's record
// batches are all read (through the mapping: their metadata and offsets,
// not their vectors), so that a truncated or corrupt file is refused here,
// before the run starts. tmpDir holds the index, if one is needed.
func Open(paths []string, tmpDir string) (*Set, error) {
	s := &Set{tmpDir: tmpDir, starts: []int64{0}, sortRun: SortRun}
	for _, p := range paths {
		if err := s.add(p); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.releaseAll() // the checks read every batch through the mappings
	rows := s.starts[len(s.starts)-1]
	s.found = make([]uint64, (rows+63)/64)
	n := CacheBatches
	if s.allMapped() {
		n = CacheMapped
	}
	s.cache = newCache(s, n)
	return s, nil
}

func (s *Set) allMapped() bool {
	for _, f := range s.files {
		if f.mm == nil {
			return false
		}
	}
	return true
}

// Schema is the first file's schema.
func (s *Set) Schema() *arrow.Schema { return s.files[0].schema() }

// Metadata is the first file's schema metadata.
func (s *Set) Metadata() arrow.Metadata { return s.meta }

// Dims is the width of the embeddings.
func (s *Set) Dims() int { return s.dims }

// Dtype is the embeddings' dtype.
func (s *Set) Dtype() vector.Dtype { return s.dtype }

// Rows is the number of rows of all the files.
func (s *Set) Rows() int64 { return s.starts[len(s.starts)-1] }

// safely runs fn, turning a panic of the Arrow or Parquet decoders on a
// corrupt file (they trust the flatbuffers they read) into an error.
func safely(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("corrupt: %v", p)
		}
	}()
	return fn()
}

func (s *Set) add(path string) error {
	var f *batchFile
	err := safely(func() (err error) { f, err = openFile(path, s.tmpDir); return err })
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalid, path, err)
	}
	sc := f.schema()
	dims, dtype, cols, err := checkSchema(sc)
	if err == nil && len(s.files) > 0 {
		switch {
		case dtype != s.dtype:
			err = fmt.Errorf("%s embeddings; %s has %s", dtype, s.files[0].path, s.dtype)
		case dims != s.dims:
			err = fmt.Errorf("embeddings of %d dims; %s has %d", dims, s.files[0].path, s.dims)
		case !sameMeta(sc.Metadata(), s.meta):
			err = fmt.Errorf("its metadata differs from %s's (another model or settings)", s.files[0].path)
		}
	}
	if err == nil {
		f.cols, f.dtype, f.dims = cols, dtype, dims
		err = safely(func() error { return s.addBatches(f, len(s.files)) })
	}
	if err != nil {
		f.close()
		return fmt.Errorf("%w: %s: %w", ErrInvalid, path, err)
	}
	if len(s.files) == 0 {
		s.meta, s.dims, s.dtype = sc.Metadata(), dims, dtype
	}
	s.files = append(s.files, f)
	return nil
}

// addBatches counts f's rows batch by batch; an IPC batch is decoded and
// checked.
func (s *Set) addBatches(f *batchFile, k int) error {
	for b := range f.n {
		var rows int64
		if f.pq != nil {
			rows = f.pq.ParquetReader().MetaData().RowGroup(b).NumRows()
		} else {
			if b%16 == 15 {
				f.mm.release() // decoding a batch reads all of it
			}
			rec, err := f.batch(b)
			if err != nil {
				return err
			}
			err = f.check(rec)
			rows = rec.NumRows()
			rec.Release()
			if err != nil {
				return fmt.Errorf("record batch %d: %w", b, err)
			}
		}
		s.batches = append(s.batches, batchRef{k, b})
		s.starts = append(s.starts, s.starts[len(s.starts)-1]+rows)
	}
	return nil
}

// Close releases the files and removes the index.
func (s *Set) Close() {
	if s.cache != nil {
		s.cache.clear()
	}
	for _, f := range s.files {
		f.close()
	}
	if s.index != nil {
		s.index.close()
	}
}

// openFile opens a previous output. One in a bucket is read as a local
// one is, but for the way there: an Arrow file is spooled to tmpDir and
// mapped (its batches are read at random, many times: the mapping needs a
// local file; the spool is unlinked once mapped), a Parquet file is read
// by ranged GETs (footer, then the row groups looked up).
func openFile(path, tmpDir string) (*batchFile, error) {
	format, err := output.FormatOf(path)
	if err != nil {
		return nil, err
	}
	bf := &batchFile{path: path}
	switch format {
	case output.FormatArrow:
		local := path
		if objstore.IsURL(path) {
			if local, err = spool(path, tmpDir); err != nil {
				return nil, err
			}
			defer os.Remove(local)
		}
		if bf.mm, err = mapFile(local); err != nil {
			return nil, err
		}
		if bf.ipc, err = ipc.NewMappedFileReader(bf.mm.data); err != nil {
			bf.mm.close()
			return nil, err
		}
		bf.n = bf.ipc.NumRecords()
	case output.FormatParquet:
		if objstore.IsURL(path) {
			bf.pqf, err = objstore.Open(context.Background(), path)
		} else {
			bf.pqf, err = os.Open(path)
		}
		if err != nil {
			return nil, err
		}
		pf, err := file.NewParquetReader(bf.pqf)
		if err != nil {
			bf.pqf.Close()
			return nil, err
		}
		if bf.pq, err = pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator); err != nil {
			pf.Close()
			return nil, err
		}
		bf.n = pf.NumRowGroups()
	default:
		return nil, fmt.Errorf("a previous output is .arrow or .parquet, not .%s", format)
	}
	return bf, nil
}

// parquetFile is a Parquet previous output: a local file or an object.
type parquetFile interface {
	io.ReaderAt
	io.Seeker
	io.Closer
}

// spool copies the object at url into a new private file in dir.
func spool(url, dir string) (string, error) {
	in, err := objstore.Open(context.Background(), url)
	if err != nil {
		return "", err
	}
	defer in.Close()
	f, err := os.CreateTemp(dir, "synapse-previous-spool-*.arrow")
	if err != nil {
		return "", fmt.Errorf("spool %s: %w", url, err)
	}
	_, err = io.Copy(f, in)
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("spool %s: %w", url, err)
	}
	return f.Name(), nil
}

func (f *batchFile) schema() *arrow.Schema {
	if f.ipc != nil {
		return f.ipc.Schema()
	}
	sc, err := f.pq.Schema()
	if err != nil {
		return arrow.NewSchema(nil, nil)
	}
	return sc
}

// batch decodes batch b of the file.
func (f *batchFile) batch(b int) (rec arrow.RecordBatch, err error) {
	err = safely(func() error { rec, err = f.decode(b); return err })
	return rec, err
}

func (f *batchFile) decode(b int) (arrow.RecordBatch, error) {
	if f.ipc != nil {
		return f.ipc.RecordBatchAt(b)
	}
	tbl, err := f.pq.ReadRowGroups(context.Background(), f.leaves(), []int{b})
	if err != nil {
		return nil, fmt.Errorf("row group %d: %w", b, err)
	}
	defer tbl.Release()
	cols := make([]arrow.Array, tbl.NumCols())
	for i := range cols {
		chunks := tbl.Column(i).Data().Chunks()
		if len(chunks) == 1 {
			chunks[0].Retain()
			cols[i] = chunks[0]
		} else if cols[i], err = array.Concatenate(chunks, memory.DefaultAllocator); err != nil {
			return nil, fmt.Errorf("row group %d: %w", b, err)
		}
	}
	rec := array.NewRecordBatch(tbl.Schema(), cols, tbl.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}

// leaves are the Parquet file's leaf columns: all of them.
func (f *batchFile) leaves() []int {
	n := f.pq.ParquetReader().MetaData().Schema.NumColumns()
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func (f *batchFile) close() {
	if f.ipc != nil {
		f.ipc.Close()
	}
	if f.mm != nil {
		f.mm.close()
	}
	if f.pq != nil {
		f.pq.ParquetReader().Close()
	}
	if f.pqf != nil {
		f.pqf.Close()
	}
}

// oldNames are the earlier names of columns that were renamed.
var oldNames = map[string]string{output.ColByteStart: output.ColCharStart, output.ColByteEnd: output.ColCharEnd}

// checkSchema finds an embedding output's columns, its width and dtype.
// It takes the schema of this version and those of earlier ones (with
// char_start, char_end for the byte offsets; without chunk_id, the code
// point offsets or text, which are not read: a copied row's come from the
// current document's text, identical since its doc_hash matched).
func checkSchema(sc *arrow.Schema) (int, vector.Dtype, columns, error) {
	md := sc.Metadata()
	dtype, err := vector.ParseDtype(metaValue(md, vector.MetaDtype))
	if err != nil {
		return 0, "", columns{}, err
	}
	var c columns
	pos := func(name string, want func(arrow.DataType) bool) int {
		idx := sc.FieldIndices(name)
		if len(idx) == 0 && oldNames[name] != "" { // an output of synapse before byte_start, byte_end
			idx = sc.FieldIndices(oldNames[name])
		}
		if len(idx) != 1 || !want(sc.Field(idx[0]).Type) {
			return -1
		}
		return idx[0]
	}
	isType := func(id arrow.Type) func(arrow.DataType) bool {
		return func(t arrow.DataType) bool { return t.ID() == id }
	}
	var dims int
	var missing []string
	c.sparseIx, c.sparseVal, c.tokens = -1, -1, -1
	if output.IsTokens(sc) { // a multi-vector output: its token vectors instead of the embedding
		dims, _ = strconv.Atoi(metaValue(md, "synapse.dims"))
		if c.tokens = tokensColumn(sc, dtype, dims); c.tokens < 0 {
			missing = append(missing, output.ColTokenVectors)
		}
	}
	if output.IsSparse(sc) { // a sparse output: its vectors' columns instead of the embedding
		dims, _ = strconv.Atoi(metaValue(md, "synapse.dims"))
		isList := func(elem arrow.DataType) func(arrow.DataType) bool {
			return func(t arrow.DataType) bool {
				l, ok := t.(*arrow.ListType)
				return ok && arrow.TypeEqual(l.Elem(), elem)
			}
		}
		if c.sparseIx = pos(output.ColSparseIndices, isList(arrow.PrimitiveTypes.Uint32)); c.sparseIx < 0 {
			missing = append(missing, output.ColSparseIndices)
		}
		if c.sparseVal = pos(output.ColSparseValues, isList(arrow.PrimitiveTypes.Float32)); c.sparseVal < 0 {
			missing = append(missing, output.ColSparseValues)
		}
	}
	for _, col := range []struct {
		name string
		at   *int
		want func(arrow.DataType) bool
	}{
		{output.ColID, &c.id, isType(arrow.STRING)},
		{output.ColChunk, &c.chunk, isType(arrow.INT32)}, {output.ColTokenStart, &c.tokenStart, isType(arrow.INT32)},
		{output.ColTokenEnd, &c.tokenEnd, isType(arrow.INT32)}, {output.ColByteStart, &c.byteStart, isType(arrow.INT32)},
		{output.ColByteEnd, &c.byteEnd, isType(arrow.INT32)}, {output.ColNTokens, &c.nTokens, isType(arrow.INT32)},
		{output.ColEmbedding, &c.emb, func(t arrow.DataType) bool {
			if c.sparseIx >= 0 || c.sparseVal >= 0 || output.IsTokens(sc) {
				return false // not read: checked below
			}
			if l, ok := t.(*arrow.FixedSizeListType); ok {
				dims = int(l.Len())
			} else {
				dims, _ = strconv.Atoi(metaValue(md, "synapse.dims")) // binary: the bits do not say
			}
			return vector.CheckType(t, dtype, dims) == nil
		}},
		{output.ColDocHash, &c.hash, func(t arrow.DataType) bool {
			b, ok := t.(*arrow.FixedSizeBinaryType)
			return ok && b.ByteWidth == output.DocHashSize
		}},
	} {
		if *col.at = pos(col.name, col.want); *col.at < 0 && (col.at != &c.emb || c.sparseIx < 0 && c.sparseVal < 0 && !output.IsTokens(sc)) {
			missing = append(missing, col.name)
		}
	}
	if len(missing) > 0 {
		return 0, "", c, fmt.Errorf("not an embedding output with doc hashes: no usable column %s (outputs of synapse before doc hashes: run once in full)", strings.Join(missing, ", "))
	}
	return dims, dtype, c, nil
}

func metaValue(md arrow.Metadata, key string) string {
	v, _ := md.GetValue(key)
	return v
}

// check verifies that a decoded batch's columns can be read: lengths,
// string offsets within their data, and buffers as long as their rows.
func (f *batchFile) check(rec arrow.RecordBatch) error {
	return safely(func() error { return f.checkColumns(rec) })
}

func (f *batchFile) checkColumns(rec arrow.RecordBatch) error {
	n := int(rec.NumRows())
	for i, col := range rec.Columns() {
		if col.Len() != n {
			return fmt.Errorf("column %d has %d values for %d rows", i, col.Len(), n)
		}
	}
	ids := rec.Column(f.cols.id).(*array.String)
	offs := ids.ValueOffsets()
	if len(offs) < n+1 {
		return fmt.Errorf("id column: %d offsets for %d rows", len(offs), n)
	}
	data := len(ids.ValueBytes())
	for i := range n {
		if offs[i] > offs[i+1] || int(offs[i+1]-offs[0]) > data {
			return fmt.Errorf("id column: offsets out of range at row %d", i)
		}
	}
	if f.cols.tokens >= 0 {
		if _, err := tokenColumns(rec, f.cols.tokens, f.dtype, f.dims); err != nil {
			return err
		}
	} else if f.cols.emb < 0 {
		if _, err := sparseColumns(rec, f.cols); err != nil {
			return err
		}
	} else if _, err := vector.ColumnOf(rec.Column(f.cols.emb), f.dtype, f.dims); err != nil {
		return err
	}
	if h := rec.Column(f.cols.hash).(*array.FixedSizeBinary); n > 0 && len(h.Value(n-1)) != output.DocHashSize {
		return errors.New("doc_hash column is short")
	}
	return nil
}

func sameMeta(a, b arrow.Metadata) bool {
	for _, k := range []string{"synapse.settings_digest", "synapse.settings"} {
		x, _ := a.GetValue(k)
		y, _ := b.GetValue(k)
		if x != y {
			return false
		}
	}
	return true
}
