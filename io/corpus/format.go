package corpus

import (
	"fmt"
	"path"
	"strings"
)

// Format is how an input file is read, from its name.
type Format int

// Input formats. FormatAuto is told by content: a file that starts with the
// Parquet magic is Parquet, any other JSON Lines (gzip-compressed or not).
const (
	FormatAuto  Format = iota // .jsonl, .ndjson, .json, .parquet, .pq, no extension, stdin
	FormatCSV                 // .csv, .csv.gz: comma-separated, RFC 4180 quoting, a header row
	FormatTSV                 // .tsv, .tab (and .gz): tab-separated, a header row
	FormatArrow               // .arrow, .feather: an Arrow IPC file (the file format, with its footer)
)

// InputExtensions names the input extensions, for messages.
const InputExtensions = ".parquet, .arrow (Arrow IPC), .jsonl (or .ndjson, .json), .csv or .tsv (the text ones also gzip-compressed, .gz)"

// InputFormat is the format of the input name (a path, an s3:// URL or "-"
// for stdin) by its extension; a name without one (a pipe such as
// /dev/fd/63) is read by content. An extension synapse does not read is an
// error that names it: a file of another format is refused rather than
// read as JSON Lines, row by row.
func InputFormat(name string) (Format, error) {
	if name == "-" {
		return FormatAuto, nil
	}
	base := strings.ToLower(path.Base(name))
	trimmed := strings.TrimSuffix(base, ".gz")
	switch ext := path.Ext(trimmed); ext {
	case "":
		return FormatAuto, nil
	case ".jsonl", ".ndjson", ".json", ".jsonlines":
		return FormatAuto, nil
	case ".parquet", ".pq", ".parq":
		if trimmed != base {
			return 0, fmt.Errorf("input %s: a gzip-compressed Parquet file is not read (Parquet compresses its pages itself): give the .parquet file", name)
		}
		return FormatAuto, nil
	case ".csv":
		return FormatCSV, nil
	case ".tsv", ".tab":
		return FormatTSV, nil
	case ".arrow", ".feather", ".ipc":
		if trimmed != base {
			return 0, fmt.Errorf("input %s: a gzip-compressed Arrow IPC file is not read (it is read by ranges): give the .arrow file", name)
		}
		return FormatArrow, nil
	case ".arrows":
		return 0, fmt.Errorf("input %s: the Arrow IPC stream format is not read: give an Arrow IPC file (.arrow, with its footer) or %s", name, InputExtensions)
	default:
		return 0, fmt.Errorf("input %s: unknown input format %q: synapse reads %s, or - for stdin", name, ext, InputExtensions)
	}
}

// CheckFormats refuses, before anything is read, an input whose extension
// is not one synapse reads (InputFormat).
func CheckFormats(files []string) error {
	for _, f := range files {
		if _, err := InputFormat(f); err != nil {
			return err
		}
	}
	return nil
}
