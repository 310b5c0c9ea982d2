// Package engine is what a synapse worker runs: inference engines behind a
// small interface (llama.cpp for GGUF models, ONNX Runtime for ONNX models,
// and Mux, which serves both by LOAD's format), and the loop that serves
// protocol v1 requests from the module over one connection.
//
// The Engine interface speaks token ids, vectors and strings only, so that
// any engine can sit behind the same serve loop. Errors an engine returns are *wire.Error values
// whose Code travels to the module in ERR.
package engine

import (
	"context"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// Pooling names accepted in RuntimeConfig.Pooling and by Embed: the
// protocol's (package wire).
const (
	PoolingDefault = wire.PoolingDefault
	PoolingNone    = wire.PoolingNone
	PoolingMean    = wire.PoolingMean
	PoolingCLS     = wire.PoolingCLS
	PoolingLast    = wire.PoolingLast
	PoolingRank    = wire.PoolingRank
)

// PromptEmbedder is an Engine whose pooling can leave out each sequence's
// first tokens (EMBED_BATCH items' pool_from: a sentence-transformers
// Pooling module with include_prompt false leaves out the prompt).
type PromptEmbedder interface {
	// EmbedPoolFrom is Embed with from[i] leading tokens of sequence i left
	// out of its pooling (from nil: none).
	EmbedPoolFrom(ctx context.Context, modelRef, pooling string, normalize bool, seqs [][]int32, from []int) (vecs []float32, dims int, err error)
}

// Artifact formats, as LOAD's format field names them (package wire).
const (
	FormatGGUF = wire.FormatGGUF
	FormatONNX = wire.FormatONNX
)

// Finish reasons of a generation (package wire).
const (
	FinishStop    = wire.FinishStop
	FinishLength  = wire.FinishLength
	FinishGrammar = wire.FinishGrammar
)

// LoadRequest asks an engine to load a model artifact.
type LoadRequest struct {
	Path   string             // artifact file: a GGUF file, or an ONNX graph (a model directory resolves to its model.onnx)
	Digest string             // "sha256:<hex>" of the file; re-verified before loading
	Format string             // FormatGGUF ("" is taken as gguf) or FormatONNX
	Config wire.RuntimeConfig // zero fields mean the engine's defaults
}

// ModelInfo describes a loaded model.
type ModelInfo struct {
	Ref      string        // stable for (digest, effective config): loading twice returns the same ref
	Dims     int           // embedding width; classifier outputs for a reranker
	ColdLoad time.Duration // time spent loading (zero when the model was already loaded)
}

// Generation is the result of Generate.
type Generation struct {
	Text         string
	NPrompt      int    // prompt tokens evaluated
	NGen         int    // tokens generated (the end-of-generation token is not counted)
	FinishReason string // FinishStop, FinishLength or FinishGrammar
}

// GenerateOptions shape one generation.
type GenerateOptions struct {
	MaxTokens int    // at most this many tokens
	Grammar   string // a GBNF grammar with rule "root", "" for none
	// Temperature 0 decodes greedily (deterministic). Above 0 the engine
	// samples with this temperature from a generator seeded with Seed, so
	// the same (prompt, options) give the same text.
	Temperature float32
	Seed        uint32
}

// RerankGroup is one query and its candidates.
type RerankGroup struct {
	Query      []int32
	Candidates [][]int32
}

// Extender is an Engine that serves protocol extensions of its own; the
// worker announces them in HELLO (wire.ExtSampling).
type Extender interface {
	Extensions() []string
}

// Extensions are the extensions a worker serving eng announces: those the
// serve loop handles for every engine and the engine's own.
func Extensions(eng Engine) []string {
	ext := []string{wire.ExtRerankGroups}
	if x, ok := eng.(Extender); ok {
		ext = append(ext, x.Extensions()...)
	}
	return ext
}

// Stats is a snapshot of the engine's process.
type Stats struct {
	RSSMB        int      // resident set size in MiB
	ModelsLoaded []string // model refs, sorted
}

// QuantizeRequest asks an engine to write a quantized copy of a model artifact.
type QuantizeRequest struct {
	Path    string // source artifact
	Digest  string // "sha256:<hex>" of the source; verified before quantizing
	OutPath string // where to write the copy; must not exist
	// FType is the target: a GGUF file type name ("q8_0", "q4_k_m":
	// gguf.ParseFileType), or "int8" for an ONNX graph.
	FType   string
	Threads int    // 0: the engine's default
	Format  string // FormatGGUF ("" is taken as gguf) or FormatONNX
}

// QuantizeResult describes the file Quantize wrote.
type QuantizeResult struct {
	Digest string // "sha256:<hex>" of the file at OutPath
	Size   int64
	Took   time.Duration
}

// Quantizer is an Engine that can quantize models (QUANTIZE, an extension).
// The serve loop answers QUANTIZE with ERR unsupported for an engine that is
// not one.
type Quantizer interface {
	// Quantize verifies the source and writes the quantized copy
	// (artifact_invalid, bad_request, unsupported). A failed quantization
	// leaves nothing at OutPath.
	Quantize(ctx context.Context, req QuantizeRequest) (QuantizeResult, error)
}

// Engine runs models for one worker. The serve loop calls it from a single
// goroutine, one request at a time; implementations need not be safe for
// concurrent use. Every error returned is a *wire.Error (see wire.CodeOf).
type Engine interface {
	// Load verifies and loads a model (artifact_invalid, config_invalid, oom, unsupported).
	Load(ctx context.Context, req LoadRequest) (ModelInfo, error)
	// Embed returns one pooled vector per sequence, row-major in a flat slice
	// of len(seqs)*dims. pooling "" means the pooling the model was loaded with.
	// The ids are embedded as given: the module adds any special tokens.
	Embed(ctx context.Context, modelRef, pooling string, normalize bool, seqs [][]int32) (vecs []float32, dims int, err error)
	// Rerank scores each candidate against its group's query, groups in
	// order; the engine builds each pair with the model's own special tokens
	// from plain ids, and may evaluate pairs of several groups together.
	Rerank(ctx context.Context, modelRef string, groups []RerankGroup) ([]float32, error)
	// Generate completes prompt, constrained by a GBNF grammar when
	// opt.Grammar is not empty; greedily unless opt.Temperature > 0 (an
	// engine that cannot sample answers unsupported).
	Generate(ctx context.Context, modelRef string, prompt []int32, opt GenerateOptions) (Generation, error)
	// Tokenize runs the engine's own tokenizer (used to check the module's).
	Tokenize(ctx context.Context, modelRef, text string, addSpecial, parseSpecial bool) ([]int32, error)
	// Unload frees a model (model_not_loaded if unknown).
	Unload(ctx context.Context, modelRef string) error
	// Stats reports memory use and the loaded models.
	Stats() Stats
	// Info names the engine for HELLO.
	Info() wire.EngineInfo
	// Close frees every model and the engine's resources.
	Close() error
}
