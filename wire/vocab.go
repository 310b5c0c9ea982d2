package wire

// The protocol's vocabulary: the values its string fields take. The module
// and the worker both name them from here.

// Artifact formats, as LOAD's format field names them.
const (
	FormatGGUF   = "gguf"   // a GGUF file, served by llama.cpp
	FormatONNX   = "onnx"   // an ONNX graph (.onnx, in a Hugging Face model directory), served by ONNX Runtime
	FormatStatic = "static" // a static model's embeddings (.safetensors: Model2Vec, StaticEmbedding), served in Go
)

// Pooling names, as LOAD's runtime_config.pooling and EMBED's pooling
// carry them.
const (
	PoolingDefault = ""     // the model's own pooling (EMBED: the pooling the model was loaded with)
	PoolingNone    = "none" // per-token outputs; not usable with EMBED
	PoolingMean    = "mean"
	PoolingCLS     = "cls"
	PoolingLast    = "last"
	PoolingRank    = "rank" // classifier head over the pooled sequence (rerankers)
)

// Finish reasons, as TEXT's finish_reason carries them.
const (
	FinishStop   = "stop"   // the model produced an end-of-generation token
	FinishLength = "length" // max_tokens or the context size was reached
	// FinishGrammar: the grammar allowed nothing but the end, where the
	// model's own most likely token would have gone on (from workers that
	// say so).
	FinishGrammar = "grammar"
)
