// Package job assembles the jobs the CLI runs: it opens the model, starts
// the worker pool, opens the checkpointed output and runs the pipeline.
package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/synapse-embed/synapse/artifact"
	"github.com/synapse-embed/synapse/dataio"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/supervise"
	"github.com/synapse-embed/synapse/wire"
)

// EmbedOptions is one `synapse embed` job.
type EmbedOptions struct {
	Inputs []string
	Read   dataio.ReadOptions
	Model  string // GGUF file
	Out    string // .arrow (IPC file) or .parquet
	Errors string // errors JSONL; "" = Out + ".errors.jsonl"

	ChunkTokens int // content tokens per chunk; 0 = the model's context minus its special tokens
	Overlap     int
	BatchTokens int // token budget of one request; 0 = 4 × the chunk size
	Workers     int // worker processes; 0 = from the core count
	Threads     int // llama.cpp threads per worker; 0 = cores / workers
	Pooling     string
	Normalize   bool
	Dims        int // keep the first Dims values (Matryoshka) and re-normalize; 0 = all

	// Deadline is the base deadline of a request (0 = 60s); DeadlinePerToken
	// is added for each token of the request (0 = 20ms; negative = nothing).
	Deadline, DeadlinePerToken time.Duration
	Resume                     bool
	// DeadlineStretch is pipeline.PoolBackend.MaxPatience (0 = its default).
	DeadlineStretch int
	// BufferBytes bounds the document text between reading and writing
	// (pipeline.Config.InFlightBytes; 0 = its default).
	BufferBytes int64

	// Worker is the worker command ("/path/to/synapse", "worker", …);
	// --socket and --nonce are appended.
	Worker []string
	Env    []string
	Pool   supervise.Config // tuning (budgets, backoff, timeouts); Command, Env and Workers are set from the above

	Version string
	Stats   *pipeline.Stats
	// Started, if set, is called once the model is loaded, before any document.
	Started func(JobInfo)
	Logger  *slog.Logger
}

// ErrOption marks a job option that cannot work with the model (a chunk
// larger than its context, more dims than it has): the caller's mistake.
var ErrOption = errors.New("pipeline: invalid option")

// JobInfo describes a started job.
type JobInfo struct {
	Digest           string
	Dims             int
	Chunking         pipeline.Chunking
	Workers, Threads int
	Resumed          bool
	ResumeAsked      bool  // --resume was given (Resumed is false when there was nothing to resume)
	ResumeFrom       int64 // documents with a smaller index were done by an earlier run
	Estimate         dataio.Estimate
	Out, Errors      string
	// Restarts counts the worker restarts so far (from the pool's cached health).
	Restarts func() int
}

// Summary is the outcome of a job.
type Summary struct {
	Read, Embedded, Failed int64
	Chunks, Tokens         int64
	FileErrors             int64
	Restarts               int
	Quarantined            int
	DeadlineStretch        int // the largest deadline factor used after timeouts; 0 or 1: none
	Elapsed                time.Duration
	Out, Errors            string
}

// DefaultParallelism picks workers and threads per worker for a core count:
// workers × threads = cores, one or two threads each.
func DefaultParallelism(cores int) (workers, threads int) {
	threads = 1
	if cores >= 8 {
		threads = 2
	}
	return max(1, cores/threads), threads
}

// Embed runs an embedding job: it returns a summary even when it fails part
// way, and an error for a fatal failure.
func Embed(ctx context.Context, o EmbedOptions) (sum Summary, err error) {
	start := time.Now()
	if o.Stats == nil {
		o.Stats = &pipeline.Stats{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sum = Summary{Out: o.Out, Errors: o.Errors}
	if sum.Errors == "" {
		sum.Errors = o.Out + ".errors.jsonl"
	}
	m, err := artifact.Open(o.Model)
	if err != nil {
		return sum, err
	}
	ch, err := o.chunking(m)
	if err != nil {
		return sum, err
	}
	o.defaults(ch)
	pool, loaded, err := o.startPool(ctx, m, ch)
	if err != nil {
		return sum, err
	}
	defer pool.Close()
	defer func() { sum.Elapsed = time.Since(start); o.fillSummary(&sum, pool) }()

	dims := loaded.Dims
	if o.Dims > 0 {
		if o.Dims > dims {
			return sum, fmt.Errorf("%w: --dims %d is larger than the model's %d", ErrOption, o.Dims, dims)
		}
		dims = o.Dims
	}
	w, resume, err := o.openWriter(m, ch, dims)
	if err != nil {
		return sum, err
	}
	o.Read.StartIndex = pipeline.GroupStart(resume.NextIndex, pipeline.DefaultGroupWindow) // replayed up to NextIndex
	info := JobInfo{Digest: m.Digest, Dims: dims, Chunking: ch, Workers: o.Workers, Threads: o.Threads,
		Resumed: resume.Resumed, ResumeAsked: o.Resume, ResumeFrom: resume.NextIndex, Out: o.Out, Errors: sum.Errors}
	info.Estimate, _ = dataio.Count(o.Inputs) // errors surface again, per file, while reading
	info.Restarts = func() int { return restarts(pool.Health()) }
	if o.Started != nil {
		o.Started(info)
	}
	if o.Read.Stdin == nil && slices.Contains(o.Inputs, "-") {
		stdinCtx, stop := context.WithCancel(ctx)
		defer stop()
		o.Read.Stdin = dataio.CancelableReader(stdinCtx, os.Stdin) // Ctrl-C must not wait for the producer
	}
	src, err := dataio.Open(o.Inputs, o.Read)
	if err != nil {
		w.Abort()
		return sum, err
	}
	defer src.Close()
	cfg := pipeline.Config{Tokenizer: m.Tokenizer, Chunking: ch, BatchTokens: o.BatchTokens, GroupWindow: pipeline.DefaultGroupWindow,
		Replay: resume.NextIndex, Workers: o.Workers, Stats: o.Stats, InFlightBytes: o.BufferBytes,
		Backend: &pipeline.PoolBackend{Pool: pool, ModelRef: loaded.ModelRef, Dims: loaded.Dims, Pooling: o.Pooling, Normalize: o.Normalize,
			Deadline: o.Deadline, PerToken: o.DeadlinePerToken, MaxPatience: o.DeadlineStretch,
			OnPatience: func(f int, cause error) {
				for cur := o.Stats.DeadlineStretch.Load(); int64(f) > cur && !o.Stats.DeadlineStretch.CompareAndSwap(cur, int64(f)); {
					cur = o.Stats.DeadlineStretch.Load()
				}
				if cause != nil {
					o.Logger.Warn("a request ran past its deadline; later requests get more time (raise --deadline or --deadline-per-token if this machine is this slow)",
						"deadline_factor", f)
				} else {
					o.Logger.Info("requests are fast again; deadlines shortened", "deadline_factor", f)
				}
			}},
		Classify: pipeline.ClassifyPoolError}
	sink := &writerSink{w: w, dims: dims, renorm: o.Dims > 0 && o.Normalize}
	if err := pipeline.Run(ctx, cfg, src, sink); err != nil {
		w.Abort() // the resume files stay for --resume
		return sum, err
	}
	if err := w.Commit(); err != nil {
		return sum, err
	}
	return sum, nil
}

// defaults fills the zero tuning fields.
func (o *EmbedOptions) defaults(ch pipeline.Chunking) {
	if o.BatchTokens <= 0 {
		o.BatchTokens = 4 * (ch.Window + len(ch.Prefix) + len(ch.Suffix))
	}
	if o.Workers <= 0 || o.Threads <= 0 {
		w, t := DefaultParallelism(runtime.NumCPU())
		switch {
		case o.Workers <= 0 && o.Threads <= 0:
			o.Workers, o.Threads = w, t
		case o.Workers <= 0: // threads given: as many workers as fit the cores
			o.Workers = max(1, runtime.NumCPU()/o.Threads)
		default: // workers given
			o.Threads = max(1, runtime.NumCPU()/o.Workers)
		}
	}
	if o.Deadline <= 0 {
		o.Deadline = 60 * time.Second
	}
	switch {
	case o.DeadlinePerToken == 0:
		o.DeadlinePerToken = 20 * time.Millisecond
	case o.DeadlinePerToken < 0:
		o.DeadlinePerToken = 0
	}
}

func (o *EmbedOptions) fillSummary(s *Summary, pool *supervise.Pool) {
	st := o.Stats
	s.Read, s.Embedded, s.Failed = st.Read.Load(), st.Embedded.Load(), st.Failed.Load()
	s.Chunks, s.Tokens, s.FileErrors = st.Chunks.Load(), st.Tokens.Load(), st.FileErrors.Load()
	s.DeadlineStretch = int(st.DeadlineStretch.Load())
	h := pool.Health()
	s.Restarts = restarts(h)
	s.Quarantined = len(h.Quarantined)
}

func restarts(h supervise.Health) int {
	n := 0
	for _, w := range h.Workers {
		n += w.Restarts
	}
	return n
}

func (o *EmbedOptions) chunking(m *artifact.Artifact) (pipeline.Chunking, error) {
	pre, suf := m.Tokenizer.Affixes()
	ctxLen := m.ContextLength
	room := ctxLen - len(pre) - len(suf)
	ch := pipeline.Chunking{Window: o.ChunkTokens, Overlap: o.Overlap, Prefix: pre, Suffix: suf}
	if ch.Window <= 0 {
		ch.Window = room
	}
	if ch.Window > room {
		return ch, fmt.Errorf("%w: --chunk-tokens %d does not fit the model's context of %d with %d special tokens", ErrOption, ch.Window, ctxLen, len(pre)+len(suf))
	}
	if err := ch.Validate(); err != nil {
		return ch, fmt.Errorf("%w: %w", ErrOption, err)
	}
	return ch, nil
}

func (o *EmbedOptions) startPool(ctx context.Context, m *artifact.Artifact, ch pipeline.Chunking) (*supervise.Pool, wire.Loaded, error) {
	pc := o.Pool
	pc.Command, pc.Env, pc.Workers = o.Worker, o.Env, o.Workers
	if pc.QuarantineCrashes == 0 {
		// Isolating a poison chunk costs at most three crashes in a row on
		// one worker; workers crash at the same time on their own batches.
		pc.QuarantineCrashes = max(6, 3*o.Workers)
	}
	if pc.Logger == nil {
		pc.Logger = o.Logger
	}
	pool, err := supervise.NewPool(ctx, pc)
	if err != nil {
		return nil, wire.Loaded{}, err
	}
	n := ch.Window + len(ch.Prefix) + len(ch.Suffix)
	load := wire.Load{ArtifactPath: m.Path, ArtifactDigest: m.Digest, Format: m.Format,
		RuntimeConfig: wire.RuntimeConfig{ContextSize: n, BatchSize: n, UBatchSize: n, Threads: o.Threads,
			Pooling: o.Pooling, Embeddings: true}}
	loaded, err := pool.Load(ctx, load)
	if err != nil {
		pool.Close()
		return nil, wire.Loaded{}, fmt.Errorf("load %s: %w", m.Path, err)
	}
	return pool, loaded, nil
}

func (o *EmbedOptions) openWriter(m *artifact.Artifact, ch pipeline.Chunking, dims int) (*dataio.Writer, dataio.ResumeState, error) {
	meta := map[string]string{
		"synapse.version":       o.Version,
		"synapse.model":         filepath.Base(m.Path),
		"synapse.model_digest":  m.Digest,
		"synapse.pooling":       o.Pooling,
		"synapse.normalize":     strconv.FormatBool(o.Normalize),
		"synapse.dims":          strconv.Itoa(dims),
		"synapse.chunk_tokens":  strconv.Itoa(ch.Window),
		"synapse.chunk_overlap": strconv.Itoa(ch.Overlap),
		"synapse.text_fields":   fmt.Sprint(o.Read.TextFields),
		"synapse.prefix":        o.Read.Prefix,
		// What decides which rows a run covers: a resume with other inputs
		// or options is refused (dataio.ErrResumeMismatch).
		"synapse.inputs":       strings.Join(o.Inputs, "\n"),
		"synapse.id_field":     o.Read.IDField,
		"synapse.skip_empty":   strconv.FormatBool(o.Read.SkipEmpty),
		"synapse.batch_tokens": strconv.Itoa(o.BatchTokens),
		"synapse.shard":        fmt.Sprintf("%d/%d", o.Read.Shard, max(o.Read.Shards, 1)),
	}
	if o.Pooling == "" {
		meta["synapse.pooling"] = "model default"
	}
	opts := dataio.WriterOptions{Dims: dims, Metadata: meta, ErrorsPath: o.Errors,
		ResumeGuard: o.resumeGuard()}
	if !o.Resume {
		if err := dataio.RemoveResumeFiles(o.Out, o.Errors); err != nil {
			return nil, dataio.ResumeState{}, err
		}
	}
	return dataio.OpenCheckpointed(o.Out, opts)
}

// writerSink turns results into output rows.
type writerSink struct {
	w      *dataio.Writer
	dims   int
	renorm bool
}

func (s *writerSink) Put(r pipeline.DocResult) error {
	if r.File != nil {
		return s.w.PutFileError(r.File)
	}
	rows := make([]dataio.Row, len(r.Chunks))
	for i, e := range r.Chunks {
		c := e.Chunk
		rows[i] = dataio.Row{ID: r.Doc.ID, Chunk: c.Index, TokenStart: c.TokenStart, TokenEnd: c.TokenEnd,
			CharStart: c.CharStart, CharEnd: c.CharEnd, NTokens: int32(len(c.IDs)), Embedding: s.vector(e.Vector)}
	}
	return s.w.Put(r.Doc.Index, rows, r.Errors)
}

// vector truncates v to the output width, re-normalizing when asked.
func (s *writerSink) vector(v []float32) []float32 {
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

// resumeGuard is what a resume must find unchanged beyond the output's
// metadata: the inputs' sizes and times, and the text buffer (which can
// decide where the packer cuts batches, and so the vectors' last bits).
func (o *EmbedOptions) resumeGuard() map[string]string {
	g := dataio.InputGuard(o.Inputs)
	buf := o.BufferBytes
	if buf <= 0 {
		buf = pipeline.DefaultInFlightBytes
	}
	g["--buffer-mb"] = strconv.FormatFloat(float64(buf)/(1<<20), 'g', -1, 64) // the value in effect
	return g
}
