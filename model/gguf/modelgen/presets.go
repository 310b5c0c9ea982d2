package modelgen

import "github.com/synapse-embed/synapse/model/gguf"

// DefaultSeed seeds the presets.
const DefaultSeed = 1

// TinyEmbedder is a 2-layer, 128-wide BERT embedder with mean pooling, the
// shape of the reference model ref-bert-embed.gguf.
func TinyEmbedder(v Vocab) BERT {
	return BERT{Name: "synapse-tiny-embed", Layers: 2, Width: 128, Heads: 4, FFN: 512, Context: 512,
		Pooling: PoolingMean, WeightType: gguf.GGMLTypeF16, Seed: DefaultSeed, Vocab: v}
}

// TinyReranker is TinyEmbedder as a cross-encoder with rank pooling, the shape
// of ref-bert-rerank.gguf.
func TinyReranker(v Vocab) BERT {
	c := TinyEmbedder(v)
	c.Name, c.Pooling = "synapse-tiny-rerank", PoolingRank
	return c
}

// MiniLMReranker is MiniLM with a classifier head (rank pooling): the shape
// of cross-encoder/ms-marco-MiniLM-L-6-v2, for benchmarks.
func MiniLMReranker(v Vocab) BERT {
	c := MiniLM(v)
	c.Name, c.Pooling = "synapse-minilm-l6-rerank-random", PoolingRank
	return c
}

// SmallLlama is a 4-layer, 512-wide llama decoder, big enough that
// generation is compute-bound, for benchmarks.
func SmallLlama(v Vocab) Llama {
	return Llama{Name: "synapse-small-llama", Layers: 4, Width: 512, Heads: 8, HeadsKV: 4, FFN: 1408, Context: 2048,
		WeightType: gguf.GGMLTypeF16, Seed: DefaultSeed, Vocab: v}
}

// TinyLlama is a 2-layer, 64-wide llama decoder with grouped-query attention.
func TinyLlama(v Vocab) Llama {
	return Llama{Name: "synapse-tiny-llama", Layers: 2, Width: 64, Heads: 4, HeadsKV: 2, FFN: 128, Context: 2048,
		WeightType: gguf.GGMLTypeF16, Seed: DefaultSeed, Vocab: v}
}

// MiniLM has the shape of all-MiniLM-L6-v2 (6 layers, 384 wide, 12 heads,
// 1536 FFN, 512 context, F16, mean pooling; about 22.7M parameters with the
// 30,522-token bert-bge vocabulary), for benchmarks.
func MiniLM(v Vocab) BERT {
	return BERT{Name: "synapse-minilm-l6-random", Layers: 6, Width: 384, Heads: 12, FFN: 1536, Context: 512,
		Pooling: PoolingMean, WeightType: gguf.GGMLTypeF16, Seed: DefaultSeed, Vocab: v}
}

// BERTBase has the shape of bert-base / bge-base (12 layers, 768 wide, 12
// heads, 3072 FFN, 512 context, F16, mean pooling; about 110M parameters with
// a 30,522-token vocabulary), for benchmarks where the weights dominate.
func BERTBase(v Vocab) BERT {
	return BERT{Name: "synapse-bert-base-random", Layers: 12, Width: 768, Heads: 12, FFN: 3072, Context: 512,
		Pooling: PoolingMean, WeightType: gguf.GGMLTypeF16, Seed: DefaultSeed, Vocab: v}
}

// DemoWords is the word list of the demo model's vocabulary when none is given.
var DemoWords = []string{
	"the", "a", "an", "of", "and", "or", "to", "in", "on", "for", "with", "is", "are", "was", "be", "by",
	"this", "that", "it", "as", "at", "from", "not", "no", "we", "you", "they", "can", "will", "has",
	"embedding", "embeddings", "vector", "vectors", "model", "models", "token", "tokens", "text",
	"document", "documents", "query", "search", "batch", "worker", "workers", "cell", "cells",
	"protein", "gene", "study", "results", "data", "analysis", "effect", "patients", "risk",
}

// WriteDemoEmbedder writes a small BERT embedder (2 layers, 128 wide, mean
// pooling) with a self-contained WordPiece vocabulary built from words (or
// DemoWords when words is empty) to path.
func WriteDemoEmbedder(path string, words []string) error {
	if len(words) == 0 {
		words = DemoWords
	}
	c := TinyEmbedder(WordPieceVocab(words))
	c.Name = "synapse-demo-embed"
	return c.Write(path)
}
