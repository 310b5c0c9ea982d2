//go:build cgo

package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/synapse-embed/synapse/wire"
)

// ONNX is the ONNX Runtime engine: BERT-style encoders exported to ONNX
// (a Hugging Face model directory or a .onnx file; see package hfmodel),
// loaded by LOAD with format "onnx". Create it with OpenONNX; one per process.
//
// LOAD's runtime_config, with zero fields resolved as follows:
//
//	embeddings  must be true: the engine embeds (EMBED_BATCH) and reranks
//	            (RERANK, RERANK_GROUPS); GENERATE and TOKENIZE answer unsupported.
//	n_ctx       the longest sequence accepted: config.json's context (e.g. 512),
//	            else 512. Above the model's context it is config_invalid.
//	n_seq_max   sequences per ONNX Runtime run; 0: 64. A run holds
//	            sequences of one length (at most 4,096 tokens), so
//	            equal-length chunks share a run and others run alone; with
//	            ONNXOptions.PadTokens, lengths within that many tokens share
//	            a run, padded (masked) to its longest.
//	n_batch, n_ubatch  llama.cpp's batch sizes: checked (≥ 0), not used.
//	n_threads   ONNX Runtime's intra-op threads (0: its default, one per
//	            physical core); inter-op threads are always 1.
//	pooling     "" = the model's own: the graph's sentence_embedding output
//	            when it has one, else the sentence-transformers pooling config
//	            (1_Pooling/config.json), else mean. mean, cls and last pool
//	            last_hidden_state in the engine. rank loads a cross-encoder:
//	            the graph's logits output, scored by RERANK (onnx_rerank.go).
type ONNX struct {
	info   wire.EngineInfo
	models loaded[*onnxModel] // by ref
	pad    int                // ONNXOptions.PadTokens
	closed bool
}

var (
	ortOnce sync.Once
	ortPath string
	ortInfo wire.EngineInfo
	ortErr  error
)

// ortAPIMinor is the oldest ONNX Runtime release whose C API the binding
// (github.com/yalue/onnxruntime_go v1.27.0, ORT_API_VERSION 24) can use.
const ortAPIMinor = 24

// OpenONNX loads the ONNX Runtime shared library (once per process: a second
// call must name the same file) and returns an engine.
func OpenONNX(opts ONNXOptions) (*ONNX, error) {
	if opts.PadTokens < 0 || opts.PadTokens > maxContext {
		return nil, fmt.Errorf("engine: ONNX pad tokens %d: want 0 to %d", opts.PadTokens, maxContext)
	}
	path, err := ORTLibrary(opts.Lib)
	if err != nil {
		return nil, err
	}
	ortOnce.Do(func() { ortPath = path; ortInfo, ortErr = loadORT(path) })
	if ortErr != nil {
		return nil, ortErr
	}
	if path != ortPath {
		return nil, fmt.Errorf("engine: ONNX Runtime already loaded from %s, not %s", ortPath, path)
	}
	return &ONNX{info: ortInfo, models: map[string]*onnxModel{}, pad: opts.PadTokens}, nil
}

// loadORT loads the library at path and creates ONNX Runtime's environment.
func loadORT(path string) (wire.EngineInfo, error) {
	ort.SetSharedLibraryPath(path)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return wire.EngineInfo{}, fmt.Errorf("engine: loading ONNX Runtime from %s: %w; %s", path, err, ortNeed())
	}
	v := ort.GetVersion()
	if !ortVersionOK(v) {
		ort.DestroyEnvironment()
		return wire.EngineInfo{}, fmt.Errorf("engine: ONNX Runtime in %s is release %s, older than 1.%d; %s", path, v, ortAPIMinor, ortNeed())
	}
	return wire.EngineInfo{Name: "onnxruntime", Version: v, BuildFlags: "CPUExecutionProvider"}, nil
}

func ortVersionOK(v string) bool {
	parts := strings.Split(v, ".")
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (major > 1 || major == 1 && minor >= ortAPIMinor)
}

// Info names the engine: onnxruntime and its release.
func (e *ONNX) Info() wire.EngineInfo { return e.info }

// Stats reports the process RSS and the loaded models.
func (e *ONNX) Stats() Stats { return e.models.stats() }

// Close frees every loaded model. The library stays loaded.
func (e *ONNX) Close() error {
	e.models.freeAll()
	e.closed = true
	return nil
}

// Unload frees a model.
func (e *ONNX) Unload(_ context.Context, ref string) error {
	m, err := e.model(ref)
	if err != nil {
		return err
	}
	m.free()
	delete(e.models, ref)
	return nil
}

func (e *ONNX) model(ref string) (*onnxModel, error) {
	if e.closed {
		return nil, wire.Errorf(wire.CodeInternal, "engine closed")
	}
	m, ok := e.models[ref]
	if !ok {
		return nil, wire.Errorf(wire.CodeModelNotLoaded, "model %q is not loaded", ref)
	}
	return m, nil
}

// Generate is not implemented: the ONNX engine runs encoders.
func (e *ONNX) Generate(_ context.Context, ref string, _ []int32, _ GenerateOptions) (Generation, error) {
	if _, err := e.model(ref); err != nil {
		return Generation{}, err
	}
	return Generation{}, wire.Errorf(wire.CodeUnsupported, "the ONNX engine runs encoders; it does not generate (model %s)", ref)
}

// Tokenize is not implemented: ONNX models are tokenized by the module from
// their tokenizer.json.
func (e *ONNX) Tokenize(_ context.Context, ref, _ string, _, _ bool) ([]int32, error) {
	if _, err := e.model(ref); err != nil {
		return nil, err
	}
	return nil, wire.Errorf(wire.CodeUnsupported, "the ONNX engine has no tokenizer: the module tokenizes ONNX models from tokenizer.json (model %s)", ref)
}
