// Package cli is synapse's command line: every subcommand, its flags and
// checks, and the one mapping of errors to exit codes. It runs in the module
// (the main process) and, for `synapse worker`, in each worker process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/pgstore"
	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/convert"
	"github.com/synapse-embed/synapse/pipeline/job"
	"github.com/synapse-embed/synapse/pipeline/search"
	"github.com/synapse-embed/synapse/supervise"
)

// version is set at build time with
// -ldflags "-X github.com/synapse-embed/synapse/cli.version=…".
var version = "0.1.0-dev"

// Exit codes, shared by every command (see exitCode).
const (
	exitOK          = 0
	exitFatal       = 1
	exitUsage       = 2
	exitPartial     = 3 // finished, with rows in the errors output
	exitInterrupted = 130
)

// commands lists every subcommand in the order help shows them; each is
// built by its file's constructor (embed.go: embedCommand).
func commands() []*cli.Command {
	return []*cli.Command{
		completionCommand(),
		embedCommand(),
		evalCommand(),
		genCorpusCommand(),
		genModelCommand(),
		generateCommand(),
		inspectCommand(),
		manCommand(),
		mergeCommand(),
		modelsCommand(),
		rerankCommand(),
		searchCommand(),
		tokenizeCommand(),
		versionCommand(),
		workerCommand(),
	}
}

// usageError marks an error as the user's (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// partialError reports a run that finished with rows in the errors output (exit 3).
type partialError struct{ msg string }

func (e partialError) Error() string { return e.msg }

func newApp(stdout, stderr io.Writer) *cli.App {
	cmds := commands()
	for _, c := range cmds {
		if c.OnUsageError == nil {
			c.OnUsageError = flagUsageError
		}
	}
	cli.VersionPrinter = func(c *cli.Context) { printVersion(c.App.Writer, "", "") } // --version as `synapse version`
	return &cli.App{
		Name:                 "synapse",
		Usage:                "batch inference over corpora (embed, rerank, generate, search, eval) with llama.cpp and ONNX Runtime in supervised worker processes",
		Version:              version,
		Commands:             cmds,
		Action:               rootAction, // no command: help; an unknown one: a usage error
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
		ExitErrHandler: func(*cli.Context, error) {}, // exitCode decides
	}
}

// Run executes the CLI with args (including the program name) and returns
// the exit code. The caller owns ctx's cancellation; a ctx from
// WithSignals lets the first SIGINT or SIGTERM drain a job (its finished
// rows kept, exit 130, resumable) and the second stop it at once.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	err := app.RunContext(ctx, flagsFirst(app, args))
	code := exitCode(ctx, err)
	if err != nil && code != exitOK && code != exitInterrupted && !isLogged(err) { // the job said it was interrupted, or logged err
		fmt.Fprintf(stderr, "synapse: %s\n", scrubSecrets(err.Error()))
	}
	return code
}

// exitCode maps an error to the process exit code; it is the only place that
// does (the table is in README.md, "Exit codes"):
//
//	0    success
//	3    the run finished with rows in the errors file
//	2    usage or configuration error: do not retry unchanged
//	130  interrupted (Ctrl-C, SIGTERM; drained or stopped at once): run again with --resume
//	1    any other failure (a quarantined model, I/O): retrying may help
func exitCode(ctx context.Context, err error) int {
	var ue usageError
	var ce *job.ConfigError
	var pe partialError
	var ec cli.ExitCoder
	var ie *job.InterruptedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ie), isCanceled(err) && (ctx.Err() != nil || interrupted(ctx)):
		return exitInterrupted
	case errors.As(err, &ue), errors.As(err, &ce), permanent(err):
		return exitUsage
	case errors.As(err, &ec):
		// Only the CLI framework returns ExitCoders (unknown command or
		// help topic): those are usage errors.
		return exitUsage
	case errors.As(err, &pe):
		return exitPartial
	}
	return exitFatal
}

// permanent reports a failure that running again unchanged cannot mend,
// found below the job's own checks: an unusable runtime directory or model
// cache (one another user could change), a written
// file that clashes with another, an output another run is writing (running
// again after that run would overwrite its files), a file over its size
// limit or not a regular file (readlimit), an input search cannot use, a
// model directory the converter refuses.
func permanent(err error) bool {
	return errors.Is(err, supervise.ErrRuntimeDir) || errors.Is(err, supervise.ErrSocketPathTooLong) ||
		errors.Is(err, files.ErrPathClash) || errors.Is(err, output.ErrInUse) || errors.Is(err, readlimit.ErrTooLarge) ||
		errors.Is(err, readlimit.ErrNotRegular) || errors.Is(err, files.ErrUntrusted) || errors.Is(err, search.ErrInput) ||
		errors.Is(err, pgstore.ErrRefused) || errors.Is(err, pgstore.ErrInUse) || errors.Is(err, convert.ErrRefused)
}

// isCanceled reports an error that is the run's cancellation itself.
func isCanceled(err error) bool { return errors.Is(err, context.Canceled) }

// flagsFirst moves a subcommand's flags before its positional arguments, so
// that `synapse embed corpus.jsonl -m model.gguf` works: the CLI library
// stops parsing flags at the first argument. "--" ends the flags. A
// command with subcommands (`synapse models add`) has its subcommand's
// flags moved.
func flagsFirst(app *cli.App, args []string) []string {
	if len(args) < 3 || args[len(args)-1] == completionFlag { // urfave/cli looks for it last
		return args
	}
	cmd := app.Command(args[1])
	if cmd == nil {
		return args
	}
	start := 2
	for _, sub := range cmd.Subcommands {
		if sub.HasName(args[2]) {
			cmd, start = sub, 3
		}
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var flags, rest []string
	for i := start; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			rest = append(rest, args[i:]...)
			i = len(args)
		case len(a) > 1 && a[0] == '-':
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && takesValue[name] && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		default:
			rest = append(rest, a)
		}
	}
	out := append(append([]string(nil), args[:start]...), flags...)
	return append(out, rest...)
}
