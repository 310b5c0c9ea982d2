package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/engine"
	"github.com/synapse-embed/synapse/wire"
)

// handshakeTimeout bounds the wait for HELLO_ACK.
const handshakeTimeout = 30 * time.Second

func init() {
	register(&cli.Command{
		Name:   "worker",
		Usage:  "serve protocol v1 requests for a supervising synapse process (internal)",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "the module's listening Unix socket (required)"},
			&cli.StringFlag{Name: "nonce", Usage: "spawn nonce to present in HELLO (required)"},
			&cli.StringFlag{Name: "llama-lib", Usage: "directory of the llama.cpp shared libraries", EnvVars: []string{"SYNAPSE_LLAMA_LIB"}},
			&cli.StringFlag{Name: "llama-log", Usage: "llama.cpp log level on stderr: debug, info, warn, error, none", Value: "warn", EnvVars: []string{"SYNAPSE_LLAMA_LOG"}},
		},
		Action: func(c *cli.Context) error {
			if c.String("socket") == "" || c.String("nonce") == "" {
				return usagef("worker: --socket and --nonce are required (the module passes them)")
			}
			return runWorker(c.Context, workerConfig{
				socket: c.String("socket"), nonce: c.String("nonce"),
				llamaLib: c.String("llama-lib"), llamaLog: c.String("llama-log"),
				id: os.Getenv("SYNAPSE_WORKER_ID"), chaos: os.Getenv("SYNAPSE_CHAOS"),
				stderr: c.App.ErrWriter,
			})
		},
	})
}

type workerConfig struct {
	socket, nonce, llamaLib, llamaLog, id, chaos string
	stderr                                       io.Writer
}

// runWorker connects to the module, handshakes and serves until SHUTDOWN or
// the end of the connection. The module owns the worker's lifecycle: SIGINT
// is ignored, and an abort inside llama.cpp kills the process by SIGABRT.
func runWorker(ctx context.Context, cfg workerConfig) error {
	signal.Ignore(os.Interrupt)
	debug.SetTraceback("crash") // a GGML_ASSERT abort dies by SIGABRT, not exit 2
	log := slog.New(slog.NewTextHandler(cfg.stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).
		With("worker", cfg.id, "pid", os.Getpid())
	chaos, err := engine.ParseChaos(cfg.chaos)
	if err != nil {
		return usageError{err}
	}
	if chaos.Active() {
		log.Warn("chaos drills enabled", "drills", chaos.String())
	}
	lib, err := findLib(engine.LlamaLib, cfg.llamaLib)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	eng, err := engine.OpenLlama(engine.LlamaOptions{LibDir: lib.Path, Log: cfg.stderr, LogLevel: cfg.llamaLog})
	if err != nil {
		return err
	}
	defer eng.Close()
	extensions := engine.Extensions(eng)
	if chaos.OldWorker {
		extensions = nil
	}
	nc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: cfg.socket, Net: "unix"})
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	defer nc.Close()
	conn := wire.NewConn(nc)
	nc.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := engine.Handshake(conn, cfg.nonce, eng.Info(), extensions); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	nc.SetDeadline(time.Time{})
	log.Info("serving", "engine", eng.Info().Name, "version", eng.Info().Version, "max_frame", conn.MaxFrame())
	return serveUntilDone(ctx, nc, conn, eng, engine.ServeOptions{Log: log, Chaos: chaos})
}

// serveUntilDone runs engine.Serve and closes the connection when ctx ends
// (SIGTERM), which unblocks Serve's read.
func serveUntilDone(ctx context.Context, nc net.Conn, conn *wire.Conn, eng engine.Engine, opts engine.ServeOptions) error {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			nc.Close()
		case <-done:
		}
	}()
	err := engine.Serve(ctx, conn, eng, opts)
	close(done)
	wg.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("worker: %w", err)
	}
	return err
}
