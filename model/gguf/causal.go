package gguf

// nonCausal lists architectures whose attention is bidirectional when the
// GGUF does not say (<arch>.attention.causal).
var nonCausal = map[string]bool{
	"bert": true, "nomic-bert": true, "nomic-bert-moe": true, "jina-bert-v2": true, "jina-bert-v3": true,
	"modern-bert": true, "neo-bert": true, "t5encoder": true, "eurobert": true,
}

// IsCausal reports whether the model's attention is causal (a decoder):
// <arch>.attention.causal, else false for the known bidirectional encoders.
func (f *File) IsCausal() bool {
	arch := f.Architecture()
	if c, ok := f.Bool(arch + ".attention.causal"); ok {
		return c
	}
	return !nonCausal[arch]
}
