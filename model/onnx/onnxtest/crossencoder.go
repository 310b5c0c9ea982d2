package onnxtest

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/synapse-embed/synapse/model/onnx"
)

// CrossEncoder describes a generated cross-encoder graph (the shape of
// BertForSequenceClassification's ONNX export: inputs input_ids,
// attention_mask, token_type_ids; output logits [batch, labels]), with a
// deliberately simple body whose scores a test computes independently
// (Logits). Token j of a sequence has the hidden state
// (E[id] + T[type]) ⊙ P[j], so that ids, token types and order all change
// the score; the masked mean of the hidden states goes through tanh and a
// linear layer W, b to the logits.
type CrossEncoder struct {
	Vocab, Hidden, Positions, Labels int
	Seed                             uint64
}

// CrossTables are a cross-encoder's weights.
type CrossTables struct {
	E, T, P, W [][]float32 // W is [Hidden][Labels]
	B          []float32
}

// Tables returns the cross-encoder's weights (deterministic from Seed).
func (c CrossEncoder) Tables() CrossTables {
	r := rand.New(rand.NewPCG(c.Seed, 0xc405))
	rows := func(n, w int, scale float64) [][]float32 {
		out := make([][]float32, n)
		for i := range out {
			out[i] = make([]float32, w)
			for j := range out[i] {
				out[i][j] = float32(r.NormFloat64() * scale)
			}
		}
		return out
	}
	tb := CrossTables{E: rows(c.Vocab, c.Hidden, 1), T: rows(2, c.Hidden, 1), P: rows(c.Positions, c.Hidden, 1), W: rows(c.Hidden, c.Labels, 1)}
	tb.B = rows(1, c.Labels, 0.1)[0]
	return tb
}

// Logits computes, in float64, the logits the graph gives one unpadded
// sequence of ids with token types types.
func (c CrossEncoder) Logits(ids, types []int32) []float64 {
	tb := c.Tables()
	mean := make([]float64, c.Hidden)
	for j, id := range ids {
		for d := range mean {
			mean[d] += (float64(tb.E[id][d]) + float64(tb.T[types[j]][d])) * float64(tb.P[j][d])
		}
	}
	out := make([]float64, c.Labels)
	for k := range out {
		out[k] = float64(tb.B[k])
		for d := range mean {
			out[k] += math.Tanh(mean[d]/float64(len(ids))) * float64(tb.W[d][k])
		}
	}
	return out
}

// Model returns the cross-encoder's ONNX model.
func (c CrossEncoder) Model() onnx.Model {
	tb := c.Tables()
	bs := []onnx.Dim{{Param: "batch"}, {Param: "sequence"}}
	g := onnx.Graph{Name: "onnxtest-cross-encoder"}
	for _, name := range []string{"input_ids", "attention_mask", "token_type_ids"} {
		g.Inputs = append(g.Inputs, onnx.Value{Name: name, Tensor: true, Elem: onnx.Int64, Dims: bs})
	}
	g.Initializers = []onnx.Tensor{
		{Name: "E", Dims: []int64{int64(c.Vocab), int64(c.Hidden)}, Floats: flat(tb.E)},
		{Name: "T", Dims: []int64{2, int64(c.Hidden)}, Floats: flat(tb.T)},
		{Name: "P", Dims: []int64{int64(c.Positions), int64(c.Hidden)}, Floats: flat(tb.P)},
		{Name: "W", Dims: []int64{int64(c.Hidden), int64(c.Labels)}, Floats: flat(tb.W)},
		{Name: "B", Dims: []int64{int64(c.Labels)}, Floats: tb.B},
		{Name: "c0", Dims: []int64{1}, Ints: []int64{0}},
		{Name: "c1", Dims: []int64{1}, Ints: []int64{1}},
		{Name: "c2", Dims: []int64{1}, Ints: []int64{2}},
		{Name: "cm1", Dims: []int64{1}, Ints: []int64{-1}},
	}
	node := func(op string, in []string, out string, attrs ...onnx.Attr) {
		g.Nodes = append(g.Nodes, onnx.Node{Op: op, Inputs: in, Outputs: []string{out}, Attrs: attrs})
	}
	node("Gather", []string{"E", "input_ids"}, "x", onnx.IntAttr("axis", 0))
	node("Gather", []string{"T", "token_type_ids"}, "t", onnx.IntAttr("axis", 0))
	node("Add", []string{"x", "t"}, "xt")
	node("Shape", []string{"input_ids"}, "shape")
	node("Slice", []string{"shape", "c1", "c2"}, "seqlen")
	node("Slice", []string{"P", "c0", "seqlen", "c0"}, "pos")
	node("Mul", []string{"xt", "pos"}, "h")
	node("Cast", []string{"attention_mask"}, "maskf", onnx.IntAttr("to", int64(onnx.Float)))
	node("Unsqueeze", []string{"maskf", "cm1"}, "mask3")
	node("Mul", []string{"h", "mask3"}, "hm")
	node("ReduceSum", []string{"hm", "c1"}, "sum", onnx.IntAttr("keepdims", 0))
	node("ReduceSum", []string{"mask3", "c1"}, "count", onnx.IntAttr("keepdims", 0))
	node("Div", []string{"sum", "count"}, "mean")
	node("Tanh", []string{"mean"}, "pooled")
	node("MatMul", []string{"pooled", "W"}, "proj")
	node("Add", []string{"proj", "B"}, "logits")
	g.Outputs = []onnx.Value{{Name: "logits", Tensor: true, Elem: onnx.Float, Dims: []onnx.Dim{{Param: "batch"}, {Value: int64(c.Labels)}}}}
	return onnx.Model{Producer: "synapse-onnxtest", Graph: g}
}

// CrossDir describes a generated cross-encoder directory.
type CrossDir struct {
	CrossEncoder CrossEncoder
	Words        []string // tokenizer vocabulary words (nil: Words)
	// Labels are config.json's id2label names (nil: LABEL_0, LABEL_1, …).
	Labels []string
	// Post replaces tokenizer.json's post_processor (nil: BERT's
	// TemplateProcessing, [CLS] $A [SEP] $B:1 [SEP]:1).
	Post any
}

// WriteCrossDir writes a cross-encoder directory into dir: model.onnx,
// tokenizer.json and a config.json naming BertForSequenceClassification.
// The vocabulary is sized to the tokenizer's; it returns the cross-encoder
// written.
func WriteCrossDir(dir string, d CrossDir) (CrossEncoder, error) {
	words := d.Words
	if words == nil {
		words = Words
	}
	vocab := BertVocab(words)
	c := d.CrossEncoder
	c.Vocab = len(vocab)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return c, err
	}
	if err := c.Model().WriteFile(filepath.Join(dir, "model.onnx")); err != nil {
		return c, err
	}
	tj, err := BertTokenizerJSON(vocab, c.Positions)
	if err != nil {
		return c, err
	}
	if d.Post != nil {
		var m map[string]any
		if err := json.Unmarshal(tj, &m); err != nil {
			return c, err
		}
		m["post_processor"] = d.Post
		tj, _ = json.MarshalIndent(m, "", "  ")
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tj, 0o644); err != nil {
		return c, err
	}
	id2label := map[string]string{}
	for k := range c.Labels {
		id2label[strconv.Itoa(k)] = "LABEL_" + strconv.Itoa(k)
		if k < len(d.Labels) {
			id2label[strconv.Itoa(k)] = d.Labels[k]
		}
	}
	cfg := map[string]any{"architectures": []string{"BertForSequenceClassification"}, "model_type": "bert", "hidden_size": c.Hidden,
		"max_position_embeddings": c.Positions, "vocab_size": c.Vocab, "type_vocab_size": 2, "pad_token_id": 0, "id2label": id2label}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return c, os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
}
