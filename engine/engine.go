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

// Pooling names accepted in RuntimeConfig.Pooling and by Embed.
const (
	PoolingDefault = ""     // the model's own pooling (Embed: the pooling the model was loaded with)
	PoolingNone    = "none" // per-token outputs; not usable with Embed
	PoolingMean    = "mean"
	PoolingCLS     = "cls"
	PoolingLast    = "last"
	PoolingRank    = "rank" // classifier head over the pooled sequence (rerankers)
)

// Artifact formats, as LOAD's format field names them.
const (
	FormatGGUF = "gguf"
	FormatONNX = "onnx"
)

// Finish reasons of a generation.
const (
	FinishStop   = "stop"   // the model produced an end-of-generation token
	FinishLength = "length" // max_tokens or the context size was reached
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
	FinishReason string // FinishStop or FinishLength
}

// Stats is a snapshot of the engine's process.
type Stats struct {
	RSSMB        int      // resident set size in MiB
	ModelsLoaded []string // model refs, sorted
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
	// Rerank scores each candidate against the query; the engine builds each
	// pair with the model's own special tokens from plain ids.
	Rerank(ctx context.Context, modelRef string, query []int32, candidates [][]int32) ([]float32, error)
	// Generate decodes greedily from prompt, constrained by a GBNF grammar
	// when grammar is not empty.
	Generate(ctx context.Context, modelRef string, prompt []int32, maxTokens int, grammar string) (Generation, error)
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
