// Package job assembles the runs the CLI starts — embed, rerank, generate —
// from the common parts: it checks the options and outputs, opens the model,
// starts the worker pool, opens the checkpointed output, and runs the
// pipeline with the job kind's items, requests and rows.
package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/supervise"
	"github.com/synapse-embed/synapse/wire"
)

// Options are what every job kind shares.
type Options struct {
	Inputs []string
	Read   corpus.ReadOptions
	Model  string // the model the workers load
	// Artifact is Model opened by the caller (the CLI opens it once, to
	// choose the engine's library and a quantized variant before the job
	// starts); nil: the job opens Model.
	Artifact *artifact.Artifact
	Out      string // output file; its extension picks the format
	Errors   string // errors JSONL; "" = Out + ".errors.jsonl"
	// Files are the other files the job reads or writes, by flag
	// (--previous, --deleted, --grammar, …): the output checks refuse a
	// write that is also read or written elsewhere.
	Files []files.PathUse

	BatchTokens int // token budget of one request; 0 = the kind's default
	Workers     int // worker processes; 0 = from the core count
	Threads     int // engine threads per worker; 0 = cores / workers
	// Deadline is the base deadline of a request (0 = DefaultDeadline);
	// DeadlinePerToken is added for each token of the request (0 =
	// DefaultDeadlinePerToken; negative = nothing).
	Deadline, DeadlinePerToken time.Duration
	// DeadlineStretch bounds how far deadlines stretch after timeouts (0 =
	// DefaultDeadlineStretch; 1 = never).
	DeadlineStretch int
	Resume          bool
	// CheckpointEvery also takes a checkpoint when this long has passed
	// since the last one (output.WriterOptions.CheckpointEvery; 0 =
	// DefaultCheckpointEvery, negative = every 1,024 rows only).
	CheckpointEvery time.Duration
	// Drain, when closed, drains the run (pipeline.Config.Drain): no new
	// requests, those in flight get DrainTimeout (0 = DefaultDrain;
	// negative: no time) to finish, every finished row is checkpointed, and the job returns an
	// *InterruptedError. ctx still stops it at once.
	Drain        <-chan struct{}
	DrainTimeout time.Duration
	// CheckpointDir holds the resume files of outputs in a bucket
	// (output.WriterOptions.CheckpointDir; "" = output.DefaultCheckpointDir).
	CheckpointDir string
	// Force runs a shard again although its manifest says it is done.
	Force bool
	// BufferBytes bounds the record text between reading and writing
	// (pipeline.Config.InFlightBytes; 0 = its default).
	BufferBytes int64

	// Worker is the worker command ("/path/to/synapse", "worker", …);
	// --socket and --nonce are appended.
	Worker []string
	Env    []string
	// Chaos arms the workers' fault drills (SYNAPSE_CHAOS, see
	// engine.ParseChaos). Workers never inherit SYNAPSE_CHAOS from the
	// module's environment: only this field passes it.
	Chaos string
	Pool  supervise.Config // tuning (budgets, backoff, timeouts); Command, Env and Workers are set from the above

	Version string
	Stats   *pipeline.Stats
	// Started, if set, is called once the model is loaded and the output
	// open, before any record is read.
	Started func(Info)
	Logger  *slog.Logger
	// Observer, if set, is told of requests and error records (metrics).
	Observer Observer
}

// ConfigError is a mistake in what the job was asked to do: an option that
// cannot work with the model, a model or input that does not exist or
// cannot be used, an output that cannot be written, a resume with other
// inputs or options. Running again unchanged cannot succeed.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configErrorf(format string, args ...any) error {
	return &ConfigError{fmt.Errorf(format, args...)}
}

// ErrShardDone: the shard's manifest exists, so its part is done; running
// it again is a no-op (Options.Force runs it anyway).
var ErrShardDone = errors.New("job: shard already done")

// Info describes a started job.
type Info struct {
	Kind             string // "embed", "rerank", "generate"
	Model            *artifact.Artifact
	Workers, Threads int
	Resumed          bool
	ResumeAsked      bool  // --resume was given (Resumed is false when there was nothing to resume)
	ResumeFrom       int64 // records with a smaller index were done by an earlier run
	ResumeRows       int64 // the output rows the earlier run wrote, kept
	Estimate         corpus.Estimate
	Out, Errors      string
	Chaos            string // the drills armed, "" for none
	// Settings says what the kind runs with, for the progress header
	// ("chunks of 510 tokens, 384 dims").
	Settings string
	// Restarts counts the worker restarts so far (from the pool's cached health).
	Restarts func() int
	// Health is the pool's cached health; it never sends a request.
	Health func() supervise.Health
}

// Summary is the outcome of a job.
type Summary struct {
	Kind    string
	Started bool // the pipeline ran: the counters mean something
	// Job counts the whole job, an interrupted run's records included;
	// Run what this run did itself.
	Job, Run        pipeline.Counters
	Restarts        int
	Quarantined     int
	DeadlineStretch int // the largest deadline factor used after timeouts; 0 or 1: none
	Elapsed         time.Duration
	Out, Errors     string
	Resumable       bool // the run stopped with its resume files kept
	// Interrupt says what an interrupted run kept (nil: not interrupted).
	Interrupt *Interrupt
	// ResumedRows are the rows an interrupted run had written, kept by
	// this resumed run.
	ResumedRows int64
	// This run's requests (pipeline.Stats): sent, their items, the
	// replayed items (of records an interrupted run had written) and those
	// of them not sent, and the answered items a drain dropped.
	Requests, RequestItems, ReplayItems, SkippedReplay, DroppedItems int64

	// Items, when set, replaces the items line (Job.Items): the kind's
	// own (a late-chunked run's chunks and the windows they were pooled
	// from).
	Items *SummaryLine

	Chaos string // the drills that were armed
	// Lines are what the kind adds to the summary (embed: what an
	// incremental run reused).
	Lines []SummaryLine
}

// SummaryLine is one labelled line of a summary ("" continues the last).
type SummaryLine struct{ Label, Text string }

// DefaultParallelism picks workers and threads per worker for a core count:
// workers × threads = cores, one or two threads each.
func DefaultParallelism(cores int) (workers, threads int) {
	threads = 1
	if cores >= 8 {
		threads = 2
	}
	return max(1, cores/threads), threads
}

// runner holds a job's common parts while it runs.
type runner struct {
	o         *Options
	kind      string
	start     time.Time
	model     *artifact.Artifact
	pool      *supervise.Pool
	loaded    wire.Loaded
	req       *requester
	w         *output.Writer
	resume    output.ResumeState
	sum       Summary
	kindState any // the kind's counters (a pointer JSON fills in place), kept in the checkpoint beside the pipeline's
	closer    []func()
	ctx       context.Context              // the run's, from load: bounds the uploads of outputs in a bucket
	docsR     *corpus.Reader               // the documents (embed, generate): their id counts go in the summary
	versions  []files.Version              // a shard's: its inputs' versions when it started
	store     func() (output.Store, error) // a PostgreSQL output's opener (embed's), nil for files
	manifests manifestStore                // a shard's store that keeps its manifest, nil for files
}

// begin checks the options and the outputs with the kind's Check
// (EmbedOptions.Check) and opens the model.
func begin(o *Options, kind string, check func() error) (*runner, error) {
	r := &runner{o: o, kind: kind, start: time.Now()}
	if o.Stats == nil {
		o.Stats = &pipeline.Stats{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o.Errors = o.errorsPath()
	r.sum = Summary{Kind: kind, Out: o.dest().String(), Errors: o.Errors, Chaos: o.Chaos}
	r.defaults()
	if err := check(); err != nil {
		return nil, err
	}
	if err := forceShard(o); err != nil {
		return nil, err
	}
	if o.Read.Shards > 0 {
		var err error
		if r.versions, err = inputVersions(context.Background(), o.Inputs); err != nil {
			return nil, err
		}
	}
	m, err := o.open()
	if err != nil {
		return nil, err
	}
	r.model = m
	return r, nil
}

// open returns the model: Artifact, else Model opened.
func (o *Options) open() (*artifact.Artifact, error) {
	if o.Artifact != nil {
		return o.Artifact, nil
	}
	m, err := artifact.Open(o.Model)
	if artifact.Unusable(err) {
		return nil, &ConfigError{err}
	}
	return m, err
}

// errorsPath is Errors, or its default beside Out.
func (o *Options) errorsPath() string {
	if o.Errors == "" {
		return o.dest().ErrorsPath(o.Read.Shard, o.Read.Shards)
	}
	return o.Errors
}

// Check refuses, before anything starts, what the options ask that cannot
// work whatever the model: an output the job cannot write (CheckOutputs;
// formats are the kind's) or a shard part merge cannot read. A shard whose
// manifest says it is done is ErrShardDone (unless Force). It reads files
// and changes none; a kind's own Check (EmbedOptions.Check) adds its
// options' checks.
func (o *Options) Check(formats []output.Format) error {
	if err := CheckOutputs(o, formats); err != nil {
		return err
	}
	if o.Read.Shards > 0 {
		return checkShard(o)
	}
	return nil
}

// defaults fills the zero tuning fields.
func (r *runner) defaults() {
	o := r.o
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
		o.Deadline = DefaultDeadline
	}
	switch {
	case o.DeadlinePerToken == 0:
		o.DeadlinePerToken = DefaultDeadlinePerToken
	case o.DeadlinePerToken < 0:
		o.DeadlinePerToken = 0
	}
	if o.DeadlineStretch <= 0 {
		o.DeadlineStretch = DefaultDeadlineStretch
	}
	switch {
	case o.CheckpointEvery == 0:
		o.CheckpointEvery = DefaultCheckpointEvery
	case o.CheckpointEvery < 0:
		o.CheckpointEvery = 0
	}
	switch {
	case o.DrainTimeout == 0:
		o.DrainTimeout = DefaultDrain
	case o.DrainTimeout < 0:
		o.DrainTimeout = 0 // no wait: what is finished is kept
	}
}

// CheckOutputs refuses, before anything starts, an output the job cannot
// write: an unknown or unsupported format (formats are the kind's), a
// missing or read-only directory, a written file that is also read or
// written elsewhere (files.CheckPaths), a runtime directory others control.
func CheckOutputs(o *Options, formats []output.Format) error {
	errorsPath := o.errorsPath()
	d := o.dest()
	if d.IsTable() {
		return configErrorf("output %s: a PostgreSQL output is written by synapse embed only", d)
	}
	out := d.Name()
	f, err := output.FormatOf(out)
	if err != nil {
		return &ConfigError{err}
	}
	if !slices.Contains(formats, f) {
		names := make([]string, len(formats))
		for i, g := range formats {
			names[i] = "." + string(g)
		}
		return configErrorf("output %s: this command writes %s, not .%s", d, strings.Join(names, ", "), f)
	}
	for _, p := range []string{out, errorsPath} {
		if err := checkOutputPath("output", p, o.CheckpointDir); err != nil {
			return err
		}
	}
	if err := files.CheckPaths(o.paths(errorsPath)); err != nil {
		return &ConfigError{err}
	}
	if err := supervise.CheckRuntimeDir(o.Pool.RuntimeDir); err != nil {
		return &ConfigError{err}
	}
	return nil
}

// paths are every file the job reads and writes, for files.CheckPaths:
// the inputs, the model (when it is a path), the kind's files (Options.Files),
// the output, the errors file and the resume files and manifest beside them.
func (o *Options) paths(errorsPath string) []files.PathUse {
	u := files.Reads("the input", o.Inputs...)
	if _, err := os.Stat(o.Model); err == nil {
		u = append(u, files.Reads("--model", o.Model)...)
	}
	u = append(u, o.Files...)
	u = append(u, files.Writes("-o", o.dest().Name())...)
	u = append(u, files.Writes("--errors", errorsPath)...)
	// The resume files of an output in a bucket are local, in the
	// checkpoint directory (output.ResumeBase); when it cannot be named,
	// checkObjectOutput has refused the output already.
	if resume, err := o.dest().resumeFiles(o.CheckpointDir); err == nil {
		u = append(u, files.Writes("-o's resume file", resume...)...)
	}
	if base, err := output.ResumeBase(errorsPath, o.CheckpointDir); err == nil {
		u = append(u, files.Writes("--errors's resume file", base+".partial")...)
	}
	if o.Read.Shards > 0 {
		u = append(u, files.Writes("the shard's manifest", o.dest().manifest())...)
	}
	return u
}

// checkShard refuses a shard's output merge cannot read, and stops a shard
// that is done already (unless Force).
func checkShard(o *Options) error {
	if f, _ := output.FormatOf(o.dest().Name()); f != output.FormatArrow && f != output.FormatParquet {
		return configErrorf("--shard: a shard writes an .arrow or .parquet part (synapse merge -o picks the merged format), not %s", o.dest())
	}
	d := o.dest()
	ok, err := d.manifestExists()
	switch {
	case err != nil:
		return fmt.Errorf("job: shard manifest: %w", err)
	case ok && !o.Force:
		return fmt.Errorf("%w: %s exists (--force runs it again)", ErrShardDone, d.manifest())
	}
	return nil
}

// forceShard removes the manifest of a shard run again with Force.
func forceShard(o *Options) error {
	if o.Read.Shards == 0 || !o.Force {
		return nil
	}
	if err := o.dest().dropManifest(); err != nil { // a table's shard starts over in the table (pgstore.Store.Start)
		return fmt.Errorf("job: --force: %w", err)
	}
	return nil
}

// CheckWritable refuses, before anything starts, a file option the job
// cannot write (checkOutputPath), or one that would overwrite one of inputs
// (a ConfigError).
func CheckWritable(flag, p string, inputs []string) error {
	if objstore.IsURL(p) {
		for _, in := range inputs {
			if in == p {
				return configErrorf("%s %s would overwrite %s", flag, p, in)
			}
		}
	}
	if err := checkOutputPath(flag, p, ""); err != nil {
		return err
	}
	for _, in := range inputs {
		if !objstore.IsURL(p) && in != "-" && (sameFile(in, p) || filepath.Clean(in) == filepath.Clean(p)) {
			return configErrorf("%s %s would overwrite %s", flag, p, in)
		}
	}
	return nil
}

// checkOutputPath is the one check of a file a job writes, named by flag
// in its errors: an s3:// object the run can write (checkObjectOutput, its
// resume files in checkpointDir), or a local path whose directory exists
// and is writable and which is not itself a directory.
func checkOutputPath(flag, p, checkpointDir string) error {
	if err := objstore.CheckScheme(p); err != nil {
		return &ConfigError{fmt.Errorf("%s: %w", flag, err)}
	}
	if objstore.IsURL(p) {
		return checkObjectOutput(flag, p, checkpointDir)
	}
	dir := filepath.Dir(p)
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		return configErrorf("%s %s: its directory: %w", flag, p, err)
	case !st.IsDir():
		return configErrorf("%s %s: %s is not a directory", flag, p, dir)
	case syscall.Access(dir, 2 /* W_OK */) != nil:
		return configErrorf("%s %s: directory %s is not writable", flag, p, dir)
	}
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return configErrorf("%s %s is a directory", flag, p)
	}
	return nil
}

func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// load starts the worker pool and loads the model on every worker.
func (r *runner) load(ctx context.Context, rc wire.RuntimeConfig) error {
	o := r.o
	r.ctx = ctx
	pc := o.Pool
	pc.Command, pc.Workers = o.Worker, o.Workers
	pc.BaseEnv = workerEnv(os.Environ())
	pc.Env = slices.Clone(o.Env)
	if o.Chaos != "" {
		pc.Env = append(pc.Env, "SYNAPSE_CHAOS="+o.Chaos)
	}
	if pc.QuarantineCrashes == 0 {
		// Isolating a poison item costs at most three crashes in a row on
		// one worker; workers crash at the same time on their own batches.
		pc.QuarantineCrashes = max(6, 3*o.Workers)
	}
	if pc.Logger == nil {
		pc.Logger = o.Logger
	}
	pool, err := supervise.NewPool(ctx, pc)
	if errors.Is(err, supervise.ErrRuntimeDir) || errors.Is(err, supervise.ErrSocketPathTooLong) {
		return &ConfigError{err}
	}
	if err != nil {
		return err
	}
	r.pool = pool
	r.closer = append(r.closer, func() { pool.Close() })
	rc.Threads = o.Threads
	load := wire.Load{ArtifactPath: r.model.Path, ArtifactDigest: r.model.Digest, Format: r.model.Format, RuntimeConfig: rc}
	if r.loaded, err = r.loadModel(ctx, load); err != nil {
		return fmt.Errorf("load %s: %w", r.model.Path, err)
	}
	r.req = &requester{pool: pool, modelRef: r.loaded.ModelRef, deadline: o.Deadline, perToken: o.DeadlinePerToken,
		maxPatience: o.DeadlineStretch, onPatience: r.onPatience, obs: o.Observer}
	if o.Observer != nil {
		// One PING per worker establishes the health (memory) an observer
		// reports from the start; the pool's PING loop keeps it fresh. A
		// crash it meets is handled by the pool like any other.
		_ = pool.Refresh(ctx)
	}
	return nil
}

// damaged is the configuration error of resume files that cannot be
// resumed: running again with --resume cannot succeed.
func damaged(err error) error {
	return &ConfigError{fmt.Errorf("%w\n(the resume files are damaged and cannot be resumed: start over without --resume)", err)}
}

// loadModel loads the model on every worker. A LOAD the engine refuses as
// invalid is a configuration error; so is one that crashes the engine
// twice in a row (it is tried once more after the workers restart): the
// model kills the engine every time, and retrying the job cannot help.
func (r *runner) loadModel(ctx context.Context, load wire.Load) (wire.Loaded, error) {
	loaded, err := r.pool.Load(ctx, load)
	var ce *supervise.CrashError
	var qe *supervise.QuarantinedError
	if errors.As(err, &ce) && ctx.Err() == nil {
		r.o.Logger.Warn("the engine crashed loading the model; trying once more", "err", err)
		loaded, err = r.pool.Load(ctx, load)
		if errors.As(err, &ce) || errors.As(err, &qe) {
			return loaded, &ConfigError{fmt.Errorf("the engine crashed loading the model twice, so the model is unusable as it is: %w", err)}
		}
	}
	var we *wire.Error
	if errors.As(err, &we) && (we.Code == wire.CodeConfigInvalid || we.Code == wire.CodeArtifactInvalid || we.Code == wire.CodeUnsupported) {
		err = &ConfigError{err}
	}
	return loaded, err
}

// workerEnv is the module's environment without SYNAPSE_CHAOS: drills are
// armed only by Options.Chaos.
func workerEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "SYNAPSE_CHAOS=") })
}

func (r *runner) onPatience(f int, cause error) {
	st := r.o.Stats
	for cur := st.DeadlineStretch.Load(); int64(f) > cur && !st.DeadlineStretch.CompareAndSwap(cur, int64(f)); {
		cur = st.DeadlineStretch.Load()
	}
	if cause != nil {
		r.o.Logger.Warn("a request ran past its deadline; later requests get more time (raise --deadline or --deadline-per-token if this machine is this slow)",
			"deadline_factor", f)
	} else {
		r.o.Logger.Info("requests are fast again; deadlines shortened", "deadline_factor", f)
	}
}

// openWriter opens the checkpointed output (resuming an interrupted run
// when asked) and restores the interrupted run's counters. guard adds to
// the inputs' sizes and times what a resume must find unchanged.
func (r *runner) openWriter(schema *output.WriterOptions, guards ...map[string]string) error {
	o := r.o
	opts := *schema
	opts.ErrorsPath = o.Errors
	opts.CheckpointDir, opts.Context, opts.CheckpointEvery = o.CheckpointDir, r.ctx, o.CheckpointEvery
	opts.ResumeGuard = files.InputGuard(o.Inputs)
	for _, guard := range guards {
		for k, v := range guard {
			opts.ResumeGuard[k] = v
		}
	}
	opts.State = func() any {
		if r.kindState != nil {
			return checkpointState{o.Stats.Snapshot(), r.kindState}
		}
		return o.Stats.Snapshot()
	}
	if o.Observer != nil {
		opts.OnError = o.Observer.ErrorRecord
	}
	if r.store != nil {
		return r.openStore(opts)
	}
	if !o.Resume {
		if err := output.RemoveResumeFiles(o.dest().Name(), o.Errors, o.CheckpointDir); err != nil {
			return err
		}
	}
	w, st, err := output.OpenCheckpointed(o.dest().Name(), opts)
	return r.opened(w, st, err)
}

// opened restores the interrupted run's counters into the writer just opened.
func (r *runner) opened(w *output.Writer, st output.ResumeState, err error) error {
	o := r.o
	if errors.Is(err, output.ErrResumeMismatch) {
		return &ConfigError{fmt.Errorf("%w\n(resume with the interrupted run's inputs and options, or start over without --resume)", resumeMismatch(err))}
	}
	if errors.Is(err, output.ErrCheckpointCorrupt) {
		return damaged(err)
	}
	if err != nil {
		return err
	}
	if st.Resumed && len(st.State) > 0 {
		var c pipeline.Counters
		if err := json.Unmarshal(st.State, &c); err != nil {
			w.Abort()
			return damaged(fmt.Errorf("%w: counters: %v", output.ErrCheckpointCorrupt, err))
		}
		o.Stats.Restore(c)
		if r.kindState != nil {
			var x checkpointState
			x.Kind = r.kindState
			if err := json.Unmarshal(st.State, &x); err != nil {
				w.Abort()
				return damaged(fmt.Errorf("%w: counters: %v", output.ErrCheckpointCorrupt, err))
			}
		}
	}
	r.w, r.resume = w, st
	r.sum.ResumedRows = st.Rows
	r.sum.Resumable = true // from here on, an interrupted run leaves resume files
	return nil
}

// checkpointState is the checkpoint's counters: the pipeline's, and the
// kind's under "kind".
type checkpointState struct {
	pipeline.Counters
	Kind any `json:"kind"`
}

// started tells the caller (Options.Started) that the job has begun.
func (r *runner) started(settings string) {
	if r.o.Started != nil {
		r.o.Started(r.info(settings))
	}
}

// info is the Info of the started job.
func (r *runner) info(settings string) Info {
	o := r.o
	in := Info{Kind: r.kind, Model: r.model, Workers: o.Workers, Threads: o.Threads, Resumed: r.resume.Resumed,
		ResumeAsked: o.Resume, ResumeFrom: r.resume.NextIndex, ResumeRows: r.resume.Rows, Out: o.dest().String(), Errors: o.Errors, Chaos: o.Chaos, Settings: settings}
	in.Estimate, _ = corpus.Count(o.Inputs) // errors surface again, per file, while reading
	if o.Read.Shards > 0 {
		in.Estimate, _ = corpus.ShardEstimate(o.Inputs, o.Read.Shard, o.Read.Shards)
	}
	pool := r.pool
	in.Restarts = func() int { return restarts(pool.Health()) }
	in.Health = pool.Health
	return in
}

// readOptions are the job's read options for this run: from where a
// resumed run replays, cancelable inputs.
func (r *runner) readOptions(ctx context.Context) corpus.ReadOptions {
	ro := r.o.Read
	ro.StartIndex = r.resume.ReplayFrom
	ro.Context = r.drainContext(ctx) // a drain stops the reading
	if ro.Stdin == nil && slices.Contains(r.o.Inputs, "-") {
		stdinCtx, stop := context.WithCancel(ro.Context)
		r.closer = append(r.closer, stop)
		ro.Stdin = files.CancelableReader(stdinCtx, os.Stdin) // Ctrl-C must not wait for the producer
	}
	return ro
}

// drainContext is ctx, also cancelled when Options.Drain fires (until the
// job finishes).
func (r *runner) drainContext(ctx context.Context) context.Context {
	if r.o.Drain == nil {
		return ctx
	}
	dctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-r.o.Drain:
			cancel()
		case <-dctx.Done():
		}
	})
	r.closer = append(r.closer, func() { cancel(); wg.Wait() })
	return dctx
}

// docs opens the inputs as documents, from where a resumed run replays.
func (r *runner) docs(ctx context.Context) (*corpus.Reader, error) {
	o := r.o
	ro := r.readOptions(ctx)
	ro.UniqueIDs = true
	src, err := corpus.Open(o.Inputs, ro)
	if err != nil {
		return nil, err
	}
	r.closer = append(r.closer, func() { src.Close() })
	r.docsR = src
	return src, nil
}

// idLines say what the id rule did (io/corpus/ids.go), if anything.
func idLines(s corpus.IDStats, shard bool) []SummaryLine {
	var lines []SummaryLine
	if s.Fallback > 0 {
		lines = append(lines, SummaryLine{"ids", fmt.Sprintf("%d rows without an id field were named %sINDEX (their record index)", s.Fallback, corpus.FallbackIDPrefix)})
	}
	if s.Duplicates > 0 {
		where := "the run"
		if shard {
			where = "this shard (merge does not compare shards)"
		}
		lines = append(lines, SummaryLine{"ids", fmt.Sprintf("%d rows repeat the id of an earlier row of %s: %s in the errors file",
			s.Duplicates, where, corpus.ReasonDuplicateID)})
	}
	if len(lines) == 2 {
		lines[1].Label = ""
	}
	return lines
}

// config is the pipeline configuration common to every kind.
func (r *runner) config(batchTokens, maxItems int) pipeline.Config {
	return pipeline.Config{BatchTokens: batchTokens, MaxItems: maxItems, MaxGroup: corpus.GroupRecords,
		Replay: r.resume.NextIndex, Workers: r.o.Workers, Stats: r.o.Stats, InFlightBytes: r.o.BufferBytes,
		Classify: classify, SkipReplayed: true}
}

// execute runs the pipeline into the writer and commits the output. A run
// drained (Options.Drain) keeps every row it finished and returns an
// *InterruptedError; one stopped by ctx keeps its last checkpoint.
func execute[R, I, O any](ctx context.Context, r *runner, cfg pipeline.Config, k pipeline.Kind[R, I, O], src pipeline.Source[R], sink pipeline.Sink[R, I, O]) error {
	r.sum.Started = true
	took, timedOut, err := runDrained(ctx, r, cfg, k, src, sink)
	switch {
	case err != nil && ctx.Err() == nil && (errors.Is(err, pipeline.ErrDrained) || timedOut):
		if err := r.interrupted(true, timedOut, took); err != nil {
			return err
		}
		return &InterruptedError{*r.sum.Interrupt}
	case err != nil:
		if ctx.Err() != nil {
			return errors.Join(err, r.interrupted(false, false, took))
		}
		r.w.Abort() // the resume files stay for --resume
		return err
	}
	if r.manifests != nil { // the store records it with the commit
		if err := r.recordManifest(src); err != nil {
			r.w.Abort()
			return err
		}
	}
	if err := r.w.Commit(); err != nil {
		return err
	}
	r.sum.Resumable = false
	if r.o.Read.Shards > 0 && r.manifests == nil {
		return r.writeManifest(src)
	}
	return nil
}

// writeManifest writes the shard's commit marker beside its part.
func (r *runner) writeManifest(src any) error {
	m, err := r.manifest(src)
	if err != nil {
		return err
	}
	return output.WriteManifestContext(r.ctx, r.o.dest().manifest(), m)
}

// manifest is the shard's manifest, its inputs read again (ErrInputChanged).
func (r *runner) manifest(src any) (output.Manifest, error) {
	o := r.o
	parts, err := corpus.PlanShard(o.Inputs, o.Read.Shard, o.Read.Shards)
	if err != nil {
		return output.Manifest{}, err
	}
	c := o.Stats.Snapshot()
	outRows := r.w.Rows()
	m := output.Manifest{Command: r.kind, Shard: o.Read.Shard, Shards: o.Read.Shards, Output: o.dest().Name(), Errors: o.Errors,
		Rows: output.ManifestRows{Read: c.Read, OK: c.OK, Failed: c.Failed, Partial: c.Partial, Items: c.Items,
			ItemFailures: c.ItemFailures, Tokens: c.Tokens, FileErrors: c.FileErrors},
		ErrorRecords: r.w.ErrorRecords(), OutputRows: &outRows, IndexNumbering: "shard", ModelDigest: r.model.Digest,
		SettingsDigest: output.SettingsDigest(r.w.Schema().Metadata()), SynapseVersion: o.Version,
		ElapsedSeconds: time.Since(r.start).Seconds()}
	var spans []corpus.Span
	if s, ok := src.(interface{ Spans() []corpus.Span }); ok {
		spans = s.Spans()
	} else {
		m.IndexNumbering = "global" // the source numbers records as a single run does
	}
	now, err := inputVersions(r.ctx, o.Inputs)
	if err != nil {
		return output.Manifest{}, err
	}
	for k, p := range parts {
		in := output.ManifestInput{Part: p, Version: &now[k]}
		if k < len(spans) {
			in.Records, in.Lines, in.BytesRead = spans[k].Records, spans[k].Lines, spans[k].BytesRead
		}
		if now[k] != r.versions[k] {
			return output.Manifest{}, &ConfigError{fmt.Errorf("%w: input %s changed while this shard read it (%s when it started, %s now): its part is not of one version; run the shard again once the input stays put",
				ErrInputChanged, p.File, r.versions[k], now[k])}
		}
		if in.ReadSHA256, err = readHash(r.ctx, p); err != nil {
			return output.Manifest{}, err
		}
		m.Inputs = append(m.Inputs, in)
	}
	return m, nil
}

// ErrInputChanged: an input of a range shard changed while the shard ran.
var ErrInputChanged = errors.New("input changed during the shard")

// inputVersions are the versions of a shard's inputs (files.VersionOf).
func inputVersions(ctx context.Context, inputs []string) ([]files.Version, error) {
	vs := make([]files.Version, len(inputs))
	for i, name := range inputs {
		v, err := files.VersionOf(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", name, err)
		}
		vs[i] = v
	}
	return vs, nil
}

// readHash is the digest of what a shard's part covers of a local input
// (output.ManifestInput.ReadSHA256): read again, once, when the shard is
// done.
func readHash(ctx context.Context, p corpus.Part) (string, error) {
	switch {
	case p.Skip || objstore.IsURL(p.File):
		return "", nil
	case p.Kind == corpus.KindJSONL:
		return files.HashRange(ctx, p.File, p.Start, p.End)
	}
	return files.HashRange(ctx, p.File, 0, -1)
}

// finish closes what the job opened and completes its summary.
func (r *runner) finish(err error) (Summary, error) {
	for i := len(r.closer) - 1; i >= 0; i-- {
		r.closer[i]()
	}
	s := &r.sum
	s.Elapsed = time.Since(r.start)
	st := r.o.Stats
	s.Job = st.Snapshot()
	s.Run = st.Snapshot().Minus(st.Restored())
	s.DeadlineStretch = int(st.DeadlineStretch.Load())
	s.Requests, s.RequestItems, s.ReplayItems = st.Requests.Load(), st.RequestItems.Load(), st.ReplayItems.Load()
	s.SkippedReplay, s.DroppedItems = st.SkippedReplay.Load(), st.DroppedItems.Load()
	if r.docsR != nil {
		s.Lines = append(s.Lines, idLines(r.docsR.IDStats(), r.o.Read.Shards > 0)...)
	}
	if r.pool != nil {
		h := r.pool.Health()
		s.Restarts = restarts(h)
		s.Quarantined = len(h.Quarantined)
	}
	var qe *supervise.QuarantinedError
	if errors.As(err, &qe) && qe.Last != nil && qe.Last.Stage == "timeout" {
		err = fmt.Errorf("%w\n(its last requests ran past their deadlines, stretched up to %d×: raise --deadline, --deadline-per-token or --deadline-stretch if the machine is this slow)",
			err, r.o.DeadlineStretch)
	}
	return *s, err
}

func restarts(h supervise.Health) int {
	n := 0
	for _, w := range h.Workers {
		n += w.Restarts
	}
	return n
}
