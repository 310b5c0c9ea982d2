package corpus

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/objstore"
)

// Range shards. A run over N shards gives each a contiguous, disjoint part
// of its inputs, which that shard reads alone. Inputs are cut into units at
// positions along their cumulative size: a plain JSON Lines file into
// blocks of BlockSize(size) bytes (a line belongs to the block it starts
// in), a Parquet file into its row groups, a gzip-compressed file (which
// cannot be split by bytes), a CSV or TSV file (whose quoted fields may
// hold newlines) and an Arrow IPC file into one unit. Unit u at position p goes to
// shard ⌊p·N / total⌋.
//
// Every run, sharded or not, starts a packing group at every unit, so that
// a shard's batches — and the engine's rounding — are those of a single
// run: the shards' outputs put together are the single run's rows. Record
// indexes and JSONL line numbers are counted from the shard's start; the
// shard's manifest records how many there were, and `synapse merge` makes
// them global in the merged errors file.

// ErrNotSplittable: an input a range shard cannot take its part of (stdin, a pipe).
var ErrNotSplittable = errors.New("a sharded run needs regular files")

// BlockSize is the JSON Lines block size of a file of size bytes: 1/1024 of
// it rounded up to a power of two, at least 64 KiB, so that any file splits
// into up to about a thousand parts.
func BlockSize(size int64) int64 {
	b := int64(64 << 10)
	for b*1024 < size {
		b *= 2
	}
	return b
}

// Part is what a shard reads of one input file.
type Part struct {
	File string `json:"file"`
	Kind string `json:"kind"`
	Size int64  `json:"size"`           // the file's size (what merge checks)
	Skip bool   `json:"skip,omitempty"` // nothing: the file belongs to other shards
	// Plain JSON Lines: the lines that start in [Start, End).
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Parquet: row groups [RowGroup0, RowGroup1); RowGroup1 -1: all.
	RowGroup0 int `json:"row_group0"`
	RowGroup1 int `json:"row_group1"`
}

// Kinds of input files.
const (
	KindJSONL   = "jsonl"
	KindGzip    = "jsonl.gz"
	KindParquet = "parquet"
	// KindCSV is a CSV or TSV file, compressed or not: one unit, since a
	// quoted field may hold a newline and a byte offset cannot tell
	// whether a line starts a row without reading all before it.
	KindCSV = "csv"
	// KindArrow is an Arrow IPC file: one unit.
	KindArrow = "arrow"
)

// unit is one piece of an input a shard can take whole.
type unit struct {
	file     int
	pos      int64 // position along the inputs' cumulative size
	kind     string
	start    int64 // JSONL: block start
	end      int64 // JSONL: block end
	rowGroup int
}

// PlanShard returns what shard i of n reads of files: one Part per file.
func PlanShard(files []string, i, n int) ([]Part, error) {
	units, parts, total, err := layout(files)
	if err != nil {
		return nil, err
	}
	for k := range parts {
		parts[k].Skip = true
	}
	for _, u := range units {
		if total == 0 || int(u.pos*int64(n)/total) != i {
			continue
		}
		p := &parts[u.file]
		switch u.kind {
		case KindJSONL:
			if p.Skip {
				p.Start = u.start
			}
			p.End = u.end
		case KindParquet:
			if u.rowGroup < 0 {
				p.RowGroup0, p.RowGroup1 = 0, -1 // whole
				break
			}
			if p.Skip {
				p.RowGroup0 = u.rowGroup
			}
			p.RowGroup1 = u.rowGroup + 1
		}
		p.Skip = false
	}
	return parts, nil
}

// layout cuts the files into units.
func layout(files []string) ([]unit, []Part, int64, error) {
	var units []unit
	parts := make([]Part, len(files))
	var base int64
	for i, name := range files {
		if name == "-" {
			return nil, nil, 0, fmt.Errorf("%w: standard input", ErrNotSplittable)
		}
		if !objstore.IsURL(name) {
			st, err := os.Stat(name)
			if err != nil {
				return nil, nil, 0, err
			}
			if !st.Mode().IsRegular() {
				return nil, nil, 0, fmt.Errorf("%w: %s is not a regular file", ErrNotSplittable, name)
			}
		}
		kind, size, groups, err := inputKind(name)
		if err != nil {
			return nil, nil, 0, err
		}
		parts[i] = Part{File: name, Size: size, Kind: kind}
		switch kind {
		case KindJSONL:
			b := BlockSize(size)
			for s := int64(0); s < size; s += b {
				units = append(units, unit{file: i, pos: base + s, kind: kind, start: s, end: min(s+b, size)})
			}
		case KindParquet:
			if groups == nil { // no readable footer: the file goes whole to one shard, whose reader reports it
				units = append(units, unit{file: i, pos: base, kind: kind, rowGroup: -1})
				break
			}
			var rows int64
			for _, n := range groups {
				rows += n
			}
			var before int64
			for g, n := range groups {
				pos := base
				if rows > 0 {
					pos += size * before / rows
				}
				units = append(units, unit{file: i, pos: pos, kind: kind, rowGroup: g})
				before += n
			}
		default:
			units = append(units, unit{file: i, pos: base, kind: kind})
		}
		base += size
	}
	return units, parts, base, nil
}

// inputKind tells plain JSONL, gzip JSONL and Parquet apart, with a
// Parquet file's row counts per row group.
// A file in a bucket is read by ranged GETs: its first bytes and, for
// Parquet, the footer.
func inputKind(name string) (kind string, size int64, groups []int64, err error) {
	format, err := InputFormat(name)
	if err != nil {
		return "", 0, nil, err
	}
	f, size, err := files.OpenRandom(context.Background(), name)
	if err != nil {
		return "", 0, nil, err
	}
	defer f.Close()
	switch format {
	case FormatCSV, FormatTSV:
		return KindCSV, size, nil, nil
	case FormatArrow:
		return KindArrow, size, nil, nil
	}
	magic := make([]byte, 4)
	n, _ := f.ReadAt(magic, 0)
	magic = magic[:n]
	switch {
	case string(magic) == "PAR1":
		pf, err := file.NewParquetReader(f)
		if err != nil {
			return KindParquet, size, nil, nil // the reader reports it, as in an unsharded run
		}
		defer pf.Close()
		groups := make([]int64, pf.NumRowGroups())
		for g := range groups {
			groups[g] = pf.MetaData().RowGroup(g).NumRows()
		}
		return KindParquet, size, groups, nil
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		return KindGzip, size, nil, nil
	}
	return KindJSONL, size, nil, nil
}
