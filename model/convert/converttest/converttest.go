// Package converttest writes small random BERT-family checkpoints as a
// Hugging Face transformers directory (config.json, model.safetensors,
// tokenizer.json) for tests of package convert, and computes the encoder's
// hidden states independently, in float64, to compare a converted graph's
// with.
package converttest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// BERT describes a generated checkpoint.
type BERT struct {
	Layers, Hidden, Heads, FFN, Positions int
	Seed                                  uint64
	Arch                                  string  // config.json's architecture ("" : BertModel)
	Prefix                                string  // weight name prefix ("bert.", "roberta.", "")
	Eps                                   float64 // layer_norm_eps (0: 1e-12)
	// PadID is pad_token_id; with Offset (RoBERTa) positions start at
	// PadID+1.
	PadID  int
	Offset bool
	Labels int // a classifier head of this many labels (BertForSequenceClassification)
	// MLM writes BertForMaskedLM's head (cls.predictions.*): its decoder
	// tied to the word embeddings (no decoder tensor), or with Untied its
	// own cls.predictions.decoder.weight.
	MLM, Untied bool
	// DType is the weights' dtype in the file ("" : F32; F16, BF16): the
	// values Tensors returns are rounded to it.
	DType string
	// Shards > 1 writes the weights as that many files and their index.
	Shards int
	// Added are tokens appended to the vocabulary (and rows to the word
	// embeddings), as PyLate adds its "[Q] " and "[D] " markers.
	Added []string
}

// Tiny is a 2-layer, 16-wide, 4-head BERT.
func Tiny() BERT {
	return BERT{Layers: 2, Hidden: 16, Heads: 4, FFN: 32, Positions: 40, Seed: 3, Eps: 1e-12}
}

// Vocab is the checkpoint's WordPiece vocabulary (onnxtest.BertVocab of
// onnxtest.Words).
func Vocab() []string { return onnxtest.BertVocab(onnxtest.Words) }

// Vocab is the checkpoint's vocabulary: Vocab() and then b.Added.
func (b BERT) Vocab() []string { return append(Vocab(), b.Added...) }

// Tensors are a checkpoint's weights by name (prefix included) and shapes.
type Tensors struct {
	Values map[string][]float32
	Shapes map[string][]int64
}

// Tensors returns the checkpoint's weights (deterministic from Seed).
func (b BERT) Tensors() Tensors {
	r := rand.New(rand.NewPCG(b.Seed, 0xbe27))
	t := Tensors{Values: map[string][]float32{}, Shapes: map[string][]int64{}}
	add := func(name string, scale, mean float64, shape ...int64) {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = round(float32(mean+scale*r.NormFloat64()), b.DType)
		}
		t.Values[b.Prefix+name], t.Shapes[b.Prefix+name] = v, shape
	}
	h, f := int64(b.Hidden), int64(b.FFN)
	linear := func(name string, in, out int64) {
		add(name+".weight", 1/math.Sqrt(float64(in)), 0, out, in)
		add(name+".bias", 0.1, 0, out)
	}
	norm := func(name string) {
		add(name+".weight", 0.1, 1, h)
		add(name+".bias", 0.1, 0, h)
	}
	add("embeddings.word_embeddings.weight", 1, 0, int64(len(b.Vocab())), h)
	add("embeddings.position_embeddings.weight", 0.5, 0, int64(b.Positions), h)
	add("embeddings.token_type_embeddings.weight", 0.5, 0, 2, h)
	norm("embeddings.LayerNorm")
	for l := range b.Layers {
		p := fmt.Sprintf("encoder.layer.%d.", l)
		for _, n := range []string{"query", "key", "value"} {
			linear(p+"attention.self."+n, h, h)
		}
		linear(p+"attention.output.dense", h, h)
		norm(p + "attention.output.LayerNorm")
		linear(p+"intermediate.dense", h, f)
		linear(p+"output.dense", f, h)
		norm(p + "output.LayerNorm")
	}
	linear("pooler.dense", h, h)
	if b.Labels > 0 {
		prefix := b.Prefix
		b.Prefix = "" // the head is outside the encoder
		linear("classifier", h, int64(b.Labels))
		b.Prefix = prefix
	}
	if b.MLM {
		prefix := b.Prefix
		b.Prefix = ""
		linear("cls.predictions.transform.dense", h, h)
		norm("cls.predictions.transform.LayerNorm")
		add("cls.predictions.bias", 0.5, 0, int64(len(b.Vocab())))
		if b.Untied {
			add("cls.predictions.decoder.weight", 0.5, 0, int64(len(b.Vocab())), h)
		}
		b.Prefix = prefix
	}
	return t
}

// Config is the checkpoint's config.json.
func (b BERT) Config() map[string]any {
	arch, mt := b.Arch, "bert"
	if arch == "" {
		arch = "BertModel"
	}
	if b.Offset {
		mt = "roberta"
	}
	if b.Labels > 0 && b.Arch == "" {
		arch = "BertForSequenceClassification"
	}
	eps := b.Eps
	if eps == 0 {
		eps = 1e-12
	}
	cfg := map[string]any{"architectures": []string{arch}, "model_type": mt, "hidden_size": b.Hidden,
		"num_hidden_layers": b.Layers, "num_attention_heads": b.Heads, "intermediate_size": b.FFN, "hidden_act": "gelu",
		"layer_norm_eps": eps, "max_position_embeddings": b.Positions, "type_vocab_size": 2, "vocab_size": len(b.Vocab()),
		"pad_token_id": b.PadID, "position_embedding_type": "absolute"}
	if b.Labels > 0 {
		labels := map[string]string{}
		for i := range b.Labels {
			labels[fmt.Sprint(i)] = fmt.Sprintf("LABEL_%d", i)
		}
		cfg["id2label"] = labels
	}
	return cfg
}

// WriteDir writes config.json, model.safetensors (of DType; with Shards,
// the shards and their index) and tokenizer.json into dir.
func (b BERT) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg, err := json.MarshalIndent(b.Config(), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		return err
	}
	tj, err := onnxtest.BertTokenizerJSON(b.Vocab(), b.Positions)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tj, 0o644); err != nil {
		return err
	}
	if b.Shards > 1 {
		return writeShards(dir, b.Tensors(), b.DType, b.Shards)
	}
	return WriteSafetensors(filepath.Join(dir, "model.safetensors"), b.Tensors(), b.DType)
}
