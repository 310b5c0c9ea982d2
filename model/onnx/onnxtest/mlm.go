package onnxtest

import (
	"math"
	"math/rand/v2"

	"github.com/synapse-embed/synapse/model/onnx"
)

// MLMTables are the weights of an encoder's masked-LM head, BERT's
// (BertOnlyMLMHead): a dense transform D [Hidden, Hidden] + DB, GELU (the
// erf form), LayerNorm (G, LB, ε 1e-12), then the decoder V [Hidden,
// Vocab] + VB.
type MLMTables struct {
	D     [][]float32
	DB    []float32
	G, LB []float32
	V     [][]float32
	VB    []float32
}

// mlmEps is the head's LayerNorm epsilon (BERT's layer_norm_eps).
const mlmEps = 1e-12

// MLMTables returns the head's weights (deterministic from Seed). The
// decoder's bias is shifted below 0 so that about half the logits are
// negative: a SPLADE vector over them is sparse.
func (e Encoder) MLMTables() MLMTables {
	r := rand.New(rand.NewPCG(e.Seed, 0x3a1e))
	mat := func(n, w int, scale, shift float64) [][]float32 {
		out := make([][]float32, n)
		for i := range out {
			out[i] = make([]float32, w)
			for j := range out[i] {
				out[i][j] = float32(r.NormFloat64()*scale + shift)
			}
		}
		return out
	}
	s := 1 / math.Sqrt(float64(e.Hidden))
	return MLMTables{
		D: mat(e.Hidden, e.Hidden, s, 0), DB: mat(1, e.Hidden, 0.1, 0)[0],
		G: mat(1, e.Hidden, 0.1, 1)[0], LB: mat(1, e.Hidden, 0.1, 0)[0],
		V: mat(e.Hidden, e.Vocab, s, 0), VB: mat(1, e.Vocab, 0.5, -0.5)[0],
	}
}

// MLMLogits computes, in float64 from the weights, the logits the graph
// gives one unpadded sequence of token type 0: tokens × Vocab.
func (e Encoder) MLMLogits(ids []int32) [][]float64 {
	h := e.HiddenStates(ids)
	tb := e.MLMTables()
	out := make([][]float64, len(ids))
	for j, x := range h {
		t := make([]float64, e.Hidden)
		var mean float64
		for o := range t {
			s := float64(tb.DB[o])
			for i := range x {
				s += float64(x[i]) * float64(tb.D[i][o])
			}
			t[o] = 0.5 * s * (1 + math.Erf(s/math.Sqrt2))
			mean += t[o]
		}
		mean /= float64(e.Hidden)
		var v float64
		for _, y := range t {
			v += (y - mean) * (y - mean)
		}
		inv := 1 / math.Sqrt(v/float64(e.Hidden)+mlmEps)
		for o := range t {
			t[o] = (t[o]-mean)*inv*float64(tb.G[o]) + float64(tb.LB[o])
		}
		out[j] = make([]float64, e.Vocab)
		for k := range out[j] {
			s := float64(tb.VB[k])
			for i := range t {
				s += t[i] * float64(tb.V[i][k])
			}
			out[j][k] = s
		}
	}
	return out
}

// mlmHead adds the head after value h and the logits output.
func (e Encoder) mlmHead(g *onnx.Graph, node func(op string, in []string, out string, attrs ...onnx.Attr), h string) {
	tb := e.MLMTables()
	hd, vd := int64(e.Hidden), int64(e.Vocab)
	g.Initializers = append(g.Initializers,
		onnx.Tensor{Name: "cls.predictions.transform.dense.weight", Dims: []int64{hd, hd}, Floats: flat(tb.D)},
		onnx.Tensor{Name: "cls.predictions.transform.dense.bias", Dims: []int64{hd}, Floats: tb.DB},
		onnx.Tensor{Name: "cls.predictions.transform.LayerNorm.weight", Dims: []int64{hd}, Floats: tb.G},
		onnx.Tensor{Name: "cls.predictions.transform.LayerNorm.bias", Dims: []int64{hd}, Floats: tb.LB},
		onnx.Tensor{Name: "cls.predictions.decoder.weight", Dims: []int64{hd, vd}, Floats: flat(tb.V)},
		onnx.Tensor{Name: "cls.predictions.bias", Dims: []int64{vd}, Floats: tb.VB},
		onnx.Tensor{Name: "mlm.half", Dims: []int64{1}, Floats: []float32{0.5}},
		onnx.Tensor{Name: "mlm.one", Dims: []int64{1}, Floats: []float32{1}},
		onnx.Tensor{Name: "mlm.sqrt2", Dims: []int64{1}, Floats: []float32{float32(math.Sqrt2)}},
	)
	node("MatMul", []string{h, "cls.predictions.transform.dense.weight"}, "mlm.mm")
	node("Add", []string{"mlm.mm", "cls.predictions.transform.dense.bias"}, "mlm.d")
	node("Div", []string{"mlm.d", "mlm.sqrt2"}, "mlm.ds")
	node("Erf", []string{"mlm.ds"}, "mlm.erf")
	node("Add", []string{"mlm.erf", "mlm.one"}, "mlm.erf1")
	node("Mul", []string{"mlm.d", "mlm.erf1"}, "mlm.g2")
	node("Mul", []string{"mlm.g2", "mlm.half"}, "mlm.gelu")
	node("LayerNormalization", []string{"mlm.gelu", "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias"}, "mlm.ln",
		onnx.IntAttr("axis", -1), onnx.FloatAttr("epsilon", mlmEps))
	node("MatMul", []string{"mlm.ln", "cls.predictions.decoder.weight"}, "mlm.dec")
	node("Add", []string{"mlm.dec", "cls.predictions.bias"}, "logits")
	g.Outputs = append(g.Outputs, onnx.Value{Name: "logits", Tensor: true, Elem: onnx.Float,
		Dims: []onnx.Dim{{Param: "batch"}, {Param: "sequence"}, {Value: vd}}})
}
