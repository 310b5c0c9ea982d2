package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/hybridgroup/yzma/pkg/llama"

	"github.com/synapse-embed/synapse/wire"
)

// The llama.cpp build synapse is pinned to (see the Makefile). yzma v1.28.0
// binds this release's C API; other builds may lack symbols or differ in
// struct layouts, so a detected mismatch is refused.
const (
	LlamaRelease    = "v0.5.0"
	LlamaNPMPackage = "@node-llama-cpp/linux-x64@3.22.1"
)

// LlamaOptions configures the llama.cpp engine.
type LlamaOptions struct {
	LibDir   string    // directory holding libllama.so and libggml*.so
	Log      io.Writer // llama.cpp log lines at or above LogLevel go here (nil: discarded)
	LogLevel string    // "debug", "info", "warn" (default), "error" or "none"
}

// Llama is the llama.cpp engine. Create it with OpenLlama; one per process.
//
// LOAD's runtime_config, with zero fields resolved as follows:
//
//	embeddings  true: an embedding/rerank context (EMBED_BATCH, RERANK);
//	            false: a generation context (GENERATE). TOKENIZE works with both.
//	n_ctx       embeddings: min(training context, 2048); generation: min(training context, 4096).
//	            A bidirectional model (BERT) refuses n_ctx above its training context.
//	n_batch     embeddings: n_ctx; generation: min(n_ctx, 512). Must be ≤ n_ctx.
//	n_ubatch    n_batch. Must be ≤ n_batch. One llama.cpp call evaluates at most
//	            n_ubatch tokens, so no single sequence may be longer (bad_request).
//	n_seq_max   embeddings: the largest divisor of n_ubatch up to 64; generation: 1.
//	            Sequences per llama.cpp call; must divide n_ubatch (llama.cpp aborts otherwise).
//	n_threads   llama.cpp's default for the machine. Keep n_threads × workers ≤ cores:
//	            llama.cpp's threads spin, and oversubscription slows it many times over.
//	pooling     "" = the model's own (GGUF <arch>.pooling_type). Needs embeddings: true
//	            unless "" or "none"; "rank" needs a classifier head.
//	vocab_only  (extension) true: load the vocabulary alone (llama.cpp's vocab_only), with
//	            every other field zero. Such a model serves TOKENIZE only; EMBED_BATCH,
//	            RERANK and GENERATE answer unsupported. It loads vocabulary-only GGUFs.
//
// Llama is a Quantizer: QUANTIZE (extension) runs llama_model_quantize with
// its default parameters (output and token-embedding tensors as the file
// type decides, no importance matrix) and the request's ftype and threads.
type Llama struct {
	info   wire.EngineInfo
	models loaded[*llamaModel] // by ref
	closed bool
}

var (
	libOnce sync.Once
	libDir  string
	libInfo wire.EngineInfo
	libErr  error
	logs    logSink
)

// OpenLlama loads the llama.cpp shared libraries from opts.LibDir (once per
// process: a second call must name the same directory) and returns an engine.
func OpenLlama(opts LlamaOptions) (*Llama, error) {
	if opts.LibDir == "" {
		return nil, fmt.Errorf("engine: no llama.cpp library directory given (--llama-lib or SYNAPSE_LLAMA_LIB; `make setup` installs llama.cpp %s from npm %s)", LlamaRelease, LlamaNPMPackage)
	}
	lvl, err := parseLogLevel(opts.LogLevel)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.LibDir)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	libOnce.Do(func() { libInfo, libErr = loadLibrary(dir) })
	if libErr != nil {
		return nil, libErr
	}
	if dir != libDir {
		return nil, fmt.Errorf("engine: llama.cpp already loaded from %s, not %s", libDir, dir)
	}
	logs.set(opts.Log, lvl)
	return &Llama{info: libInfo, models: map[string]*llamaModel{}}, nil
}

// loadLibrary checks the release of the libraries in dir, binds them and
// initialises the backends.
func loadLibrary(dir string) (wire.EngineInfo, error) {
	libDir = dir
	need := fmt.Sprintf("synapse needs llama.cpp release %s (npm %s); run `make setup` or point --llama-lib / SYNAPSE_LLAMA_LIB at it", LlamaRelease, LlamaNPMPackage)
	release, err := CheckLlamaLib(dir)
	if err != nil {
		return wire.EngineInfo{}, fmt.Errorf("engine: llama.cpp libraries in %s: %w; %s", dir, err, need)
	}
	if err := llama.Load(dir); err != nil {
		return wire.EngineInfo{}, fmt.Errorf("engine: loading llama.cpp from %s: %w; %s", dir, err, need)
	}
	if err := bindTokenize(dir); err != nil {
		return wire.EngineInfo{}, err
	}
	llama.LogSet(logs.callback())
	llama.Init()
	if release == "" {
		release = "unknown"
	}
	flags := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(llama.PrintSystemInfo()), "|"))
	return wire.EngineInfo{Name: "llama.cpp", Version: release, BuildFlags: flags}, nil
}

// detectRelease reads the release from node-llama-cpp's build metadata, or
// from the versioned library file name; "" when neither is there.
func detectRelease(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "_nlcBuildMetadata.json"))
	if err == nil {
		var meta struct {
			BuildOptions struct {
				LlamaCpp struct {
					Release string `json:"release"`
				} `json:"llamaCpp"`
			} `json:"buildOptions"`
		}
		if err := json.Unmarshal(b, &meta); err != nil {
			return "", fmt.Errorf("build metadata: %w", err)
		}
		return meta.BuildOptions.LlamaCpp.Release, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "libllama.v*.so"))
	if len(matches) == 1 {
		base := filepath.Base(matches[0])
		return strings.TrimSuffix(strings.TrimPrefix(base, "libllama."), ".so"), nil
	}
	return "", nil
}

// Info names the engine: llama.cpp, its release and the CPU features it uses.
func (e *Llama) Info() wire.EngineInfo { return e.info }

// Extensions implements Extender: llama.cpp samples (GENERATE.sampling).
func (e *Llama) Extensions() []string { return []string{wire.ExtSampling} }

// Stats reports the process RSS and the loaded models.
func (e *Llama) Stats() Stats { return e.models.stats() }

// Close frees every loaded model. The libraries stay loaded.
func (e *Llama) Close() error {
	e.models.freeAll()
	e.closed = true
	return nil
}

// runnable returns a loaded model that has weights: a vocabulary-only model
// cannot run op (unsupported).
func (e *Llama) runnable(ref, op string) (*llamaModel, error) {
	m, err := e.model(ref)
	if err != nil {
		return nil, err
	}
	if m.cfg.vocabOnly {
		return nil, wire.Errorf(wire.CodeUnsupported, "model %s was loaded vocab_only: it tokenizes but cannot %s", ref, op)
	}
	return m, nil
}

// model returns a loaded model or a model_not_loaded error.
func (e *Llama) model(ref string) (*llamaModel, error) {
	if e.closed {
		return nil, wire.Errorf(wire.CodeInternal, "engine closed")
	}
	m, ok := e.models[ref]
	if !ok {
		return nil, wire.Errorf(wire.CodeModelNotLoaded, "model %q is not loaded", ref)
	}
	return m, nil
}

// ggml log levels.
const (
	logNone  = 0
	logDebug = 1
	logInfo  = 2
	logWarn  = 3
	logError = 4
	logCont  = 5 // continues the previous line
)

func parseLogLevel(s string) (int32, error) {
	switch strings.ToLower(s) {
	case "debug":
		return logDebug, nil
	case "info":
		return logInfo, nil
	case "", "warn", "warning":
		return logWarn, nil
	case "error":
		return logError, nil
	case "none", "off":
		return logError + 1, nil
	}
	return 0, fmt.Errorf("engine: log level %q: want debug, info, warn, error or none", s)
}

// logSink routes llama.cpp's log callback to a writer and remembers the last
// error lines, which explain a model or context that failed to load.
type logSink struct {
	mu      sync.Mutex
	w       io.Writer
	min     int32
	last    int32 // level of the previous line, for logCont
	errs    []string
	cbOnce  sync.Once
	cbValue uintptr
}

func (s *logSink) set(w io.Writer, min int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w, s.min = w, min
}

func (s *logSink) callback() uintptr {
	s.cbOnce.Do(func() {
		s.cbValue = purego.NewCallback(func(level int32, text *byte, _ unsafe.Pointer) uintptr {
			s.write(level, cString(text))
			return 0
		})
	})
	return s.cbValue
}

func (s *logSink) write(level int32, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if level == logCont {
		level = s.last
	}
	s.last = level
	if level >= logWarn {
		s.errs = append(s.errs, strings.TrimSpace(text))
		if len(s.errs) > 8 {
			s.errs = s.errs[len(s.errs)-8:]
		}
	}
	if s.w != nil && level >= s.min && level != logNone {
		io.WriteString(s.w, "llama.cpp: "+text)
	}
}

// takeErrors returns and forgets the warning and error lines logged since the last call.
func (s *logSink) takeErrors() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	msg := strings.Join(s.errs, "; ")
	s.errs = nil
	return msg
}

// cString copies a NUL-terminated C string.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
