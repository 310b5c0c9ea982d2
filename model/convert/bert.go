package convert

import (
	"fmt"
	"math"

	"github.com/synapse-embed/synapse/model/onnx"
)

// maxGraphBytes bounds the weights of a converted graph: a protobuf message
// holds at most 2 GiB, and synapse writes no external data files.
const maxGraphBytes = 1<<31 - 64<<20

// graph builds an ONNX graph, naming each node's output after the node.
type graph struct {
	g      onnx.Graph
	bytes  int64
	consts map[string]bool // constants added, by name: layers share them
}

// constant adds the initializer t unless one of its name was added.
func (b *graph) constant(t onnx.Tensor) string {
	if b.consts == nil {
		b.consts = map[string]bool{}
	}
	if !b.consts[t.Name] {
		b.consts[t.Name] = true
		b.g.Initializers = append(b.g.Initializers, t)
	}
	return t.Name
}

// node adds a node and returns its (single) output's name.
func (b *graph) node(name, op string, in []string, attrs ...onnx.Attr) string {
	b.g.Nodes = append(b.g.Nodes, onnx.Node{Name: name, Op: op, Inputs: in, Outputs: []string{name}, Attrs: attrs})
	return name
}

// weight adds a float32 initializer.
func (b *graph) weight(name string, v []float32, dims ...int64) string {
	b.g.Initializers = append(b.g.Initializers, onnx.Tensor{Name: name, Dims: dims, Floats: v})
	b.bytes += 4 * int64(len(v))
	return name
}

// ints adds an int64 initializer of one dimension.
func (b *graph) ints(name string, v ...int64) string {
	return b.constant(onnx.Tensor{Name: name, Dims: []int64{int64(len(v))}, Ints: v})
}

// scalar adds a float32 scalar initializer.
func (b *graph) scalar(name string, v float32) string {
	return b.constant(onnx.Tensor{Name: name, Floats: []float32{v}})
}

// transpose returns the [rows, cols] matrix m as [cols, rows]: a torch
// Linear's weight [out, in] as MatMul's right operand [in, out].
func transpose(m []float32, rows, cols int) []float32 {
	out := make([]float32, len(m))
	for r := range rows {
		for c := range cols {
			out[c*rows+r] = m[r*cols+c]
		}
	}
	return out
}

// encoder builds a BERT-family encoder graph from a source's weights.
type encoder struct {
	graph
	s *Source
	w *weights
}

// newEncoder starts the graph of s: its name and inputs input_ids,
// attention_mask and token_type_ids (int64 [batch, sequence]), the same for
// every converted graph (an architecture without token types ignores them).
func newEncoder(s *Source, w *weights) *encoder {
	e := &encoder{s: s, w: w}
	e.g.Name = "synapse-convert-" + s.Arch
	bs := []onnx.Dim{{Param: "batch"}, {Param: "sequence"}}
	for _, in := range []string{"input_ids", "attention_mask", "token_type_ids"} {
		e.g.Inputs = append(e.g.Inputs, onnx.Value{Name: in, Tensor: true, Elem: onnx.Int64, Dims: bs})
	}
	return e
}

// Graph converts the source to an ONNX model: inputs input_ids,
// attention_mask, token_type_ids (int64 [batch, sequence]), output
// last_hidden_state (float32 [batch, sequence, hidden]) and, for a
// sequence classifier, logits ([batch, labels]); for a BertForMaskedLM
// whose weights hold the MLM head, logits ([batch, sequence, vocab]).
func (s *Source) Graph() (onnx.Model, error) {
	if s.arch.modern {
		return s.modernGraph()
	}
	if s.arch.deberta {
		return s.debertaGraph()
	}
	w, err := s.openWeights()
	if err != nil {
		return onnx.Model{}, err
	}
	defer w.close()
	e := newEncoder(s, w)
	x, err := e.embeddings()
	if err != nil {
		return onnx.Model{}, err
	}
	bias := e.maskBias()
	if s.arch.mpnet { // the relative position bias, added to the mask's: [batch, heads, seq, seq]
		pos, err := e.positionBias()
		if err != nil {
			return onnx.Model{}, err
		}
		bias = e.node("mask.bias.rel", "Add", []string{bias, pos})
	}
	for l := range s.Config.Layers {
		if x, err = e.layer(l, x, bias); err != nil {
			return onnx.Model{}, err
		}
	}
	e.node("last_hidden_state", "Identity", []string{x})
	h := int64(s.Config.HiddenSize)
	e.g.Outputs = append(e.g.Outputs, onnx.Value{Name: "last_hidden_state", Tensor: true, Elem: onnx.Float,
		Dims: []onnx.Dim{{Param: "batch"}, {Param: "sequence"}, {Value: h}}})
	if s.arch.classifier {
		if err := e.classifier(x); err != nil {
			return onnx.Model{}, err
		}
	}
	if s.arch.mlm && e.w.has(mlmDense+".weight") {
		if err := e.mlmHead(x); err != nil {
			return onnx.Model{}, err
		}
	}
	if e.bytes > maxGraphBytes {
		return onnx.Model{}, fmt.Errorf("convert: %s: %w: %d bytes of float32 weights; a self-contained ONNX graph holds at most %d",
			s.Dir, ErrRefused, e.bytes, int64(maxGraphBytes))
	}
	return onnx.Model{Opset: 17, Producer: fmt.Sprintf("synapse-convert %d", Version), Graph: e.g}, nil
}

// embeddings adds the word, token type and position embeddings and their
// LayerNorm; positions start at 0, or past the padding id (RoBERTa).
func (e *encoder) embeddings() (string, error) {
	c := e.s.Config
	h := int64(c.HiddenSize)
	vocab := int64(c.VocabSize)
	if vocab <= 0 {
		vocab = e.w.shapeRows("embeddings.word_embeddings.weight")
	}
	wordE, err := e.w.tensor("embeddings.word_embeddings.weight", vocab, h)
	if err != nil {
		return "", err
	}
	posE, err := e.w.tensor("embeddings.position_embeddings.weight", int64(c.MaxPositionEmbeddings), h)
	if err != nil {
		return "", err
	}
	types := int64(c.TypeVocabSize)
	if types == 0 {
		types = 2 // transformers' default
	}
	typeE, err := e.w.tensor("embeddings.token_type_embeddings.weight", types, h)
	if err != nil {
		return "", err
	}
	x := e.node("emb.word", "Gather", []string{e.weight("embeddings.word_embeddings.weight", wordE, vocab, h), "input_ids"}, onnx.IntAttr("axis", 0))
	t := e.node("emb.type", "Gather", []string{e.weight("embeddings.token_type_embeddings.weight", typeE, types, h), "token_type_ids"}, onnx.IntAttr("axis", 0))
	first := int64(0)
	if e.s.arch.offset {
		first = int64(c.padID()) + 1
	}
	shape := e.node("emb.shape", "Shape", []string{"input_ids"})
	seq := e.node("emb.seq", "Slice", []string{shape, e.ints("c.1", 1), e.ints("c.2", 2)})
	end := e.node("emb.pos_end", "Add", []string{seq, e.ints("c.first", first)})
	pos := e.node("emb.pos", "Slice", []string{e.weight("embeddings.position_embeddings.weight", posE, int64(c.MaxPositionEmbeddings), h),
		e.ints("c.first_start", first), end, e.ints("c.0", 0)})
	sum := e.node("emb.sum", "Add", []string{e.node("emb.word_type", "Add", []string{x, t}), pos})
	return e.layerNorm("embeddings.LayerNorm", sum)
}

// shapeRows is a tensor's first dimension, 0 when it is absent.
func (w *weights) shapeRows(name string) int64 {
	i, ok := w.where[name]
	if !ok {
		return 0
	}
	if sh := w.files[i].Tensors[w.full[name]].Shape; len(sh) > 0 {
		return sh[0]
	}
	return 0
}

// maskBias turns attention_mask [batch, seq] into the additive bias
// [batch, 1, 1, seq] every layer's attention scores get: 0 for a token,
// float32's lowest value for padding (as transformers does).
func (e *encoder) maskBias() string {
	m := e.node("mask.float", "Cast", []string{"attention_mask"}, onnx.IntAttr("to", int64(onnx.Float)))
	m4 := e.node("mask.4d", "Unsqueeze", []string{m, e.ints("c.axes12", 1, 2)})
	inv := e.node("mask.inv", "Sub", []string{e.scalar("c.one", 1), m4})
	return e.node("mask.bias", "Mul", []string{inv, e.scalar("c.lowest", -math.MaxFloat32)})
}

// layerNorm adds LayerNormalization over the last axis with the named
// module's weight and bias.
func (e *encoder) layerNorm(module, x string) (string, error) {
	h := int64(e.s.Config.HiddenSize)
	g, err := e.w.tensor(module+".weight", h)
	if err != nil {
		return "", err
	}
	b, err := e.w.tensor(module+".bias", h)
	if err != nil {
		return "", err
	}
	return e.node(module, "LayerNormalization", []string{x, e.weight(module+".weight", g, h), e.weight(module+".bias", b, h)},
		onnx.IntAttr("axis", -1), onnx.FloatAttr("epsilon", e.s.Config.eps())), nil
}

// linear adds x·Wᵀ + b for the torch Linear module named, [out, in].
func (e *encoder) linear(module, x string, in, out int64) (string, error) {
	w, err := e.w.tensor(module+".weight", out, in)
	if err != nil {
		return "", err
	}
	b, err := e.w.tensor(module+".bias", out)
	if err != nil {
		return "", err
	}
	mm := e.node(module+".matmul", "MatMul", []string{x, e.weight(module+".weight", transpose(w, int(out), int(in)), in, out)})
	return e.node(module, "Add", []string{mm, e.weight(module+".bias", b, out)}), nil
}
