package cli

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

// workerCommand is the hidden command a supervised worker process runs.
func workerCommand() *cli.Command {
	return &cli.Command{
		Name:   "worker",
		Usage:  "serve protocol v1 requests for a supervising synapse process (internal)",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "the module's listening Unix socket (required)"},
			&cli.StringFlag{Name: "nonce", Usage: "spawn nonce to present in HELLO (required)"},
			llamaLibFlag(),
			&cli.StringFlag{Name: "llama-log", Usage: "llama.cpp log level on stderr: debug, info, warn, error, none", Value: "warn", EnvVars: []string{"SYNAPSE_LLAMA_LOG"}},
			ortLibFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.String("socket") == "" || c.String("nonce") == "" {
				return usagef("worker: --socket and --nonce are required (the module passes them)")
			}
			return runWorker(c.Context, workerConfig{
				socket: c.String("socket"), nonce: c.String("nonce"),
				llamaLib: c.String("llama-lib"), llamaLog: c.String("llama-log"), ortLib: c.String("ort-lib"),
				id: os.Getenv("SYNAPSE_WORKER_ID"), chaos: os.Getenv("SYNAPSE_CHAOS"),
				stderr: c.App.ErrWriter,
			})
		},
	}
}

type workerConfig struct {
	socket, nonce, llamaLib, llamaLog, ortLib, id, chaos string
	stderr                                               io.Writer
}

// runWorker connects to the module, handshakes and serves until SHUTDOWN or
// the end of the connection. The module owns the worker's lifecycle: SIGINT
// is ignored, and an abort inside llama.cpp kills the process by SIGABRT.
// The worker serves GGUF models with llama.cpp and ONNX models with ONNX
// Runtime; each library is loaded on the first LOAD of its format, so a
// worker needs only the libraries of the models it loads.
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
	eng := newWorkerEngine(cfg, log)
	defer eng.Close()
	extensions := engine.Extensions(eng)
	if chaos.OldWorker {
		extensions = nil
	}
	nc, err := engine.DialModule(cfg.socket) // refuses a listener that is not our module
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
	log.Info("serving", "engines", eng.Info().Version, "max_frame", conn.MaxFrame())
	return serveUntilDone(ctx, nc, conn, eng, engine.ServeOptions{Log: log, Chaos: chaos})
}

// newWorkerEngine returns the worker's engine: llama.cpp for gguf, ONNX
// Runtime for onnx, the static engine for static models, each opened on
// first use. Library locations not given
// are looked for in the cache `make setup` fills, beside the executable or
// in the working directory.
func newWorkerEngine(cfg workerConfig, log *slog.Logger) *engine.Mux {
	mux := engine.NewMux(
		engine.MuxEngine{Format: engine.FormatGGUF, Name: "llama.cpp " + engine.LlamaRelease, Open: func() (engine.Engine, error) {
			lib, err := findLib(engine.LlamaLib, cfg.llamaLib)
			if err != nil {
				return nil, err
			}
			return engine.OpenLlama(engine.LlamaOptions{LibDir: lib.Path, Log: cfg.stderr, LogLevel: cfg.llamaLog})
		}},
		engine.MuxEngine{Format: engine.FormatONNX, Name: "onnxruntime " + engine.ORTRelease, Open: func() (engine.Engine, error) {
			lib, err := findLib(engine.ORTLib, cfg.ortLib)
			if err != nil {
				return nil, err
			}
			return engine.OpenONNX(engine.ONNXOptions{Lib: lib.Path})
		}},
		engine.MuxEngine{Format: engine.FormatStatic, Name: engine.StaticVersion, Open: func() (engine.Engine, error) { return engine.NewStatic(), nil }},
	)
	mux.OnOpen = func(format string, info wire.EngineInfo) {
		log.Info("engine opened", "format", format, "engine", info.Name, "version", info.Version, "build_flags", info.BuildFlags)
	}
	return mux
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
