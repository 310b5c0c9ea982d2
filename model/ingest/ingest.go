// Package ingest adds models to the model cache (package modelcache). A
// model is validated before its entry exists: in the module (GGUF header,
// tensor directory against the file size, the tokenizer) and in a
// supervised worker, which LOADs it and embeds, reranks or generates once.
// Quantize has a worker run llama.cpp's quantizer (QUANTIZE, a protocol
// extension) and then measures, through workers, what the quantized variant
// costs in quality and gains in speed against its source.
//
// Every worker runs under package supervise: a crash or a hang costs that
// worker, and the operation fails with a clear error and leaves no entry.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/supervise"
)

// Options configures the workers and where entries go.
type Options struct {
	Store *modelcache.Store
	// Worker is the worker command ("/path/to/synapse", "worker"); the
	// pool appends --socket and --nonce. Env is added to its environment,
	// which is the module's without SYNAPSE_CHAOS.
	Worker []string
	Env    []string
	// Chaos arms the workers' fault drills (SYNAPSE_CHAOS syntax, see
	// engine.ParseChaos): for tests and drills only.
	Chaos string
	// Threads is llama.cpp's thread count in the worker (0: all cores).
	Threads int
	// Version is the synapse version recorded in entries.
	Version string
	// Format is what a Hugging Face safetensors directory is converted to
	// (convert.FormatONNX, the default, or convert.FormatGGUF).
	Format string
	// Progress, if set, receives one line per step ("validating …").
	Progress func(string)
	// Pool tunes the worker pool (timeouts, logger); Command, Env and
	// Workers are set from the fields above.
	Pool supervise.Config
	// RequestTimeout bounds each validation or sample request (default 5m).
	RequestTimeout time.Duration
}

// ErrInvalid marks a model that failed validation; nothing was added.
var ErrInvalid = errors.New("not a usable model")

func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, args...))
	}
}

func (o *Options) threads() int {
	if o.Threads > 0 {
		return o.Threads
	}
	return runtime.NumCPU()
}

// session is one command's worth of work: one worker pool, started on first
// use and closed at the end.
type session struct {
	o    Options
	pool *supervise.Pool
}

func newSession(o Options) (*session, error) {
	if o.Store == nil {
		return nil, errors.New("ingest: no store")
	}
	if len(o.Worker) == 0 {
		return nil, errors.New("ingest: no worker command")
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 5 * time.Minute
	}
	return &session{o: o}, nil
}

// workers returns the session's pool, starting it on first use.
func (s *session) workers(ctx context.Context) (*supervise.Pool, error) {
	if s.pool != nil {
		return s.pool, nil
	}
	cfg := s.o.Pool
	cfg.Command, cfg.Env, cfg.Workers = s.o.Worker, slices.Clone(s.o.Env), 1
	cfg.BaseEnv = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SYNAPSE_CHAOS=") })
	if s.o.Chaos != "" {
		cfg.Env = append(cfg.Env, "SYNAPSE_CHAOS="+s.o.Chaos)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p, err := supervise.NewPool(ctx, cfg)
	var se *supervise.StartError
	if errors.As(err, &se) && strings.TrimSpace(se.LogTail) != "" {
		return nil, fmt.Errorf("ingest: start a worker: %w; it said: %s", err, lastLine(se.LogTail))
	}
	if err != nil {
		return nil, fmt.Errorf("ingest: start a worker: %w", err)
	}
	s.pool = p
	return p, nil
}

// lastLine is the last non-empty line of a worker's log tail.
func lastLine(tail string) string {
	lines := strings.Split(strings.TrimSpace(tail), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func (s *session) close() {
	if s.pool != nil {
		s.pool.Close()
	}
}

// Add validates the model file at path and adds it to the store under name
// (the model's general.name, or the file's name, when empty). A model whose
// digest is cached already is returned with existed true, whatever its
// name.
func Add(ctx context.Context, path, name string, o Options) (e modelcache.Entry, existed bool, err error) {
	s, err := newSession(o)
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	defer s.close()
	return s.add(ctx, path, name)
}

// describe fills the entry fields that come from the model's metadata and
// its width.
func describe(a *artifact.Artifact, kind string, dims int) modelcache.Entry {
	q, file := "unknown", modelcache.ModelFile
	switch {
	case a.ONNX != nil:
		q, file = a.ONNX.Precision(), modelcache.ONNXFile
	case a.GGUF != nil:
		if ft, ok := a.GGUF.FileType(); ok {
			q = ft.String()
		}
	}
	return modelcache.Entry{Digest: a.Digest, Size: a.Size, File: file, Architecture: a.Arch,
		Kind: kind, Dims: dims, Context: a.ContextLength, Quantization: q, Added: time.Now().UTC()}
}
