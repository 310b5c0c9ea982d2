package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/dataio"
	"github.com/synapse-embed/synapse/engine"
	"github.com/synapse-embed/synapse/job"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/supervise"
	"github.com/synapse-embed/synapse/wire"
)

func init() {
	register(&cli.Command{
		Name:      "embed",
		Usage:     "embed every document of Parquet or JSONL files into an Arrow (or Parquet) file of vectors",
		ArgsUsage: "INPUT... (Parquet, JSONL, .jsonl.gz, or - for stdin)",
		Flags:     embedFlags(),
		Action: func(c *cli.Context) error {
			o, err := embedOptionsFrom(c)
			if err != nil {
				return err
			}
			return runEmbed(c.Context, o, c.App.Writer, c.App.ErrWriter, c.Bool("quiet"))
		},
	})
}

func embedFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "GGUF embedding model (required)"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output file: .arrow (Arrow IPC) or .parquet", DefaultText: "FIRST_INPUT.vectors.arrow"},
		&cli.StringFlag{Name: "errors", Usage: "errors file, JSON Lines", DefaultText: "OUTPUT.errors.jsonl"},
		&cli.StringSliceFlag{Name: "text-field", Usage: "field(s) holding the text; several are joined with a newline", DefaultText: "text"},
		&cli.StringFlag{Name: "id-field", Usage: "field holding the document id", DefaultText: "id, else _id, else the row number"},
		&cli.StringFlag{Name: "prefix", Usage: `text put in front of every document, e.g. "search_document: "`},
		&cli.BoolFlag{Name: "skip-empty", Usage: "send empty or whitespace-only texts to the errors file instead of embedding them"},
		&cli.IntFlag{Name: "chunk-tokens", Usage: "tokens per chunk, special tokens excluded", DefaultText: "the model's context minus its special tokens"},
		&cli.IntFlag{Name: "overlap", Usage: "tokens shared by consecutive chunks of a document"},
		&cli.IntFlag{Name: "batch-tokens", Usage: "token budget of one request to a worker", DefaultText: "4 × the chunk size"},
		&cli.IntFlag{Name: "workers", Usage: "worker processes", DefaultText: "from the core count"},
		&cli.IntFlag{Name: "threads", Usage: "llama.cpp threads per worker", DefaultText: "cores / workers"},
		&cli.StringFlag{Name: "pooling", Usage: "mean, cls or last", DefaultText: "the model's own"},
		&cli.BoolFlag{Name: "no-normalize", Usage: "keep vectors as pooled instead of L2-normalizing them"},
		&cli.IntFlag{Name: "dims", Usage: "keep the first K dimensions of each vector and re-normalize (Matryoshka models)", DefaultText: "all"},
		&cli.IntFlag{Name: "buffer-mb", Value: pipeline.DefaultInFlightBytes >> 20, Usage: "MiB of document text held between reading and writing; bounds the module's memory with long documents"},
		&cli.DurationFlag{Name: "deadline", Value: 60 * time.Second, Usage: "base deadline of one request (--deadline-per-token is added); a worker past it is killed"},
		&cli.DurationFlag{Name: "deadline-per-token", Value: 20 * time.Millisecond, Usage: "added to --deadline for every token of a request (0: nothing)"},
		&cli.IntFlag{Name: "deadline-stretch", Value: pipeline.DefaultMaxPatience, Usage: "after a request times out, later ones get twice the deadline, up to this many times (1: never); a busy machine slows the run instead of failing it"},
		&cli.BoolFlag{Name: "resume", Usage: "continue an interrupted run with the same output instead of starting over"},
		&cli.StringFlag{Name: "shard", Usage: "I/N: embed only documents whose index ≡ I (mod N); the output name gets .shard-I-of-N"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress and no summary"},
		&cli.StringFlag{Name: "llama-lib", Usage: "directory of llama.cpp's shared libraries", DefaultText: "beside the binary, in $XDG_DATA_HOME or the checkout's .cache (see README)", EnvVars: []string{"SYNAPSE_LLAMA_LIB"}},
	}
}

// embedOptionsFrom turns flags into a job; flag mistakes are usage errors.
func embedOptionsFrom(c *cli.Context) (job.EmbedOptions, error) {
	o := job.EmbedOptions{
		Inputs: c.Args().Slice(), Model: c.String("model"), Out: c.String("output"), Errors: c.String("errors"),
		Read: dataio.ReadOptions{TextFields: c.StringSlice("text-field"), IDField: c.String("id-field"),
			Prefix: c.String("prefix"), SkipEmpty: c.Bool("skip-empty")},
		ChunkTokens: c.Int("chunk-tokens"), Overlap: c.Int("overlap"), BatchTokens: c.Int("batch-tokens"),
		Workers: c.Int("workers"), Threads: c.Int("threads"), Pooling: c.String("pooling"),
		Normalize: !c.Bool("no-normalize"), Dims: c.Int("dims"), Deadline: c.Duration("deadline"),
		Resume: c.Bool("resume"), Version: version, BufferBytes: int64(c.Int("buffer-mb")) << 20,
		DeadlineStretch: c.Int("deadline-stretch"),
	}
	if o.Model == "" {
		// Checked here rather than with Required, for a message that says what to give.
		return o, usagef("embed: no model (give -m MODEL.gguf)")
	}
	if len(o.Inputs) == 0 {
		return o, usagef("embed: no input files (give Parquet or JSONL files, or - for stdin)")
	}
	switch o.Pooling {
	case "", engine.PoolingMean, engine.PoolingCLS, engine.PoolingLast:
	default:
		return o, usagef("embed: --pooling %q: want mean, cls or last", o.Pooling)
	}
	for name, v := range map[string]int{"chunk-tokens": o.ChunkTokens, "overlap": o.Overlap, "batch-tokens": o.BatchTokens,
		"workers": o.Workers, "threads": o.Threads, "dims": o.Dims, "buffer-mb": c.Int("buffer-mb")} {
		if v < 0 {
			return o, usagef("embed: --%s %d must not be negative", name, v)
		}
	}
	if o.Deadline <= 0 {
		return o, usagef("embed: --deadline must be positive")
	}
	if mb := c.Int("buffer-mb"); mb > 1<<20 {
		return o, usagef("embed: --buffer-mb %d is more than 1 TiB", mb)
	}
	if o.DeadlineStretch < 1 {
		return o, usagef("embed: --deadline-stretch %d must be at least 1", o.DeadlineStretch)
	}
	switch per := c.Duration("deadline-per-token"); {
	case per < 0:
		return o, usagef("embed: --deadline-per-token must not be negative")
	case per == 0:
		o.DeadlinePerToken = -1 // none (0 would mean the default)
	default:
		o.DeadlinePerToken = per
	}
	if o.Out == "" {
		first := o.Inputs[0]
		if first == "-" {
			first = "stdin"
		}
		base := filepath.Base(first)
		for _, ext := range []string{".gz", ".jsonl", ".json", ".parquet", ".pq"} {
			base = strings.TrimSuffix(base, ext)
		}
		o.Out = base + ".vectors.arrow"
	}
	if s := c.String("shard"); s != "" {
		i, n, err := parseShard(s)
		if err != nil {
			return o, usageError{err}
		}
		o.Read.Shard, o.Read.Shards = i, n
		o.Out = shardPath(o.Out, i, n)
		if o.Errors != "" { // each shard its own errors file, like its output
			o.Errors = shardPath(o.Errors, i, n)
		}
	}
	for _, in := range o.Inputs {
		if in == "-" {
			continue
		}
		if st, err := os.Stat(in); err != nil {
			return o, usagef("embed: input %s: %v", in, err)
		} else if st.IsDir() {
			return o, usagef("embed: input %s is a directory", in)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return o, fmt.Errorf("embed: find the synapse executable for workers: %w", err)
	}
	o.Worker = []string{self, "worker"}
	lib, err := findLib(engine.LlamaLib, c.String("llama-lib"))
	if err != nil {
		return o, err
	}
	o.Env = append(o.Env, "SYNAPSE_LLAMA_LIB="+lib.Path)
	return o, nil
}

// shardPath inserts ".shard-I-of-N" before path's extension.
func shardPath(path string, i, n int) string {
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s.shard-%d-of-%d%s", strings.TrimSuffix(path, ext), i, n, ext)
}

// parseShard reads "I/N" with 0 ≤ I < N.
func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("embed: --shard %q: want I/N with 0 ≤ I < N, e.g. 0/4", s)
	}
	return i, n, nil
}

// runEmbed runs the job with progress on stderr and the summary on stdout.
func runEmbed(ctx context.Context, o job.EmbedOptions, stdout, stderr io.Writer, quiet bool) error {
	o.Stats = &pipeline.Stats{}
	o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	prog := newProgress(stderr, o.Stats, quiet)
	o.Started = prog.start
	sum, err := job.Embed(ctx, o)
	prog.stop()
	if !quiet && sum.Elapsed > 0 {
		printSummary(stdout, sum, err == nil)
	}
	var qe *supervise.QuarantinedError
	switch {
	case err != nil && ctx.Err() != nil:
		fmt.Fprintf(stderr, "synapse: interrupted; run again with --resume to continue (%s)\n", o.Out)
		return ctx.Err()
	case errors.Is(err, job.ErrOption):
		return usageError{err}
	case errors.As(err, &qe) && qe.Last != nil && qe.Last.Stage == "timeout" && qe.Last.Request == string(wire.TypeEmbedBatch):
		return fmt.Errorf("%w\n(its last requests ran past their deadlines, stretched up to %d×: raise --deadline, --deadline-per-token or --deadline-stretch if the machine is this slow)",
			err, o.DeadlineStretch)
	case errors.Is(err, dataio.ErrResumeMismatch):
		return usageError{fmt.Errorf("%w\n(resume with the interrupted run's inputs and options, or start over without --resume)", err)}
	case err != nil:
		return err
	case sum.Failed > 0 || sum.FileErrors > 0:
		return partialError{fmt.Sprintf("%d of %d rows could not be embedded and %d input files failed; see %s",
			sum.Failed, sum.Read, sum.FileErrors, sum.Errors)}
	}
	return nil
}

func printSummary(w io.Writer, s job.Summary, done bool) {
	secs := s.Elapsed.Seconds()
	fmt.Fprintf(w, "rows read      %d = %d embedded + %d in errors\n", s.Read, s.Embedded, s.Failed)
	if s.FileErrors > 0 {
		fmt.Fprintf(w, "files failed   %d (see the errors file)\n", s.FileErrors)
	}
	fmt.Fprintf(w, "chunks         %d\n", s.Chunks)
	fmt.Fprintf(w, "tokens         %d (%.0f tokens/s over %.1fs)\n", s.Tokens, float64(s.Tokens)/max(secs, 1e-9), secs)
	fmt.Fprintf(w, "restarts       %d worker restarts, %d quarantined models\n", s.Restarts, s.Quarantined)
	if s.DeadlineStretch > 1 {
		fmt.Fprintf(w, "deadlines      stretched up to %d× after requests timed out (--deadline-stretch)\n", s.DeadlineStretch)
	}
	if done {
		fmt.Fprintf(w, "output         %s\nerrors         %s\n", s.Out, s.Errors)
	}
}
