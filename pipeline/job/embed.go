package job

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/previous"
	"github.com/synapse-embed/synapse/io/record"
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/wire"
)

// EmbedOptions is one `synapse embed` job.
type EmbedOptions struct {
	Options
	ChunkTokens int  // content tokens per chunk; 0 = the model's context minus its special tokens
	Overlap     int  // tokens shared by consecutive chunks
	Truncate    bool // one chunk a document: its first window (the rest is not embedded)
	// LateChunking embeds windows of up to the model's context (Overlap
	// tokens shared) once and pools each ChunkTokens chunk from its
	// window's token states (see LateChunking).
	LateChunking bool
	Pooling      string // mean, cls, last; "" = the model's own
	Normalize    bool
	Dims         int // keep the first Dims values (Matryoshka) and re-normalize; 0 = all
	// Vectors is the output's kind: VectorsDense ("" too), or
	// VectorsSparse, SPLADE vectors from a masked-LM's logits, with
	// SparseTopK > 0 keeping each chunk's SparseTopK largest weights.
	Vectors    string
	SparseTopK int
	// AsQuery encodes ColBERT queries with VectorsTokens: the model's
	// query marker and length, expanded with [MASK] tokens as the model
	// says, no skiplist (see tokenChunking).
	AsQuery bool

	// Previous are the outputs of an earlier run (one file, or the part
	// files of a sharded run) whose unchanged documents are copied instead
	// of embedded (see package previous). PreviousAny embeds everything
	// when their settings differ instead of refusing them.
	Previous    []string
	PreviousAny bool
	// Deleted, if set, receives the ids of the previous documents that are
	// not in the input, one a line.
	Deleted string
	// Dedup embeds a text once per packing group (see incSource).
	Dedup bool
	// Sync makes the PostgreSQL output's table the previous output: its
	// unchanged documents are kept, not embedded; changed and new ones are
	// written and documents no longer in the input deleted, all published
	// in one transaction (see package pgstore).
	Sync bool
	// PromptName names a prompt of the model's
	// config_sentence_transformers.json to put in front of every document;
	// "" takes its default_prompt_name unless Read.Prefix is set.
	PromptName string

	// Dtype is the embedding column's dtype ("" = float32). int8 and
	// uint8 code by ranges: those of the Calibration files (earlier
	// outputs of the same settings), else of the Previous output when it
	// has the same dtype, else of the first CalibrationDocs documents of
	// the input (0 = DefaultCalibrationDocs), embedded first.
	Dtype           vector.Dtype
	Calibration     []string
	CalibrationDocs int

	// WithText writes each chunk's text, the joined text's bytes
	// [byte_start, byte_end), in a text column (docs/formats.md).
	WithText bool

	// twoPass (tests only) embeds the calibration's documents again, as
	// synapse did before it kept their vectors: the reference the one
	// pass is compared with.
	twoPass bool
}

// suggestedFields are fields a record may hold that are worth embedding
// with its text: a record with one that is not a --text-field gets one
// warning a run, saying how to include it.
var suggestedFields = []string{"title"}

// EmbedFormats are the output formats of an embedding job.
var EmbedFormats = []output.Format{output.FormatArrow, output.FormatParquet, output.FormatJSONL}

// Check refuses, before anything starts, the job's options and outputs
// that cannot work whatever the model (Options.Check, the incremental
// options and the dtype's), then inputs without the fields the run reads
// (checkDocInputs: the flags' mistakes are named first).
func (o *EmbedOptions) Check() error {
	if err := o.check(); err != nil {
		return err
	}
	return checkDocInputs(&o.Options)
}

func (o *EmbedOptions) check() error {
	k, err := o.pick()
	if err != nil {
		return err
	}
	if err := k.check(o); err != nil {
		return err
	}
	if err := o.checkStore(k); err != nil {
		return err
	}
	if o.dest().IsTable() {
		return o.checkDtype()
	}
	if err := o.Options.Check(EmbedFormats); err != nil {
		return err
	}
	if err := o.checkIncremental(); err != nil {
		return err
	}
	return o.checkDtype()
}

// Embed runs an embedding job: it returns a summary even when it fails part
// way, and an error for a fatal failure.
func Embed(ctx context.Context, o EmbedOptions) (Summary, error) {
	r, err := begin(&o.Options, "embed", o.Check)
	if err != nil {
		return Summary{Kind: "embed"}, err
	}
	return r.finish(o.run(ctx, r))
}

// run is an embedding job's steps after begin: plan what the model and
// options decide, load the workers, open what the run reads and writes,
// then embed.
func (o *EmbedOptions) run(ctx context.Context, r *runner) error {
	p, err := o.plan(r)
	if err != nil {
		return err
	}
	if p.prev != nil {
		r.closer = append(r.closer, p.prev.Close)
	}
	if err := o.load(ctx, r, p); err != nil {
		return err
	}
	if err := p.kind.probe(ctx, o, r, p); err != nil {
		return err
	}
	o.warnUnembedded(r)
	e, err := o.open(ctx, r, p)
	if err != nil {
		return err
	}
	return o.embed(ctx, r, p, e)
}

// warnUnembedded arms one warning a run (whichever reader meets it first)
// for a record with a suggestedFields field that is not a text field.
func (o *EmbedOptions) warnUnembedded(r *runner) {
	var once sync.Once
	fields := o.textFields()
	o.Read.Unembedded = suggestedFields
	o.Read.OnUnembedded = func(d record.Doc, f string) {
		once.Do(func() {
			var flags []string
			for _, tf := range append([]string{f}, fields...) {
				flags = append(flags, "--text-field "+tf)
			}
			where := fmt.Sprintf("%s line %d", d.Source, d.Line)
			if d.Line == 0 {
				where = fmt.Sprintf("%s row %d", d.Source, d.Row)
			}
			r.o.Logger.Warn(fmt.Sprintf("records have a %q field that is not embedded (only %s is); to embed it too, give %s",
				f, strings.Join(fields, " + "), strings.Join(flags, " ")), "first", where, "id", d.ID)
		})
	}
}

// embedPlan is what the model and the options decide before any worker
// starts: the output kind, the sentence-transformers modules, the
// chunking, the --previous output; and, once the workers have loaded the
// model, the output's width.
type embedPlan struct {
	kind outKind
	st   stRun
	ch   Chunking
	prev *previous.Set
	dims int // the vectors' width; a sparse run's vocabulary
}

// plan reads the model's modules and chunking, checks --dims against the
// width the model's metadata states (when it states one) and opens
// --previous.
func (o *EmbedOptions) plan(r *runner) (*embedPlan, error) {
	k, err := o.pick()
	if err != nil {
		return nil, err
	}
	st, err := o.sentenceTransformers(r.model, k)
	if err != nil {
		return nil, err
	}
	o.staticNormalize(r.model)
	ch, err := k.chunking(o, r.model)
	if err != nil {
		return nil, err
	}
	ch.PoolFrom = st.poolFrom
	if ch, err = k.plan(o, r.model, st, ch); err != nil {
		return nil, err
	}
	if o.BatchTokens <= 0 {
		o.BatchTokens = 4 * (ch.Window + len(ch.Prefix) + len(ch.Suffix))
	}
	if r.model.Dims > 0 {
		if _, err := o.outDims(r.model.Dims); err != nil {
			return nil, err
		}
	}
	prev, err := o.openPrevious()
	if err != nil {
		return nil, err
	}
	if err := o.checkPreviousKind(k, prev); err != nil {
		prev.Close()
		return nil, err
	}
	return &embedPlan{kind: k, st: st, ch: ch, prev: prev}, nil
}

// outDims is the width of the output's vectors for a model of width
// model: the model's, or --dims when it truncates them. A --dims wider
// than the model is refused.
func (o *EmbedOptions) outDims(model int) (int, error) {
	if o.Dims <= 0 {
		return model, nil
	}
	if o.Dims > model {
		return 0, configErrorf("--dims %d is larger than the model's %d", o.Dims, model)
	}
	return o.Dims, nil
}

// load starts the workers on the model, one window a sequence, and takes
// the output's width from what they loaded.
func (o *EmbedOptions) load(ctx context.Context, r *runner, p *embedPlan) error {
	n := p.ch.Window + len(p.ch.Prefix) + len(p.ch.Suffix)
	rc := wire.RuntimeConfig{ContextSize: n, BatchSize: n, UBatchSize: n, Pooling: o.Pooling, Embeddings: true, STModules: r.model.Chain.String()}
	if err := r.load(ctx, rc); err != nil {
		return err
	}
	if err := p.st.checkWorkers(r); err != nil {
		return err
	}
	var err error
	p.dims, err = o.outDims(r.loaded.Dims)
	return err
}

// embedRun is what an embedding run writes through: the job kind, the
// sink, the quantization, the incremental part and the records' source.
type embedRun struct {
	kind *embedKind
	sink *embedSink
	qz   *quantization
	inc  *incRun
	src  pipeline.Source[doc]
}

// open calibrates the dtype, decides what --previous may give, opens the
// checkpointed output and the records' source.
func (o *EmbedOptions) open(ctx context.Context, r *runner, p *embedPlan) (*embedRun, error) {
	k := &embedKind{tok: r.model.Tokenizer, ch: p.ch, req: r.req, pooling: o.Pooling, normalize: o.Normalize, dims: r.loaded.Dims}
	sink := &embedSink{w: r.w, dims: p.dims, renorm: o.Dims > 0 && o.Normalize, stats: o.Stats, withText: o.WithText}
	qz, err := o.quantization(ctx, r, p.kind, k, sink, p.prev, o.settings(r.model, p, nil))
	if err != nil {
		return nil, err
	}
	sink.q = qz.q
	inc := &incRun{o: o, prev: p.prev, counts: &Incremental{}}
	if p.prev != nil {
		if inc.reuse, inc.note, err = o.checkPrevious(p.prev, o.settings(r.model, p, qz)); err != nil {
			return nil, err
		}
	}
	schema := p.kind.schema(o, p.dims, o.metadata(r.model, p, qz))
	r.kindState = inc.counts
	r.store = o.storeOpener(ctx, p.kind, p.dims, o.settings(r.model, p, qz))
	if err := r.openWriter(&output.WriterOptions{Schema: schema}, o.resumeGuard(), o.incGuard()); err != nil {
		return nil, err
	}
	r.started(o.startLine(p, qz))
	src, err := inc.source(ctx, r)
	if err != nil {
		r.w.Abort()
		return nil, err
	}
	sink.w, sink.inc = r.w, inc.counts
	if o.Dedup {
		sink.window = newWindow[seen]()
	}
	return &embedRun{kind: k, sink: sink, qz: qz, inc: inc, src: src}, nil
}

// startLine is the run's settings as the start line says them: what is
// embedded and how.
func (o *EmbedOptions) startLine(p *embedPlan, qz *quantization) string {
	s := p.kind.startPart(o, p.kind.chunkSize(o, p.ch), p.dims)
	if o.WithText {
		s += ", with text"
	}
	if qz.cost != "" {
		s += "; ranges from the " + qz.cost
	}
	return s
}

// embed runs the pipeline and writes the summary's lines.
func (o *EmbedOptions) embed(ctx context.Context, r *runner, p *embedPlan, e *embedRun) error {
	cfg := r.config(o.BatchTokens, 0)
	cfg.SkipReplayed = !o.Dedup // the dedup window takes the replayed records' vectors
	err := p.kind.execute(ctx, o, r, cfg, p, e)
	if err == nil && (p.prev != nil || o.Sync) {
		err = e.inc.finish(r)
	}
	prevs := o.Previous
	if o.Sync {
		prevs = []string{"the table (--sync)"}
	}
	r.sum.Lines = append(p.kind.summary(o, r, p, e), e.inc.counts.summaryLines(prevs, e.inc.note, o.Dedup)...)
	switch {
	case e.qz.cost != "":
		kept, _, served := e.kind.cache.counts()
		r.sum.Lines = append(r.sum.Lines, SummaryLine{"calibration", fmt.Sprintf("%s ranges: %s (%d of the %d chunks it embedded written from them)", o.Dtype, e.qz.cost, served, kept)})
	case e.qz.source != "":
		r.sum.Lines = append(r.sum.Lines, SummaryLine{"calibration", o.Dtype.String() + " ranges: " + e.qz.source})
	}
	if err == nil {
		r.sum.Lines = append(r.sum.Lines, storeShardLine(&o.Options)...)
	}
	if o.Truncate {
		r.sum.Lines = append(r.sum.Lines, SummaryLine{"truncate", fmt.Sprintf("%d documents written longer than %d tokens: their first window embedded, the rest not", e.inc.counts.Truncated, p.ch.Window)})
	}
	return err
}

// checkIncremental refuses incremental options that cannot work.
func (o *EmbedOptions) checkIncremental() error {
	for _, p := range o.Previous {
		if o.dest().same(p) {
			return configErrorf("--previous %s is the output: write the new run elsewhere", p)
		}
		if err := statInput(p); err != nil {
			return fmt.Errorf("--previous: %w", err)
		}
	}
	switch {
	case o.Deleted != "" && len(o.Previous) == 0:
		return configErrorf("--deleted needs --previous: the ids that disappeared since that output")
	case o.Deleted != "" && o.Read.Shards > 0:
		return configErrorf("--deleted with --shard: a shard reads a part of the input and cannot know which ids left the whole of it (run --deleted on the merged output's next run, or without --shard)")
	case o.Deleted != "":
		return CheckWritable("--deleted", o.Deleted, append(slices.Concat(o.Inputs, o.Previous), o.dest().Name(), o.errorsPath()))
	}
	return nil
}

// incGuard is what a resume must find unchanged for the incremental
// decisions to be the interrupted run's: the previous files and dedup.
func (o *EmbedOptions) incGuard() map[string]string {
	g := map[string]string{"--dedup": strconv.FormatBool(o.Dedup), "--previous-any": strconv.FormatBool(o.PreviousAny)}
	for k, v := range files.InputGuard(o.Previous) {
		g["--previous "+strings.TrimPrefix(k, "input ")] = v
	}
	return g
}

// incRun is the incremental part of an embedding run.
type incRun struct {
	o      *EmbedOptions
	prev   *previous.Set
	reuse  bool
	note   string
	counts *Incremental
}

// source opens the inputs as documents with their incremental decisions;
// a resumed run first looks up the documents it does not read again.
func (inc *incRun) source(ctx context.Context, r *runner) (*incSource, error) {
	if inc.prev != nil {
		if err := r.catchUp(ctx, inc.prev, r.resume.ReplayFrom); err != nil {
			return nil, err
		}
	}
	src, err := r.docs(ctx)
	if err != nil {
		return nil, err
	}
	s := &incSource{src: src, prev: inc.prev, reuse: inc.reuse, withText: inc.o.WithText}
	if inc.o.Sync {
		s.held = r.w.Holds
	}
	if inc.o.Dedup {
		s.window = newWindow[struct{}]()
	}
	return s, nil
}

// finish writes --deleted and counts the deleted documents.
func (inc *incRun) finish(r *runner) error {
	if inc.o.Sync { // the table's documents neither kept nor written again
		c := inc.counts
		c.Deleted = int64(r.w.KnownDocs()) - c.Unchanged - c.Changed
		return nil
	}
	if inc.o.Read.Shards > 0 {
		inc.counts.Deleted = -1
		return nil
	}
	n, err := writeDeleted(r.ctx, inc.prev, inc.o.Deleted)
	inc.counts.Deleted = n
	return err
}

// cut is the chunking of windows of window content tokens (0: the model's
// context, or its max_seq_length, less its special tokens), checked
// against the model's limits; fits, when set, checks the window before
// them.
func (o *EmbedOptions) cut(m *artifact.Artifact, window int, fits func(Chunking) error) (Chunking, error) {
	pre, suf := m.Tokenizer.Affixes()
	room := m.ContextLength - len(pre) - len(suf)
	ch := Chunking{Window: window, Overlap: o.Overlap, Prefix: pre, Suffix: suf, Truncate: o.Truncate}
	if ch.Window <= 0 {
		ch.Window = room
		if msl := m.Chain.MaxSeqLength; msl > 0 { // sentence_bert_config.json: sentence-transformers' truncation
			ch.Window = min(room, msl-len(pre)-len(suf))
		}
		if ch.Window <= 0 {
			return ch, configErrorf("%s: max_seq_length %d leaves no room beside %d special tokens", m.Name, m.Chain.MaxSeqLength, len(pre)+len(suf))
		}
	}
	if fits != nil {
		if err := fits(ch); err != nil {
			return ch, err
		}
	}
	if ch.Window > room {
		return ch, tooLong(ch, m)
	}
	if err := ch.Validate(); err != nil {
		return ch, &ConfigError{err}
	}
	return ch, nil
}

// tooLong refuses a --chunk-tokens window that does not fit the model's
// context beside the chunking's special tokens.
func tooLong(ch Chunking, m *artifact.Artifact) error {
	return configErrorf("--chunk-tokens %d does not fit the model's context of %d with %d special tokens", ch.Window, m.ContextLength, len(ch.Prefix)+len(ch.Suffix))
}

// metadata is the output's schema metadata: what decides the vectors, and
// what decides which rows a run covers (a resume with others is refused).
func (o *EmbedOptions) metadata(m *artifact.Artifact, p *embedPlan, qz *quantization) map[string]string {
	meta := commonMetadata(&o.Options, m)
	s := o.settings(m, p, qz)
	for k, v := range s.Metadata() {
		meta[k] = v
	}
	p.st.metadata(meta)
	meta[vector.MetaDtype] = string(o.Dtype)
	if qz.ranges != nil {
		meta[vector.MetaRanges] = qz.ranges.JSON()
		meta[vector.MetaCalibration] = qz.source
	}
	for k, v := range map[string]string{
		"synapse.pooling":       s.Pooling,
		"synapse.normalize":     strconv.FormatBool(s.Normalize),
		"synapse.dims":          strconv.Itoa(p.dims),
		"synapse.chunk_tokens":  strconv.Itoa(s.ChunkTokens),
		"synapse.chunk_overlap": strconv.Itoa(p.ch.Overlap),
		"synapse.batch_tokens":  strconv.Itoa(o.BatchTokens),
		"synapse.with_text":     strconv.FormatBool(o.WithText),
	} {
		meta[k] = v
	}
	return meta
}

// textFields are the fields whose text is embedded, joined by "\n".
func (o *EmbedOptions) textFields() []string {
	if len(o.Read.TextFields) == 0 {
		return []string{"text"}
	}
	return o.Read.TextFields
}

// settings are the run's vector.Settings (qz nil: without its dtype).
func (o *EmbedOptions) settings(m *artifact.Artifact, p *embedPlan, qz *quantization) vector.Settings {
	s := vector.Settings{ModelDigest: m.Digest, TextFields: o.textFields(), Prefix: o.Read.Prefix, ChunkTokens: p.kind.chunkSize(o, p.ch),
		Overlap: p.ch.Overlap, Truncate: p.ch.Truncate, Pooling: cmp.Or(o.Pooling, m.Pooling), Normalize: o.Normalize, Dims: p.dims, Modules: p.st.post}
	p.kind.settings(o, m, &s)
	if qz != nil && o.Dtype != vector.Float32 {
		s.Dtype = string(o.Dtype)
	}
	if qz != nil && qz.ranges != nil {
		s.Ranges = qz.ranges.Digest()
	}
	return s
}
