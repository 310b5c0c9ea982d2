package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/pipeline/job"
	"github.com/synapse-embed/synapse/pipeline/status"
)

// The flags and the run loop every job command (embed, rerank, generate)
// shares: the command adds its own flags and options and names its rows.

// jobFlags are the flags of every job command; what decides its records
// (text fields, ids) is the command's own.
func jobFlags(batchDefault string) []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "the `MODEL`: a GGUF file, an ONNX model directory or .onnx file, a Hugging Face directory with safetensors weights (converted to ONNX into the model cache on first use), a cached model's name or digest prefix, or a Hugging Face id ORG/NAME[@REVISION] pulled with `synapse models pull` or in the Hugging Face cache (required)"},
		&cli.StringFlag{Name: "errors", Usage: "errors `FILE`, JSON Lines", DefaultText: "OUTPUT.errors.jsonl"},
		&cli.IntFlag{Name: "batch-tokens", Usage: "token budget of one request to a worker", DefaultText: batchDefault},
		&cli.IntFlag{Name: "workers", Usage: "worker processes", DefaultText: "from the core count"},
		&cli.IntFlag{Name: "threads", Usage: "engine threads per worker (llama.cpp or ONNX Runtime)", DefaultText: "cores / workers"},
		&cli.IntFlag{Name: "buffer-mb", Value: pipeline.DefaultInFlightBytes >> 20, Usage: "MiB of input text held between reading and writing; bounds the module's memory with long records"},
		&cli.DurationFlag{Name: "deadline", Value: job.DefaultDeadline, Usage: "base deadline of one request (--deadline-per-token is added); a worker past it is killed"},
		&cli.DurationFlag{Name: "deadline-per-token", Value: job.DefaultDeadlinePerToken, Usage: "added to --deadline for every token of a request (0: nothing)"},
		&cli.IntFlag{Name: "deadline-stretch", Value: job.DefaultDeadlineStretch, Usage: "after a request times out, later ones get twice the deadline, up to this many times (1: never); a busy machine slows the run instead of failing it"},
		&cli.BoolFlag{Name: "resume", Usage: "continue an interrupted run with the same output instead of starting over"},
		&cli.DurationFlag{Name: "checkpoint-every", Value: job.DefaultCheckpointEvery, Usage: "also checkpoint the rows written when this long has passed since the last checkpoint (besides every 1,024 rows); 0: by rows only. The output is the same bytes either way"},
		&cli.DurationFlag{Name: "drain", Value: job.DefaultDrain, Usage: "on the first SIGINT or SIGTERM, send no new request and give those in flight this long to finish, then keep every finished row and exit 130 (resumable); a second signal stops at once. 0: keep what is finished, abandon what is in flight"},
		checkpointDirFlag(),
		&cli.StringFlag{Name: "shard", Usage: "`I/N`: process the I-th of N contiguous parts of the inputs (auto/N: I from JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID); writes OUT.shard-I-of-N.EXT and, when done, its manifest OUT.shard-I-of-N.json (into a PostgreSQL table T: the table T_synapse_shard_I_of_N, its manifest in synapse_state); synapse merge puts the parts together. .gz JSON Lines files are not split by bytes: each goes whole to one shard"},
		&cli.BoolFlag{Name: "force", Usage: "with --shard: run the shard again although its manifest says it is done"},
		&cli.Float64Flag{Name: "max-error-rate", Usage: "exit 0 instead of 3 when the rows in the errors file are at most this share of the rows read (e.g. 0.000001)"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress and no summary"},
		llamaLibFlag(), ortLibFlag(), chaosFlag(), // workers.go
	}
	flags = append(flags, statusFlags()...)    // --status-addr, --log-format, ... (cmd_status.go)
	return append(flags, modelCacheFlags()...) // --quantize, --min-cosine, --allow-degraded (cmd_models.go)
}

// readFlags are the flags that make documents out of input rows.
func readFlags(what string) []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "text-field", Usage: "field(s) holding the " + what + "; several are joined with a newline", DefaultText: "text"},
		&cli.StringFlag{Name: "id-field", Usage: "field holding the row id (null, empty and #N ids are bad_id rows; a repeated id is a duplicate_id row)", DefaultText: "id, else _id, else #INDEX"},
		&cli.StringFlag{Name: "prefix", Usage: `text put in front of every ` + what + `, e.g. "search_document: "`},
		&cli.BoolFlag{Name: "skip-empty", Usage: "send empty or whitespace-only texts to the errors file"},
	}
}

// fileFlagUses are the job commands' flags that name files besides the
// inputs, the model, -o and --errors, and whether the command writes them.
var fileFlagUses = []struct {
	name  string
	write bool
}{{"previous", false}, {"calibration", false}, {"deleted", true}, {"grammar", false}, {"json-schema", false}, {"queries", false}, {"corpus", false}, {"run", false}}

// fileFlags returns the files the command's flags of fileFlagUses name.
func fileFlags(c *cli.Context) []files.PathUse {
	var u []files.PathUse
	for _, f := range fileFlagUses {
		if !c.IsSet(f.name) {
			continue
		}
		var paths []string
		switch v := c.Value(f.name).(type) {
		case string:
			paths = []string{v}
		case cli.StringSlice:
			paths = v.Value()
		case *cli.StringSlice:
			paths = v.Value()
		}
		if f.write {
			u = append(u, files.Writes("--"+f.name, paths...)...)
		} else {
			u = append(u, files.Reads("--"+f.name, paths...)...)
		}
	}
	return u
}

// jobOptionsFrom reads the common flags; name prefixes messages and defOut
// is the default output's suffix (".vectors.parquet").
func jobOptionsFrom(c *cli.Context, name, defOut string) (job.Options, error) {
	return jobOptionsWith(c, c.Args().Slice(), name, defOut)
}

// jobOptionsWith is jobOptionsFrom with the inputs given (rerank's run,
// queries and corpus files). Like every flag reader it is pure: it checks
// the flags' values and the inputs and returns options; runJob does the
// rest, in its one order.
func jobOptionsWith(c *cli.Context, inputs []string, name, defOut string) (job.Options, error) {
	o := job.Options{
		Inputs: inputs, Model: c.String("model"), Out: c.String("output"), Errors: c.String("errors"),
		BatchTokens: c.Int("batch-tokens"), Workers: c.Int("workers"), Threads: c.Int("threads"),
		Deadline: c.Duration("deadline"), Resume: c.Bool("resume"), Version: version, Force: c.Bool("force"),
		BufferBytes: int64(c.Int("buffer-mb")) << 20, DeadlineStretch: c.Int("deadline-stretch"), Chaos: c.String("chaos"),
		CheckpointDir: c.String("checkpoint-dir"), CheckpointEvery: c.Duration("checkpoint-every"), DrainTimeout: c.Duration("drain"),
	}
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = -1 // by rows only (0 would mean the default)
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = -1 // no wait (0 would mean the default)
	}
	if o.Model == "" {
		// Checked here rather than with Required, for a message that says what to give.
		return o, usagef("%s: no model (give -m MODEL.gguf)", name)
	}
	if err := checkTuning(c, name, &o); err != nil {
		return o, err
	}
	var err error
	if o.Inputs, err = expandObjects(c.Context, name+": input", o.Inputs); err != nil {
		return o, err
	}
	if err := checkInputs(name, o.Inputs); err != nil {
		return o, err
	}
	if o.Out == "" {
		o.Out = defaultOutput(o.Inputs, defOut)
	}
	if err := shardOptionsFrom(c, name, &o); err != nil {
		return o, err
	}
	if _, err := maxErrorRate(c, name); err != nil {
		return o, err
	}
	if err := checkModelFlags(c, name); err != nil { // --quantize, --min-cosine (models.go)
		return o, err
	}
	o.Files = fileFlags(c)              // checked against -o and --errors by job.Options.Check
	return o, checkStatusFlags(c, name) // status.go
}

// checkTuning reads and checks the workers, batches, buffers, deadlines and
// chaos drills of a job command.
func checkTuning(c *cli.Context, name string, o *job.Options) error {
	for flag, v := range map[string]int{"batch-tokens": o.BatchTokens, "workers": o.Workers, "threads": o.Threads, "buffer-mb": c.Int("buffer-mb")} {
		if v < 0 {
			return usagef("%s: --%s %d must not be negative", name, flag, v)
		}
	}
	switch {
	case o.Deadline <= 0:
		return usagef("%s: --deadline must be positive", name)
	case c.Int("buffer-mb") > 1<<20:
		return usagef("%s: --buffer-mb %d is more than 1 TiB", name, c.Int("buffer-mb"))
	case o.DeadlineStretch < 1:
		return usagef("%s: --deadline-stretch %d must be at least 1", name, o.DeadlineStretch)
	case c.Duration("checkpoint-every") < 0:
		return usagef("%s: --checkpoint-every must not be negative", name)
	case c.Duration("drain") < 0:
		return usagef("%s: --drain must not be negative", name)
	}
	switch per := c.Duration("deadline-per-token"); {
	case per < 0:
		return usagef("%s: --deadline-per-token must not be negative", name)
	case per == 0:
		o.DeadlinePerToken = -1 // none (0 would mean the default)
	default:
		o.DeadlinePerToken = per
	}
	return checkChaos(c, name)
}

// shardOptionsFrom reads --shard: the part of the inputs, and the part's
// output and errors files.
func shardOptionsFrom(c *cli.Context, name string, o *job.Options) error {
	s := c.String("shard")
	if s == "" {
		return nil
	}
	i, n, err := parseShard(s, os.Getenv)
	if err != nil {
		return usageError{fmt.Errorf("%s: %w", name, err)}
	}
	o.Read.Shard, o.Read.Shards = i, n
	o.Out = job.ParseDest(o.Out).Shard(i, n).Name() // a table's shard writes its own table (docs/postgres.md)
	if o.Errors != "" {                             // each shard its own errors file, like its output
		o.Errors = output.ShardPath(o.Errors, i, n)
	}
	for _, in := range o.Inputs {
		if in == "-" {
			return usagef("%s: --shard reads its part of regular files; it cannot split standard input", name)
		}
	}
	return nil
}

// readOptionsFrom fills the options that make documents out of rows.
func readOptionsFrom(c *cli.Context, o *job.Options) {
	o.Read.TextFields = c.StringSlice("text-field")
	o.Read.IDField = c.String("id-field")
	o.Read.Prefix = c.String("prefix")
	o.Read.SkipEmpty = c.Bool("skip-empty")
}

// checkInputs refuses missing inputs and directories before anything starts.
func checkInputs(name string, inputs []string) error {
	if len(inputs) == 0 {
		return usagef("%s: no input files (give Parquet, Arrow, JSONL, CSV or TSV files, or - for stdin)", name)
	}
	for _, in := range inputs {
		if in == "-" || objstore.IsURL(in) { // objects: checked by expandObjects
			continue
		}
		if st, err := os.Stat(in); err != nil {
			return usagef("%s: input %s: %v", name, in, err)
		} else if st.IsDir() {
			return usagef("%s: input %s is a directory", name, in)
		}
	}
	return nil
}

// defaultOutput is the first input's base name with suffix.
func defaultOutput(inputs []string, suffix string) string {
	first := inputs[0]
	if first == "-" {
		first = "stdin"
	}
	base := filepath.Base(first)
	for _, ext := range []string{".gz", ".jsonl", ".ndjson", ".json", ".parquet", ".pq", ".csv", ".tsv", ".arrow"} {
		base = strings.TrimSuffix(base, ext)
	}
	return base + suffix
}

// parseShard reads "I/N" with 0 ≤ I < N, or "auto/N" with I from the
// scheduler's environment: JOB_COMPLETION_INDEX (a Kubernetes Indexed
// Job), else SLURM_ARRAY_TASK_ID (a Slurm array). N is always given: a
// resubmitted single Slurm task sees a task count of 1.
func parseShard(s string, getenv func(string) string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	if a == "auto" {
		for _, v := range []string{"JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID"} {
			if a = getenv(v); a != "" {
				break
			}
		}
		if a == "" {
			return 0, 0, fmt.Errorf("--shard %q: neither JOB_COMPLETION_INDEX nor SLURM_ARRAY_TASK_ID is set", s)
		}
	}
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("--shard %q: want I/N with 0 ≤ I < N, e.g. 0/4 (I=%q)", s, a)
	}
	return i, n, nil
}

// words name a job kind's records and items in its summary.
type words struct {
	rows  string // "rows" (input records); "" = "rows"
	verb  string // "embedding"
	done  string // "embedded"
	items string // "chunks"
	unit  string // what the items are ("chunks", "pairs") in messages
}

// jobSpec is a job command's job, as its flags made it.
type jobSpec struct {
	name  string       // the command ("embed"), for messages
	opts  *job.Options // the kind's common options, which runJob completes
	check func() error // the kind's Check (job.EmbedOptions.Check)
	words words
	run   func(context.Context) (job.Summary, error)
}

// runJob runs a job in the one order of every job command, its flags read
// and checked (jobOptionsFrom): the options and outputs checked against the
// file system (the kind's Check), the model resolved and opened once, the
// quantized variant made if asked, the status port bound, then the work.
// So a mistake in what was asked costs no worker, port or cache entry.
func runJob(c *cli.Context, j jobSpec) error {
	log := newJobLog(c.App.ErrWriter, c.String("log-format"))
	if err := prepare(c, j); err != nil {
		if errors.Is(err, job.ErrShardDone) {
			log.note(slog.LevelInfo, fmt.Sprintf("nothing to do: %v", err))
			return nil
		}
		return err
	}
	return serveJob(c, j.opts, j.words, log, j.run)
}

// prepare does what runJob does before the work: check, open the model,
// find the worker's library, quantize, bind the status port.
func prepare(c *cli.Context, j jobSpec) error {
	o := j.opts
	if err := j.check(); err != nil {
		return err
	}
	m, err := openModel(c.Bool("allow-degraded"), o.Model)
	if err != nil {
		return err
	}
	w, err := workersFor(c, m.Format) // workers.go
	if err != nil {
		return err
	}
	o.Worker, o.Env = w.command, append(o.Env, w.env...)
	if o.Artifact, err = quantized(c, m, o); err != nil { // --quantize (models.go)
		return err
	}
	o.Model = o.Artifact.Path
	srv, err := listenStatus(c, j.name) // --status-addr (status.go)
	if srv != nil {
		o.Observer = srv
	}
	return err
}

// openModel opens the model -m names (a path, a cached name or a digest
// prefix), once for the whole run. A degraded cached variant is refused
// unless allowDegraded.
func openModel(allowDegraded bool, ref string) (*artifact.Artifact, error) {
	m, err := artifact.OpenWith(ref, artifact.Options{AllowDegraded: allowDegraded, Version: version})
	switch {
	case errors.Is(err, artifact.ErrDegraded), artifact.Unusable(err):
		return nil, &job.ConfigError{Err: err}
	case err != nil:
		return nil, err
	}
	return m, nil
}

// serveJob runs a prepared job with progress on stderr and the summary on
// stdout, and turns its outcome into the error exitCode maps. With
// --status-addr (o.Observer) it serves health and metrics meanwhile
// (status.go).
func serveJob(c *cli.Context, o *job.Options, w words, log jobLog, run func(context.Context) (job.Summary, error)) error {
	ctx, quiet, stdout := c.Context, c.Bool("quiet"), c.App.Writer
	o.Stats = &pipeline.Stats{}
	prog := newProgress(c.App.ErrWriter, o.Stats, w, quiet)
	log = prog.logThrough(log) // a record clears the progress line first
	o.Logger = log.Logger
	st := jobStatus{linger: c.Duration("status-linger")}
	st.srv, _ = o.Observer.(*status.Server)
	prog.log, prog.every = log, c.Duration("progress-every")
	o.Started = prog.start
	st.start(o, log)
	release := drainOnInterrupt(ctx, o, log)
	sum, err := run(ctx)
	release()
	prog.stop()
	err = outcome(ctx, o, w, sum, err, quiet, c.Float64("max-error-rate"), stdout, log)
	st.finish(err)
	if log.json && err != nil && !isLogged(err) && exitCode(ctx, err) != exitInterrupted {
		log.Error(err.Error(), "exit_code", exitCode(ctx, err))
		err = loggedError{err}
	}
	return st.end(ctx, err, log)
}

// outcome prints the summary and turns the job's outcome into the error
// exitCode maps.
func outcome(ctx context.Context, o *job.Options, w words, sum job.Summary, err error, quiet bool, maxErrorRate float64, stdout io.Writer, log jobLog) error {
	if errors.Is(err, job.ErrShardDone) {
		log.note(slog.LevelInfo, fmt.Sprintf("nothing to do: %v", err))
		return nil
	}
	if !quiet && sum.Started && log.json {
		log.summary(sum)
	}
	if !quiet && sum.Started {
		printSummary(stdout, sum, w, err == nil)
	}
	var ie *job.InterruptedError
	switch {
	case errors.As(err, &ie):
		interruptNote(log, ie.Interrupt, o)
		return err
	case err != nil && isCanceled(err) && (ctx.Err() != nil || interrupted(ctx)):
		switch {
		case sum.Interrupt != nil:
			interruptNote(log, *sum.Interrupt, o)
		case sum.Resumable:
			log.note(slog.LevelWarn, fmt.Sprintf("interrupted; run again with --resume to continue (%s)", job.ParseDest(o.Out)))
		default:
			log.note(slog.LevelWarn, "interrupted before any output was written")
		}
		return err
	case err != nil:
		return err
	case sum.Job.Read == 0 && sum.Job.FileErrors == 0:
		log.note(slog.LevelWarn, fmt.Sprintf("warning: the input held no records; %s is empty", job.ParseDest(o.Out)))
	case withinErrorRate(sum.Job.Read, sum.Job.Failed, sum.Job.FileErrors, maxErrorRate):
		log.note(slog.LevelWarn, fmt.Sprintf("%d of %d %s in the errors file (%s), within --max-error-rate %g",
			sum.Job.Failed, sum.Job.Read, cmp.Or(w.rows, "rows"), sum.Errors, maxErrorRate))
	case sum.Job.Failed > 0 || sum.Job.FileErrors > 0:
		return partialError{partialMessage(sum, w)}
	}
	return nil
}

// partialMessage says what of a job is in its errors file: records failed
// whole and, when some were done in part, the items written and failed.
func partialMessage(sum job.Summary, w words) string {
	j, rows := sum.Job, cmp.Or(w.rows, "rows")
	if j.Partial == 0 {
		return fmt.Sprintf("%d of %d %s could not be %s and %d input files failed; see %s",
			j.Failed, j.Read, rows, w.done, j.FileErrors, sum.Errors)
	}
	return fmt.Sprintf("%d of %d %s have errors (%d of them in part only); %d %s were %s and written, %d are in the errors file; %d input files failed; see %s",
		j.Failed, j.Read, rows, j.Partial, j.Items, cmp.Or(w.unit, "items"), w.done, j.ItemFailures, j.FileErrors, sum.Errors)
}

// maxErrorRate is the --max-error-rate of command name, a share between 0 and 1.
func maxErrorRate(c *cli.Context, name string) (float64, error) {
	r := c.Float64("max-error-rate")
	if r < 0 || r > 1 {
		return r, usagef("%s: --max-error-rate %g: want a share between 0 and 1", name, r)
	}
	return r, nil
}

// withinErrorRate tells whether --max-error-rate tolerates a finished job's
// rows in errors (exit 0 instead of 3): some rows failed, no input file did,
// and the failed rows are at most rate × the rows read.
func withinErrorRate(read, failed, fileErrors int64, rate float64) bool {
	return fileErrors == 0 && failed > 0 && float64(failed) <= rate*float64(read)
}

func printSummary(w io.Writer, s job.Summary, words words, done bool) {
	if s.Chaos != "" {
		fmt.Fprintf(w, "CHAOS DRILLS   %s were armed in this run's workers: not a production run\n", s.Chaos)
	}
	j := s.Job
	rows := cmp.Or(words.rows, "rows")
	fmt.Fprintf(w, "%-14s %d = %d %s + %d in errors", rows+" read", j.Read, j.OK, words.done, j.Failed)
	if j.Partial > 0 {
		fmt.Fprintf(w, " (%d of them in part: their other %s are written)", j.Partial, cmp.Or(words.unit, "items"))
	}
	fmt.Fprintln(w)
	if done && j.Read == 0 && j.FileErrors == 0 {
		fmt.Fprintf(w, "input          empty: no records\n")
	}
	if s.Run != s.Job {
		fmt.Fprintf(w, "resumed        %d of them in this run, the rest by the interrupted run (its %d output rows kept)\n", s.Run.Read, s.ResumedRows)
	}
	if in := s.Interrupt; in != nil {
		fmt.Fprintf(w, "interrupted    %s\n", interruptLine(*in))
	}
	if j.FileErrors > 0 {
		fmt.Fprintf(w, "files failed   %d (see the errors file)\n", j.FileErrors)
	}
	secs := s.Elapsed.Seconds()
	if s.Items != nil {
		fmt.Fprintf(w, "%-14s %s\n", s.Items.Label, s.Items.Text)
	} else if j.ItemFailures > 0 {
		fmt.Fprintf(w, "%-14s %d (+ %d in errors)\n", words.items, j.Items, j.ItemFailures)
	} else {
		fmt.Fprintf(w, "%-14s %d\n", words.items, j.Items)
	}
	fmt.Fprintf(w, "tokens         %d (%.0f tokens/s over %.1fs)\n", j.Tokens, float64(s.Run.Tokens)/max(secs, 1e-9), secs)
	fmt.Fprintf(w, "restarts       %s, %s\n", plural(s.Restarts, "worker restart"), plural(s.Quarantined, "quarantined model"))
	for _, l := range s.Lines {
		fmt.Fprintf(w, "%-14s %s\n", l.Label, l.Text)
	}
	printObjectStore(w)
	if s.DeadlineStretch > 1 {
		fmt.Fprintf(w, "deadlines      stretched up to %d× after requests timed out (--deadline-stretch)\n", s.DeadlineStretch)
	}
	if done {
		fmt.Fprintf(w, "output         %s\nerrors         %s\n", s.Out, s.Errors)
	}
}
