// Command synapse runs batch inference jobs over corpora — embed, rerank,
// generate, search, eval — with llama.cpp and ONNX Runtime in supervised
// worker processes. The command line itself lives in package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/synapse-embed/synapse/cli"
)

func main() {
	// SIGQUIT too: Go's default (a goroutine dump and exit 2) would read as
	// a usage error to a scheduler. The first signal stops the run cleanly
	// (exit 130, resumable); a second one kills it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT)
	go func() { <-ctx.Done(); stop() }()
	code := cli.Run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
