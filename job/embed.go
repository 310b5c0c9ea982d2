package job

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/synapse-embed/synapse/artifact"
	"github.com/synapse-embed/synapse/dataio"
	"github.com/synapse-embed/synapse/dataio/record"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/tokenize"
	"github.com/synapse-embed/synapse/wire"
)

// EmbedOptions is one `synapse embed` job.
type EmbedOptions struct {
	Options
	ChunkTokens int    // content tokens per chunk; 0 = the model's context minus its special tokens
	Overlap     int    // tokens shared by consecutive chunks
	Pooling     string // mean, cls, last; "" = the model's own
	Normalize   bool
	Dims        int // keep the first Dims values (Matryoshka) and re-normalize; 0 = all
}

// EmbedFormats are the output formats of an embedding job.
var EmbedFormats = []dataio.Format{dataio.FormatArrow, dataio.FormatParquet, dataio.FormatJSONL}

// Embed runs an embedding job: it returns a summary even when it fails part
// way, and an error for a fatal failure.
func Embed(ctx context.Context, o EmbedOptions) (Summary, error) {
	r, err := begin(&o.Options, "embed", EmbedFormats...)
	if err != nil {
		return Summary{Kind: "embed"}, err
	}
	return r.finish(o.run(ctx, r))
}

func (o *EmbedOptions) run(ctx context.Context, r *runner) error {
	ch, err := o.chunking(r.model)
	if err != nil {
		return err
	}
	if o.BatchTokens <= 0 {
		o.BatchTokens = 4 * (ch.Window + len(ch.Prefix) + len(ch.Suffix))
	}
	if o.Dims > 0 && r.model.Dims > 0 && o.Dims > r.model.Dims {
		return configErrorf("--dims %d is larger than the model's %d", o.Dims, r.model.Dims)
	}
	n := ch.Window + len(ch.Prefix) + len(ch.Suffix)
	if err := r.load(ctx, wire.RuntimeConfig{ContextSize: n, BatchSize: n, UBatchSize: n, Pooling: o.Pooling, Embeddings: true}); err != nil {
		return err
	}
	dims := r.loaded.Dims
	if o.Dims > 0 {
		if o.Dims > dims {
			return configErrorf("--dims %d is larger than the model's %d", o.Dims, dims)
		}
		dims = o.Dims
	}
	schema := dataio.EmbedSchema(dims, o.metadata(r.model, ch, dims))
	if err := r.openWriter(&dataio.WriterOptions{Schema: schema}, o.resumeGuard()); err != nil {
		return err
	}
	r.started(fmt.Sprintf("chunks of %d tokens, %d dims", ch.Window, dims))
	src, err := r.docs(ctx)
	if err != nil {
		r.w.Abort()
		return err
	}
	k := &embedKind{tok: r.model.Tokenizer, ch: ch, req: r.req, pooling: o.Pooling, normalize: o.Normalize, dims: r.loaded.Dims}
	sink := &embedSink{w: r.w, dims: dims, renorm: o.Dims > 0 && o.Normalize}
	return execute(ctx, r, r.config(o.BatchTokens, 0), pipeline.Kind[record.Doc, Chunk, []float32](k), src, sink)
}

func (o *EmbedOptions) chunking(m *artifact.Artifact) (Chunking, error) {
	pre, suf := m.Tokenizer.Affixes()
	room := m.ContextLength - len(pre) - len(suf)
	ch := Chunking{Window: o.ChunkTokens, Overlap: o.Overlap, Prefix: pre, Suffix: suf}
	if ch.Window <= 0 {
		ch.Window = room
	}
	if ch.Window > room {
		return ch, configErrorf("--chunk-tokens %d does not fit the model's context of %d with %d special tokens", ch.Window, m.ContextLength, len(pre)+len(suf))
	}
	if err := ch.Validate(); err != nil {
		return ch, &ConfigError{err}
	}
	return ch, nil
}

// metadata is the output's schema metadata: what decides the vectors, and
// what decides which rows a run covers (a resume with others is refused).
func (o *EmbedOptions) metadata(m *artifact.Artifact, ch Chunking, dims int) map[string]string {
	meta := commonMetadata(&o.Options, m)
	pooling := o.Pooling
	if pooling == "" {
		pooling = m.Pooling
	}
	for k, v := range o.settings(m, ch, dims).Metadata() {
		meta[k] = v
	}
	for k, v := range map[string]string{
		"synapse.pooling":       pooling,
		"synapse.normalize":     strconv.FormatBool(o.Normalize),
		"synapse.dims":          strconv.Itoa(dims),
		"synapse.chunk_tokens":  strconv.Itoa(ch.Window),
		"synapse.chunk_overlap": strconv.Itoa(ch.Overlap),
		"synapse.batch_tokens":  strconv.Itoa(o.BatchTokens),
	} {
		meta[k] = v
	}
	return meta
}

// settings are the run's VectorSettings.
func (o *EmbedOptions) settings(m *artifact.Artifact, ch Chunking, dims int) VectorSettings {
	fields := o.Read.TextFields
	if len(fields) == 0 {
		fields = []string{"text"}
	}
	return VectorSettings{ModelDigest: m.Digest, TextFields: fields, Prefix: o.Read.Prefix, ChunkTokens: ch.Window,
		Overlap: ch.Overlap, Pooling: cmp.Or(o.Pooling, m.Pooling), Normalize: o.Normalize, Dims: dims}
}

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

// embedKind embeds documents chunk by chunk.
type embedKind struct {
	tok       tokenize.Tokenizer
	ch        Chunking
	req       *requester
	pooling   string
	normalize bool
	dims      int // the width LOADED reported: answers of another width are refused
}

func (k *embedKind) Place(d record.Doc) (int64, int64) { return d.Index, d.Group }

func (k *embedKind) Weight(d record.Doc) int64 { return int64(len(d.Text)) }

func (k *embedKind) Items(d record.Doc) ([]pipeline.Work[Chunk], error) {
	res := k.tok.Tokenize(d.Text, tokenize.Options{})
	chunks := k.ch.Cut(res.Tokens)
	work := make([]pipeline.Work[Chunk], len(chunks))
	for i, c := range chunks {
		work[i].Item = c
	}
	return work, nil
}

func (k *embedKind) Tokens(c Chunk) int { return len(c.IDs) }

func (k *embedKind) Call(ctx context.Context, chunks []Chunk) ([][]float32, error) {
	req := &wire.EmbedBatch{ModelRef: k.req.modelRef, Pooling: k.pooling, Normalize: k.normalize,
		Items: make([]wire.Item, len(chunks))}
	tokens := 0
	for i, c := range chunks {
		req.Items[i] = wire.Item{ID: uint64(i), NTokens: len(c.IDs)}
		tokens += len(c.IDs)
	}
	req.IDs = make([]int32, 0, tokens)
	for _, c := range chunks {
		req.IDs = append(req.IDs, c.IDs...)
	}
	resp, err := k.req.do(ctx, req, tokens)
	if err != nil {
		return nil, err
	}
	v, ok := resp.(*wire.Vectors)
	if !ok {
		return nil, fmt.Errorf("job: EMBED_BATCH answered with %s", resp.Type())
	}
	if v.N != len(chunks) || v.Dims <= 0 || (k.dims > 0 && v.Dims != k.dims) || len(v.Data) != v.N*v.Dims {
		return nil, fmt.Errorf("job: VECTORS n=%d dims=%d for %d chunks", v.N, v.Dims, len(chunks))
	}
	out := make([][]float32, v.N)
	for i := range out {
		out[i] = v.Data[i*v.Dims : (i+1)*v.Dims : (i+1)*v.Dims]
	}
	return out, nil
}

// Check refuses a vector with NaN or infinite values: never a silent value.
func (k *embedKind) Check(_ Chunk, v []float32) error {
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return refuse(ReasonEngineError, "the engine returned %v at dimension %d", x, i)
		}
	}
	return nil
}

// embedSink turns results into output rows.
type embedSink struct {
	w      *dataio.Writer
	dims   int
	renorm bool
}

func (s *embedSink) Put(r pipeline.Result[record.Doc, Chunk, []float32]) error {
	if r.File != nil {
		return s.w.PutFileError(r.File)
	}
	if r.RowErr != nil {
		return s.w.Put(r.Index, r.Group, nil, []*record.RowError{r.RowErr})
	}
	var hash [dataio.DocHashSize]byte // zeros: a document with a failed chunk is never reused
	if len(r.Failed) == 0 {
		hash = sha256.Sum256([]byte(r.Rec.Text))
	}
	rows := make(dataio.EmbedRows, len(r.Done))
	for i, d := range r.Done {
		c := d.Item
		rows[i] = dataio.EmbedRow{ID: r.Rec.ID, Chunk: c.Index, TokenStart: c.TokenStart, TokenEnd: c.TokenEnd,
			CharStart: c.CharStart, CharEnd: c.CharEnd, NTokens: int32(len(c.IDs)), Embedding: s.vector(d.Out), DocHash: hash}
	}
	return s.w.Put(r.Index, r.Group, rows, itemErrors(r.Failed, func(f pipeline.Failed[Chunk]) *record.RowError {
		reason, detail, log := describe(f.Err)
		return r.Rec.ChunkError(int(f.Item.Index), reason, detail, log)
	}))
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

// vector truncates v to the output width, re-normalizing when asked.
func (s *embedSink) vector(v []float32) []float32 {
	v = v[:s.dims]
	if !s.renorm {
		return v
	}
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return v
	}
	out := make([]float32, len(v))
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}
