package modelcache

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// Entry describes one cached model: the JSON in its directory's entry.json.
type Entry struct {
	Name   string `json:"name"`
	Digest string `json:"digest"` // "sha256:<hex>" of the model file
	Size   int64  `json:"size"`
	File   string `json:"file"` // the model file's name in the entry's directory (ModelFile)
	// SourcePath is the file the model was added from; for a quantized
	// variant, the source entry's file.
	SourcePath string `json:"source_path"`
	// Stored says how the file got here: "hardlink" (shares the source's
	// inode), "copy", "quantized" (written by the quantizer) or
	// "converted" (written by package convert from a safetensors directory).
	Stored       string `json:"stored"`
	Architecture string `json:"architecture"`
	Kind         string `json:"kind"` // KindEmbed, KindRerank or KindGenerate
	Dims         int    `json:"dims"` // embedding width (classifier outputs for a reranker)
	Context      int    `json:"context"`
	// Quantization is the file type of the weights ("F16", "Q8_0"; gguf.FileType),
	// "unknown" when the file does not say.
	Quantization string `json:"quantization"`
	// Of is the digest of the entry this one was quantized from, "" for an
	// added model.
	Of string `json:"of,omitempty"`
	// ConvertedFrom is, for a model converted from a Hugging Face
	// safetensors directory (SourcePath), the conversion's key: the digest
	// of its source files and the converter's version (convert.Source.Key).
	ConvertedFrom string `json:"converted_from,omitempty"`
	// Quality is the measured cost of the quantization, nil for an added model.
	Quality        *Quality  `json:"quality"`
	Added          time.Time `json:"added"`
	SynapseVersion string    `json:"synapse_version"`
	// Files are the digests of the entry's other files (an ONNX model's
	// tokenizer.json, config.json, …) by their slash-separated paths in the
	// entry, checked with the model file when the entry must be verified
	// (NeedsVerify).
	Files map[string]string `json:"files,omitempty"`

	dir   string // the entry's directory; set by the store
	owned bool   // this user owns the directory and all its files (see checkEntry)
}

// Kinds of model, by what a worker was asked to do with it at ingest.
const (
	KindEmbed    = "embed"
	KindRerank   = "rerank"
	KindGenerate = "generate"
)

// MeasureScores is Quality.Measure for a reranker.
const MeasureScores = "scores"

// Quality is what a quantization cost: the quantized variant and its source
// embedded the same sample texts (a reranker: scored the same pairs of
// them) through workers, back to back.
type Quality struct {
	Sample string `json:"sample"` // "built-in" or the --sample file
	Texts  int    `json:"texts"`
	Tokens int    `json:"tokens"` // in the sample, special tokens included
	// MinCosine and MeanCosine compare each text's quantized vector with its
	// source vector. For a reranker (Measure MeasureScores) they compare
	// scores: for each sample query, the Pearson correlation of the
	// variant's scores with the source's over the sample documents (the
	// cosine of the mean-centred score lists).
	MinCosine  float64 `json:"min_cosine"`
	MeanCosine float64 `json:"mean_cosine"`
	// Measure is "" for vectors, MeasureScores for a reranker's scores;
	// Pairs and MaxScoreDiff (the largest difference of one pair's two
	// scores) are a reranker's.
	Measure      string  `json:"measure,omitempty"`
	Pairs        int     `json:"pairs,omitempty"`
	MaxScoreDiff float64 `json:"max_score_diff,omitempty"`
	// MinCosineRequired is the threshold in effect; Degraded is
	// MinCosine < MinCosineRequired. A degraded variant is used by name or
	// digest only when the caller allows it.
	MinCosineRequired float64 `json:"min_cosine_required"`
	Degraded          bool    `json:"degraded"`
	// Speed: tokens per second of each variant (the median of Rounds
	// alternating passes over the sample, repeated to at least 4096 tokens
	// per pass) with Threads llama.cpp threads, and their ratio, quantized
	// over source.
	SourceTokensPerSec float64 `json:"source_tokens_per_s"`
	TokensPerSec       float64 `json:"tokens_per_s"`
	SpeedRatio         float64 `json:"speed_ratio"`
	Threads            int     `json:"threads"`
	Rounds             int     `json:"rounds"`
	QuantizeMS         int64   `json:"quantize_ms"`
	// CPU is the class of the CPU the figures were measured on
	// (cpuclass.Of: "avx2", "avx512-vnni", "amx", …); "" for a variant
	// made by a synapse that did not record it.
	CPU string `json:"cpu,omitempty"`
	// Graph is, for an ONNX int8 variant, the form of its graph
	// (onnx.QuantForm): one whose result is the same on every CPU class, so
	// that the figures hold on every node sharing the cache. "" is an
	// earlier synapse's graph with 8-bit weights, whose vectors move with
	// the CPU; such a variant is made again (StaleGraph).
	Graph string `json:"graph,omitempty"`
}

// Path is the model file's path.
func (e Entry) Path() string { return filepath.Join(e.dir, e.File) }

// Format is the model's format: "onnx" for a graph (File ONNXFile), else
// "gguf" (artifact.FormatGGUF, FormatONNX).
func (e Entry) Format() string {
	if strings.EqualFold(filepath.Ext(e.File), ".onnx") {
		return "onnx"
	}
	return "gguf"
}

// Dir is the entry's directory.
func (e Entry) Dir() string { return e.dir }

// Short is the digest's first 12 hex digits, as ls shows it.
func (e Entry) Short() string {
	h := strings.TrimPrefix(e.Digest, digestPrefix)
	return h[:min(12, len(h))]
}

// Degraded reports a variant whose measured quality is below the threshold
// it was made with.
func (e Entry) Degraded() bool { return e.Quality != nil && e.Quality.Degraded }

// StaleGraph reports whether e is an ONNX variant quantized by an earlier
// synapse into a graph of another form than form (onnx.QuantForm): its
// measured quality holds only on the CPU class it was measured on.
func (e Entry) StaleGraph(form string) bool {
	return e.Of != "" && e.Format() == "onnx" && e.Quality != nil && e.Quality.Graph != form
}

// ErrBadName: a name CheckName refuses.
var ErrBadName = errors.New("unusable model name")

// CheckName validates a model name: 1 to 128 printable characters without
// spaces or slashes, not starting with '.', '-' or "sha256", and not 4 to
// 64 hex digits (names and digest prefixes share -m).
func CheckName(name string) error {
	switch {
	case name == "" || len(name) > 128:
		return fmt.Errorf("modelcache: %w: name %q: want 1 to 128 characters", ErrBadName, name)
	case strings.HasPrefix(name, ".") || strings.HasPrefix(name, "-"):
		return fmt.Errorf("modelcache: %w: name %q must not start with '.' or '-'", ErrBadName, name)
	case strings.HasPrefix(strings.ToLower(name), "sha256"):
		return fmt.Errorf("modelcache: %w: name %q must not start with sha256 (digests are written that way)", ErrBadName, name)
	}
	if _, ok := digestPrefixOf(name); ok {
		// A name wins over a digest prefix in Lookup: this one would hide
		// every model whose digest starts with it, now or later.
		return fmt.Errorf("modelcache: %w: name %q looks like a digest prefix (4 to 64 hex digits) and would shadow the models whose digests start with it; give --name another", ErrBadName, name)
	}
	for _, r := range name {
		if r == '/' || r == '\\' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("modelcache: %w: name %q: no spaces, slashes or control characters", ErrBadName, name)
		}
	}
	return nil
}

// readEntry checks that the entry directory dir is trusted (checkEntry),
// reads its entry.json and checks it against the directory's name.
func readEntry(dir string) (Entry, error) {
	owned, err := checkEntry(dir)
	if err != nil {
		return Entry{}, err
	}
	b, err := readlimit.ReadFile(filepath.Join(dir, EntryFile), readlimit.Config)
	if err != nil {
		return Entry{}, fmt.Errorf("modelcache: %w", err)
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, fmt.Errorf("modelcache: %s: %w", filepath.Join(dir, EntryFile), err)
	}
	if base := filepath.Base(dir); base != dirName(e.Digest) && base != filesDirName(e.Digest, e.Files) {
		return Entry{}, fmt.Errorf("modelcache: %s names digest %s; the directory says %s", filepath.Join(dir, EntryFile), e.Digest, filepath.Base(dir))
	}
	if e.File == "" || filepath.Base(e.File) != e.File {
		return Entry{}, fmt.Errorf("modelcache: %s: bad file name %q", filepath.Join(dir, EntryFile), e.File)
	}
	e.dir, e.owned = dir, owned
	return e, nil
}

// writeEntry writes dir/entry.json durably.
func writeEntry(dir string, e Entry) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("modelcache: %w", err)
	}
	return writeFileSync(filepath.Join(dir, EntryFile), append(b, '\n'))
}

// writeFileSync writes a new file and syncs it.
func writeFileSync(path string, b []byte) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("modelcache: %w", err)
	}
	err = fh.Chmod(0o644) // whatever the umask: others may not write a store's files
	if err == nil {
		_, err = fh.Write(b)
	}
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("modelcache: write %s: %w", path, err)
	}
	return nil
}
