package job

import (
	"slices"

	"github.com/synapse-embed/synapse/model/artifact"
)

// staticNormalize applies a static model's own normalization (Model2Vec's
// config.json normalize, a StaticEmbedding chain's Normalize module)
// whatever --no-normalize says, as an ONNX model's Normalize module is:
// it is the model's.
func (o *EmbedOptions) staticNormalize(m *artifact.Artifact) {
	if m.Static != nil && m.Static.Normalize {
		o.Normalize = true
	}
}

// poolSkipper is a tokenizer whose model leaves some token ids out of a
// text's vector (a Model2Vec static model's unknown token: model2vec
// truncates a text at max_length tokens, then drops it).
type poolSkipper interface {
	PoolSkip(id int32) bool
}

// dropSkipped removes from each chunk's ids those the model leaves out of
// its vector, after the chunking counted them as the model's truncation
// does; a chunk left with no id gets a zero vector from the engine, as
// model2vec gives.
func dropSkipped(tok any, chunks []Chunk) []Chunk {
	s, ok := tok.(poolSkipper)
	if !ok {
		return chunks
	}
	for i := range chunks {
		chunks[i].IDs = slices.DeleteFunc(chunks[i].IDs, s.PoolSkip)
	}
	return chunks
}
