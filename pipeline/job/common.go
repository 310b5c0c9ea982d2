package job

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/synapse-embed/synapse/io/record"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/pipeline"
)

// What every job kind's output shares, whatever it writes: the metadata
// that says what made it, what a resume must find unchanged, and how a
// record's failed items become error records. A new kind uses these and
// adds only its own files.

// commonMetadata is the metadata every kind's output carries.
func commonMetadata(o *Options, m *artifact.Artifact) map[string]string {
	fields := o.Read.TextFields
	if len(fields) == 0 {
		fields = []string{"text"}
	}
	tf, _ := json.Marshal(fields)
	idField := o.Read.IDField
	if idField == "" {
		idField = "auto: id, else _id, else the row index"
	}
	meta := map[string]string{
		"synapse.version":      o.Version,
		"synapse.model":        filepath.Base(m.Path),
		"synapse.model_name":   m.Name,
		"synapse.model_digest": m.Digest,
		"synapse.model_format": m.Format,
		"synapse.text_fields":  string(tf),
		"synapse.prefix":       o.Read.Prefix,
		"synapse.inputs":       strings.Join(o.Inputs, "\n"),
		"synapse.id_field":     idField,
		"synapse.skip_empty":   strconv.FormatBool(o.Read.SkipEmpty),
		"synapse.shard":        fmt.Sprintf("%d/%d", o.Read.Shard, max(o.Read.Shards, 1)),
	}
	if e := m.Entry; e != nil { // a cached model: which variant ran
		meta["synapse.model_quantization"] = e.Quantization
		if q := e.Quality; e.Of != "" && q != nil {
			meta["synapse.model_quantized_from"] = e.Of
			meta["synapse.model_quality"] = fmt.Sprintf("cosine to the source: min %.6f, mean %.6f over %d %s texts", q.MinCosine, q.MeanCosine, q.Texts, q.Sample)
		}
	}
	return meta
}

// resumeGuard is what a resume must find unchanged beyond the output's
// metadata and the inputs: the text buffer, which can decide where the
// packer cuts batches, and so the vectors' last bits.
func (o *Options) resumeGuard() map[string]string {
	buf := o.BufferBytes
	if buf <= 0 {
		buf = pipeline.DefaultInFlightBytes
	}
	return map[string]string{"--buffer-mb": strconv.FormatFloat(float64(buf)/(1<<20), 'g', -1, 64)} // the value in effect
}

// itemErrors turns a record's failed items into error records.
func itemErrors[I any](failed []pipeline.Failed[I], row func(pipeline.Failed[I]) *record.RowError) []*record.RowError {
	if len(failed) == 0 {
		return nil
	}
	out := make([]*record.RowError, len(failed))
	for i, f := range failed {
		out[i] = row(f)
	}
	return out
}
