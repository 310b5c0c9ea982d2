package convert

import (
	"fmt"
	"math"

	"github.com/synapse-embed/synapse/model/onnx"
)

// layer adds encoder layer l over x [batch, seq, hidden]: self-attention
// (scores scaled by 1/√head, plus the mask bias, softmax), its output
// projection, residual and LayerNorm, then the feed-forward layer with
// erf GELU, residual and LayerNorm.
func (e *encoder) layer(l int, x, bias string) (string, error) {
	c := e.s.Config
	h, heads := int64(c.HiddenSize), int64(c.Heads)
	hd := h / heads
	p := fmt.Sprintf("encoder.layer.%d.", l)
	split := e.ints("c.split_heads", 0, 0, heads, hd)
	var qkv [3]string
	for i, name := range []string{"query", "key", "value"} {
		y, err := e.linear(p+"attention.self."+name, x, h, h)
		if err != nil {
			return "", err
		}
		perm := []int64{0, 2, 1, 3} // [batch, heads, seq, head]
		if name == "key" {
			perm = []int64{0, 2, 3, 1} // [batch, heads, head, seq]
		}
		r := e.node(p+name+".heads", "Reshape", []string{y, split})
		qkv[i] = e.node(p+name+".t", "Transpose", []string{r}, onnx.Attr{Name: "perm", Ints: perm})
	}
	scores := e.node(p+"scores", "MatMul", []string{qkv[0], qkv[1]})
	scaled := e.node(p+"scores.scaled", "Mul", []string{scores, e.scalar(p+"scale", float32(1/math.Sqrt(float64(hd))))})
	masked := e.node(p+"scores.masked", "Add", []string{scaled, bias})
	probs := e.node(p+"probs", "Softmax", []string{masked}, onnx.IntAttr("axis", -1))
	return e.attended(p, probs, qkv[2], x)
}

// attended adds the rest of layer p of BERT's shape once its attention
// probabilities are known: the context (probs · v, heads merged), its
// output projection, residual and LayerNorm, then the feed-forward layer
// with erf GELU, residual and LayerNorm.
func (e *encoder) attended(p, probs, v, x string) (string, error) {
	c := e.s.Config
	h := int64(c.HiddenSize)
	ctx := e.node(p+"context", "MatMul", []string{probs, v})
	ctxT := e.node(p+"context.t", "Transpose", []string{ctx}, onnx.Attr{Name: "perm", Ints: []int64{0, 2, 1, 3}})
	merged := e.node(p+"context.merged", "Reshape", []string{ctxT, e.ints("c.merge_heads", 0, 0, h)})
	attn, err := e.linear(p+"attention.output.dense", merged, h, h)
	if err != nil {
		return "", err
	}
	x1, err := e.layerNorm(p+"attention.output.LayerNorm", e.node(p+"attention.residual", "Add", []string{attn, x}))
	if err != nil {
		return "", err
	}
	inter, err := e.linear(p+"intermediate.dense", x1, h, int64(c.Intermediate))
	if err != nil {
		return "", err
	}
	out, err := e.linear(p+"output.dense", e.gelu(p+"intermediate.gelu", inter), int64(c.Intermediate), h)
	if err != nil {
		return "", err
	}
	return e.layerNorm(p+"output.LayerNorm", e.node(p+"output.residual", "Add", []string{out, x1}))
}

// gelu adds the exact GELU, x·(1 + erf(x/√2))/2.
func (e *encoder) gelu(name, x string) string {
	div := e.node(name+".div", "Div", []string{x, e.scalar("c.sqrt2", float32(math.Sqrt2))})
	erf := e.node(name+".erf", "Erf", []string{div})
	plus := e.node(name+".plus1", "Add", []string{erf, "c.one"})
	return e.node(name, "Mul", []string{e.node(name+".x", "Mul", []string{x, plus}), e.scalar("c.half", 0.5)})
}

// classifier adds a sequence classifier's head over the first token's
// hidden state: the pooler (dense, tanh) and the classifier (dense), as
// the logits output [batch, labels].
func (e *encoder) classifier(x string) error {
	h := int64(e.s.Config.HiddenSize)
	if !e.w.has("classifier.weight") {
		return fmt.Errorf("convert: %s: %w: no tensor classifier.weight for %s", e.w.fileNames(), ErrRefused, e.s.Arch)
	}
	labels := e.w.shapeRows("classifier.weight")
	pooled, err := e.poolerDense(x, h)
	if err != nil {
		return err
	}
	return e.logits(e.node("pooler.tanh", "Tanh", []string{pooled}), h, labels)
}

// poolerDense adds the pooler's dense layer (h → h) over the first token's
// hidden state of x; the head's activation follows it.
func (e *encoder) poolerDense(x string, h int64) (string, error) {
	first := e.node("pooler.first", "Gather", []string{x, e.scalarInt("c.zero_index", 0)}, onnx.IntAttr("axis", 1))
	return e.linear("pooler.dense", first, h, h)
}

// logits adds the classifier (dense, in → labels) over x as the logits
// output [batch, labels].
func (e *encoder) logits(x string, in, labels int64) error {
	logits, err := e.linear("classifier", x, in, labels)
	if err != nil {
		return err
	}
	e.node("logits", "Identity", []string{logits})
	e.g.Outputs = append(e.g.Outputs, onnx.Value{Name: "logits", Tensor: true, Elem: onnx.Float,
		Dims: []onnx.Dim{{Param: "batch"}, {Value: labels}}})
	return nil
}

// scalarInt adds an int64 scalar initializer.
func (b *graph) scalarInt(name string, v int64) string {
	return b.constant(onnx.Tensor{Name: name, Ints: []int64{v}})
}

// The MLM head's modules in a BertForMaskedLM checkpoint.
const (
	mlmDense = "cls.predictions.transform.dense"
	mlmNorm  = "cls.predictions.transform.LayerNorm"
	mlmBias  = "cls.predictions.bias"
	mlmDec   = "cls.predictions.decoder"
	wordEmb  = "embeddings.word_embeddings.weight"
)

// mlmHead adds BertForMaskedLM's head over x [batch, seq, hidden]: dense,
// erf GELU, LayerNorm, then the decoder to the vocabulary plus its bias,
// as the logits output [batch, seq, vocab]. A checkpoint without
// cls.predictions.decoder.weight ties the decoder to the word embeddings
// (transformers' tie_word_embeddings, saved once); the bias is
// cls.predictions.bias, or cls.predictions.decoder.bias.
func (e *encoder) mlmHead(x string) error {
	h := int64(e.s.Config.HiddenSize)
	vocab := e.w.shapeRows(wordEmb)
	t, err := e.linear(mlmDense, x, h, h)
	if err != nil {
		return err
	}
	t, err = e.layerNorm(mlmNorm, e.gelu("cls.predictions.transform.gelu", t))
	if err != nil {
		return err
	}
	var dec string // [hidden, vocab]
	if e.w.has(mlmDec + ".weight") {
		w, err := e.w.tensor(mlmDec+".weight", vocab, h)
		if err != nil {
			return err
		}
		dec = e.weight(mlmDec+".weight", transpose(w, int(vocab), int(h)), h, vocab)
	} else { // tied: the embeddings' initializer [vocab, hidden], transposed in the graph
		dec = e.node(mlmDec+".tied", "Transpose", []string{wordEmb}, onnx.Attr{Name: "perm", Ints: []int64{1, 0}})
	}
	biasName := mlmBias
	if !e.w.has(biasName) && e.w.has(mlmDec+".bias") {
		biasName = mlmDec + ".bias"
	}
	b, err := e.w.tensor(biasName, vocab)
	if err != nil {
		return err
	}
	mm := e.node(mlmDec+".matmul", "MatMul", []string{t, dec})
	e.node("logits", "Add", []string{mm, e.weight(biasName, b, vocab)})
	e.g.Outputs = append(e.g.Outputs, onnx.Value{Name: "logits", Tensor: true, Elem: onnx.Float,
		Dims: []onnx.Dim{{Param: "batch"}, {Param: "sequence"}, {Value: vocab}}})
	return nil
}
