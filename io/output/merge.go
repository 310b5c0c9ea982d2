package output

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/record"
)

// Errors of Merge.
var (
	// ErrMissingShards: some shards have no manifest (not done yet, or
	// failed): running them again may help.
	ErrMissingShards = errors.New("shards missing")
	// ErrForeignShard: the parts are not of one job (other settings, model,
	// inputs or shard count), or do not cover the inputs exactly.
	ErrForeignShard = errors.New("parts of different jobs")
	// ErrManifestMismatch: a manifest's counts disagree with each other or
	// with its part or errors file.
	ErrManifestMismatch = errors.New("a manifest disagrees with its part")
)

// MergeOptions configure Merge.
type MergeOptions struct {
	// Base is the output the shards were run with (OUT.EXT; the parts are
	// OUT.shard-I-of-N.EXT). Parts, if set, names the part files instead.
	Base  string
	Parts []string
	// Out is the merged output (default Base; its extension picks the
	// format); Errors the merged errors file (default Out.errors.jsonl).
	Out, Errors string
	Allocator   memory.Allocator
	// Context bounds the reads and uploads of files in a bucket; default
	// context.Background().
	Context context.Context
}

// MergeSummary is what Merge wrote.
type MergeSummary struct {
	Shards       int
	Rows         ManifestRows
	OutputRows   int64
	ErrorRecords int64
	Out, Errors  string
}

// Merge checks the manifests of a sharded run and writes one output and
// one errors file in the inputs' order, streaming the parts (memory bound
// by one record batch and IDSetBytes per distinct id): an id in two parts
// is refused before anything is published (ErrIDInTwoShards; the rule:
// mergeids.go). The output's rows are those of a single run, and
// its errors file is the single run's too, record indexes and JSONL lines
// made global.
func Merge(o MergeOptions) (MergeSummary, error) {
	if o.Context == nil {
		o.Context = context.Background()
	}
	ms, paths, err := findManifests(o)
	if err != nil {
		return MergeSummary{}, err
	}
	if err := checkManifests(ms, paths); err != nil {
		return MergeSummary{}, err
	}
	if err := checkParts(o.Context, ms, paths); err != nil {
		return MergeSummary{}, err
	}
	if err := checkCounts(o.Context, ms, paths); err != nil {
		return MergeSummary{}, err
	}
	if o.Out == "" {
		o.Out = o.Base
		if o.Out == "" {
			o.Out = unshardedName(paths[0])
		}
	}
	if o.Errors == "" {
		o.Errors = o.Out + ".errors.jsonl"
	}
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if err := files.CheckPaths(mergePaths(ms, paths, o)); err != nil {
		return MergeSummary{}, err
	}
	for _, final := range []string{o.Out, o.Errors} {
		if objstore.IsURL(final) {
			continue
		}
		if _, err := files.RemoveStaleTemps(final); err != nil {
			return MergeSummary{}, err
		}
	}
	sum := MergeSummary{Shards: len(ms), Rows: SumRows(ms), Out: o.Out, Errors: o.Errors}
	ids := newPartIDs(paths)
	for k, m := range ms {
		if err := ids.claimErrors(o.Context, objstore.Beside(paths[k], m.Errors), k); err != nil {
			return sum, fmt.Errorf("merge: %w", err)
		}
	}
	if sum.OutputRows, err = mergeRows(ms, paths, o, ids); err != nil {
		return sum, err
	}
	if sum.ErrorRecords, err = mergeErrors(ms, paths, o); err != nil {
		files.Remove(o.Context, o.Out)
		return sum, err
	}
	return sum, nil
}

// mergePaths are the files a merge reads (every part, its errors file and
// manifest) and writes, for CheckPaths.
func mergePaths(ms []Manifest, paths []string, o MergeOptions) []files.PathUse {
	var u []files.PathUse
	for k, m := range ms {
		u = append(u, files.Reads("part", objstore.Beside(paths[k], m.Output), objstore.Beside(paths[k], m.Errors), paths[k])...)
	}
	return append(u, append(files.Writes("-o", o.Out), files.Writes("--errors", o.Errors)...)...)
}

var shardName = regexp.MustCompile(`\.shard-(\d+)-of-(\d+)\.json$`)

// findManifests returns the manifests in shard order, with their paths.
func findManifests(o MergeOptions) ([]Manifest, []string, error) {
	var paths []string
	if len(o.Parts) > 0 {
		for _, p := range o.Parts {
			paths = append(paths, ManifestPath(p))
		}
	} else {
		ext := filepath.Ext(o.Base)
		glob := strings.TrimSuffix(o.Base, ext) + ".shard-*-of-*.json"
		found, err := files.Glob(o.Context, glob)
		if err != nil {
			return nil, nil, fmt.Errorf("merge: %w", err)
		}
		if len(found) == 0 {
			return nil, nil, fmt.Errorf("%w: no manifest matches %s (no shard of %s has finished)", ErrMissingShards, glob, o.Base)
		}
		paths = found
	}
	counts := map[int]bool{}
	byShard := map[int]string{}
	for _, p := range paths {
		m := shardName.FindStringSubmatch(p)
		if m == nil {
			return nil, nil, fmt.Errorf("%w: %s is not a shard's manifest (OUT.shard-I-of-N.json)", ErrForeignShard, p)
		}
		i, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		counts[n] = true
		byShard[i] = p
	}
	if len(counts) > 1 {
		return nil, nil, fmt.Errorf("%w: parts of runs with different shard counts (%v)", ErrForeignShard, sortedKeys(counts))
	}
	n := sortedKeys(counts)[0]
	var missing []string
	var ms []Manifest
	var ordered []string
	for i := range n {
		p, ok := byShard[i]
		if !ok {
			missing = append(missing, strconv.Itoa(i))
			continue
		}
		m, err := readManifest(o.Context, p)
		if err != nil {
			return nil, nil, err
		}
		ms, ordered = append(ms, m), append(ordered, p)
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("%w: shard %s of %d not done (no manifest): run it again, then merge", ErrMissingShards, strings.Join(missing, ", "), n)
	}
	return ms, ordered, nil
}

func sortedKeys(m map[int]bool) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

// unshardedName is a part's name without its .shard-I-of-N.
func unshardedName(manifest string) string {
	return regexp.MustCompile(`\.shard-\d+-of-\d+\.json$`).ReplaceAllString(manifest, "")
}

// checkManifests refuses parts of different jobs, and inputs not covered
// exactly once.
func checkManifests(ms []Manifest, paths []string) error {
	first := ms[0]
	for k, m := range ms {
		switch {
		case m.Shard != k || m.Shards != len(ms):
			return fmt.Errorf("%w: %s says shard %d of %d", ErrForeignShard, paths[k], m.Shard, m.Shards)
		case m.Command != first.Command, m.ModelDigest != first.ModelDigest, m.SettingsDigest != first.SettingsDigest:
			return fmt.Errorf("%w: shard %d (%s) was run with another command, model or settings than shard 0", ErrForeignShard, k, paths[k])
		case len(m.Inputs) != len(first.Inputs):
			return fmt.Errorf("%w: shard %d has %d inputs; shard 0 %d", ErrForeignShard, k, len(m.Inputs), len(first.Inputs))
		}
		for f, in := range m.Inputs {
			if in.File != first.Inputs[f].File || in.Size != first.Inputs[f].Size {
				return fmt.Errorf("%w: shard %d read %s of %d bytes; shard 0 %s of %d", ErrForeignShard, k, in.File, in.Size,
					first.Inputs[f].File, first.Inputs[f].Size)
			}
			if err := sameVersion(in, first.Inputs[f], paths[k], paths[0]); err != nil {
				return err
			}
		}
	}
	for f := range first.Inputs {
		if err := checkCoverage(ms, f); err != nil {
			return err
		}
	}
	return nil
}

// sameVersion refuses two shards' records of one input that name
// different versions of it (rewritten between the shards), or none.
func sameVersion(in, first ManifestInput, path, firstPath string) error {
	switch {
	case first.Version == nil:
		return fmt.Errorf("%w: %s: no version of input %s (written by an older synapse): run the shard again", ErrManifestMismatch, firstPath, first.File)
	case in.Version == nil:
		return fmt.Errorf("%w: %s: no version of input %s (written by an older synapse): run the shard again", ErrManifestMismatch, path, in.File)
	case *in.Version != *first.Version:
		return fmt.Errorf("%w: input %s changed between shards: %s read %s; %s read %s", ErrForeignShard, in.File,
			firstPath, first.Version, path, in.Version)
	}
	return nil
}

// checkCounts refuses a manifest whose counts disagree with each other or
// with its errors file (the part's rows are counted as they are merged):
// records read are those done plus those in errors, and those of its
// inputs' parts; each record in errors and each failed file has a line.
func checkCounts(ctx context.Context, ms []Manifest, paths []string) error {
	for k, m := range ms {
		r := m.Rows
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s: %s", ErrManifestMismatch, paths[k], fmt.Sprintf(format, args...))
		}
		var inputs int64
		for _, in := range m.Inputs {
			inputs += in.Records
		}
		switch {
		case m.OutputRows == nil:
			return bad("no output_rows (written by an older synapse): run the shard again")
		case r.Read != r.OK+r.Failed:
			return bad("rows read %d is not done %d + in errors %d", r.Read, r.OK, r.Failed)
		case r.Partial > r.Failed:
			return bad("%d records in errors in part, of %d in errors", r.Partial, r.Failed)
		case m.IndexNumbering == "shard" && inputs != r.Read:
			return bad("its inputs hold %d records; it read %d", inputs, r.Read)
		case m.ErrorRecords < r.Failed+r.FileErrors:
			return bad("%d error records for %d records in errors and %d failed files", m.ErrorRecords, r.Failed, r.FileErrors)
		}
		errPath := objstore.Beside(paths[k], m.Errors)
		n, err := countLines(ctx, errPath)
		if err != nil {
			return fmt.Errorf("merge %s: %w", errPath, err)
		}
		if n != m.ErrorRecords {
			return bad("%d error records; %s has %d", m.ErrorRecords, errPath, n)
		}
	}
	return nil
}

// countLines counts the lines of a file.
func countLines(ctx context.Context, path string) (int64, error) {
	f, _, err := files.OpenRandom(ctx, path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	buf := make([]byte, 1<<20)
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		k, err := r.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// checkCoverage checks that the shards' parts of input f follow each other
// without gap or overlap and cover it.
func checkCoverage(ms []Manifest, f int) error {
	if ms[0].IndexNumbering == "global" {
		return nil // a run file: every shard reads it whole and takes its groups
	}
	var next int64 // JSONL byte or Parquet row group expected next
	taken := 0
	for k, m := range ms {
		p := m.Inputs[f].Part
		if p.Skip {
			continue
		}
		taken++
		switch p.Kind {
		case corpus.KindJSONL:
			if p.Start != next {
				return fmt.Errorf("%w: shard %d reads %s from byte %d; the shards before end at %d", ErrForeignShard, k, p.File, p.Start, next)
			}
			next = p.End
		case corpus.KindParquet:
			if p.RowGroup1 < 0 {
				next = -1
				continue
			}
			if int64(p.RowGroup0) != next {
				return fmt.Errorf("%w: shard %d reads %s from row group %d; the shards before end at %d", ErrForeignShard, k, p.File, p.RowGroup0, next)
			}
			next = int64(p.RowGroup1)
		}
	}
	in := ms[0].Inputs[f]
	switch {
	case in.Kind == corpus.KindJSONL && next != in.Size && in.Size > 0:
		return fmt.Errorf("%w: the shards read %s up to byte %d of %d", ErrForeignShard, in.File, next, in.Size)
	case (in.Kind == corpus.KindGzip || in.Kind == corpus.KindCSV || in.Kind == corpus.KindArrow) && taken != 1:
		return fmt.Errorf("%w: %d shards read the compressed %s; want 1", ErrForeignShard, taken, in.File)
	}
	return nil
}

// mergeRows streams the parts' record batches into the merged output, its
// schema the parts' with the shard made 0/1 (a single run's).
func mergeRows(ms []Manifest, paths []string, o MergeOptions, ids *partIDs) (int64, error) {
	format, err := FormatOf(o.Out)
	if err != nil {
		return 0, err
	}
	var sink *finalSink
	var dst *files.Sink
	var sc *arrow.Schema
	var rows int64
	for k, m := range ms {
		part := objstore.Beside(paths[k], m.Output)
		before := rows
		last := ""
		err := EachBatch(o.Context, part, o.Allocator, func(rec arrow.RecordBatch) error {
			if sink == nil {
				sc = unsharded(rec.Schema())
				if err := checkFormat(format, sc); err != nil {
					return err
				}
				if dst, err = files.CreateSink(o.Context, o.Out); err != nil {
					return err
				}
				if sink, err = newFinalSink(dst, format, sc, o.Allocator); err != nil {
					return err
				}
			}
			if err := ids.claimRows(rec, k, &last); err != nil {
				return err
			}
			out := array.NewRecordBatch(sc, rec.Columns(), rec.NumRows())
			defer out.Release()
			rows += rec.NumRows()
			return sink.write(out)
		})
		if err == nil && rows-before != *m.OutputRows {
			err = fmt.Errorf("%w: %s says its part has %d rows; it has %d", ErrManifestMismatch, paths[k], *m.OutputRows, rows-before)
		}
		if err != nil {
			if sink != nil {
				sink.abort()
			}
			return 0, fmt.Errorf("merge %s: %w", part, err)
		}
	}
	if sink == nil {
		return 0, fmt.Errorf("merge: the parts hold no schema")
	}
	if err := sink.finish(); err != nil {
		return 0, err
	}
	return rows, dst.Publish()
}

// unsharded is a part's schema as a single run's: metadata synapse.shard 0/1.
func unsharded(sc *arrow.Schema) *arrow.Schema {
	md := sc.Metadata()
	keys, vals := slices.Clone(md.Keys()), slices.Clone(md.Values())
	for i, k := range keys {
		if k == MetaShard {
			vals[i] = "0/1"
		}
	}
	m := arrow.NewMetadata(keys, vals)
	return arrow.NewSchema(sc.Fields(), &m)
}

// EachBatch calls fn with every record batch of an Arrow IPC or Parquet
// file or object, one at a time (mem nil: the default allocator). The batch
// is valid during the call only.
func EachBatch(ctx context.Context, path string, mem memory.Allocator, fn func(arrow.RecordBatch) error) error {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	f, _, err := files.OpenRandom(ctx, path)
	if err != nil {
		return err
	}
	defer f.Close()
	if corpus.IsParquet(f) {
		pf, err := file.NewParquetReader(f)
		if err != nil {
			return err
		}
		defer pf.Close()
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 14}, mem)
		if err != nil {
			return err
		}
		rr, err := fr.GetRecordReader(ctx, nil, nil)
		if err != nil {
			return err
		}
		defer rr.Release()
		for rr.Next() {
			if err := fn(rr.RecordBatch()); err != nil {
				return err
			}
		}
		return rr.Err()
	}
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
	if err != nil {
		return err
	}
	defer r.Close()
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatch(i)
		if err != nil {
			return err
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	return nil
}

// mergeErrors writes the parts' errors files one after the other, their
// indexes and JSONL lines made the single run's.
func mergeErrors(ms []Manifest, paths []string, o MergeOptions) (int64, error) {
	out, err := files.CreateSink(o.Context, o.Errors)
	if err != nil {
		return 0, fmt.Errorf("merge: %w", err)
	}
	w := bufio.NewWriterSize(out, 1<<20)
	var records, indexBase int64
	lineBase := map[string]int{}
	for k, m := range ms {
		errPath := objstore.Beside(paths[k], m.Errors)
		shift := m.IndexNumbering != "global"
		n, err := copyErrors(o.Context, w, errPath, func(index int64, source string, line int) (int64, int) {
			if !shift {
				return index, line
			}
			if line > 0 {
				line += lineBase[source]
			}
			return index + indexBase, line
		})
		records += n
		if err != nil {
			out.Discard()
			return records, fmt.Errorf("merge %s: %w", errPath, err)
		}
		for _, in := range m.Inputs {
			indexBase += in.Records
			lineBase[in.File] += int(in.Lines)
		}
	}
	err = w.Flush()
	if err == nil {
		err = out.Finish()
	}
	if err != nil {
		out.Discard()
		return records, fmt.Errorf("merge: %w", err)
	}
	return records, out.Publish()
}

// copyErrors copies an errors file's records through fix, which gives each
// record its index and line.
func copyErrors(ctx context.Context, w *bufio.Writer, path string, fix func(index int64, source string, line int) (int64, int)) (int64, error) {
	f, _, err := files.OpenRandom(ctx, path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(bufio.NewReaderSize(f, 1<<20))
	sc.Buffer(nil, 64<<20)
	var n int64
	for sc.Scan() {
		var probe struct {
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(sc.Bytes(), &probe); err != nil {
			return n, fmt.Errorf("record %d: %w", n+1, err)
		}
		var rec any
		if probe.Reason == record.ReasonFileError {
			var fe fileErrorJSON
			json.Unmarshal(sc.Bytes(), &fe)
			fe.Index, fe.Line = fix(fe.Index, fe.Source, fe.Line)
			rec = fe
		} else {
			var re rowErrorJSON
			json.Unmarshal(sc.Bytes(), &re)
			line := 0
			if re.Line != nil {
				line = *re.Line
			}
			re.Index, line = fix(re.Index, re.Source, line)
			if re.Line != nil {
				re.Line = &line
			}
			rec = re
		}
		b, _ := json.Marshal(rec)
		w.Write(append(b, '\n'))
		n++
	}
	return n, sc.Err()
}

// FileSchema is the schema (with its metadata) of an Arrow IPC or Parquet
// file or object, read from its footer.
func FileSchema(ctx context.Context, path string) (*arrow.Schema, error) {
	f, _, err := files.OpenRandom(ctx, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if corpus.IsParquet(f) {
		pf, err := file.NewParquetReader(f)
		if err != nil {
			return nil, err
		}
		defer pf.Close()
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			return nil, err
		}
		return fr.Schema()
	}
	r, err := ipc.NewFileReader(f)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Schema(), nil
}
