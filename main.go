// Command synapse runs batch embedding jobs over corpora with llama.cpp in
// supervised worker processes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// Exit codes, shared by every command (see exitCode).
const (
	exitOK          = 0
	exitFatal       = 1
	exitUsage       = 2
	exitPartial     = 3 // finished, with rows in the errors output
	exitInterrupted = 130
)

// commands holds every subcommand; each cmd_*.go file adds its own in init.
var commands []*cli.Command

func register(c *cli.Command) { commands = append(commands, c) }

// usageError marks an error as the user's (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// partialError reports a run that finished with rows in the errors output (exit 3).
type partialError struct{ msg string }

func (e partialError) Error() string { return e.msg }

func newApp(stdout, stderr io.Writer) *cli.App {
	cmds := append([]*cli.Command(nil), commands...)
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name < cmds[j].Name })
	for _, c := range cmds {
		if c.OnUsageError == nil {
			c.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usageError{err} }
		}
	}
	return &cli.App{
		Name:                 "synapse",
		Usage:                "batch embedding, reranking and generation with llama.cpp in supervised workers",
		Version:              version,
		Commands:             cmds,
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
		ExitErrHandler: func(*cli.Context, error) {}, // exitCode decides
	}
}

// run executes the CLI with args (including the program name) and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := newApp(stdout, stderr).RunContext(ctx, args)
	code := exitCode(ctx, err)
	if err != nil && code != exitOK {
		fmt.Fprintf(stderr, "synapse: %v\n", err)
	}
	return code
}

// exitCode maps an error to the process exit code; it is the only place that does.
func exitCode(ctx context.Context, err error) int {
	var ue usageError
	var pe partialError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return exitInterrupted
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &pe):
		return exitPartial
	}
	var ce cli.ExitCoder
	if errors.As(err, &ce) {
		// Only the CLI framework returns ExitCoders (unknown command or
		// help topic): those are usage errors.
		return exitUsage
	}
	return exitFatal
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
