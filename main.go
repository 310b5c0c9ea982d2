// Command synapse runs batch inference jobs over corpora — embed, rerank,
// generate, search, eval — with llama.cpp and ONNX Runtime in supervised
// worker processes. The command line itself lives in package cli.
package main

import (
	"context"
	"os"

	"github.com/synapse-embed/synapse/cli"
)

func main() {
	// The first SIGINT, SIGTERM or SIGQUIT drains a job (its finished rows
	// kept, exit 130, resumable) or stops another command; a second stops
	// at once (see cli.WithSignals).
	ctx, stop := cli.WithSignals(context.Background())
	code := cli.Run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
