//go:build cgo

package engine

import (
	"fmt"
	"math"

	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/wire"
)

// onnxChain is what the engine computes after the graph when it pools
// last_hidden_state: a sentence-transformers chain (see hfmodel.Chain) of
// Pooling, Dense and Normalize modules, evaluated as their forward passes
// do, in float64 over the float32 hidden states. A graph whose
// sentence_embedding output is used holds the chain itself: nothing runs
// after it.
type onnxChain struct {
	modes     []string // pooling modes (hfmodel.PoolingModes' names), concatenated in that order
	dense     []denseLayer
	normalize bool   // a Normalize module
	desc      string // hfmodel.Chain.String(): LOAD's st_modules must equal it
	// projection: a multi-vector chain (hfmodel.Chain.MultiVector), whose
	// Dense modules project every token (project) and which pools nothing.
	projection bool
}

// denseLayer is a Dense module: out = act(W·in + b).
type denseLayer struct {
	in, out int
	w, b    []float32 // w row-major [out][in]; b nil without bias
	act     string
}

// wirePoolingMode maps EMBED_BATCH's and LOAD's pooling names to
// sentence-transformers' modes.
var wirePoolingMode = map[string]string{PoolingMean: "mean", PoolingCLS: "cls", PoolingLast: "lasttoken"}

// newONNXChain reads the chain's Dense weights. override, when not "",
// is the pooling LOAD asked for: it replaces the Pooling module's modes.
func newONNXChain(c hfmodel.Chain, override string) (onnxChain, error) {
	ch := onnxChain{modes: []string{"mean"}, desc: c.String(), projection: c.MultiVector()}
	if p := c.Pooling(); p != nil {
		// include_prompt false changes nothing here: the module refuses a
		// prompt (or --prefix) for such a model, and without one
		// sentence-transformers pools every token too.
		ch.modes = p.Modes
	}
	ch = ch.withPooling(override)
	for _, m := range c.Modules {
		switch m.Kind {
		case hfmodel.ModDense:
			w, b, err := hfmodel.DenseWeights(m)
			if err != nil {
				return ch, wire.Errorf(wire.CodeArtifactInvalid, "%w", err)
			}
			ch.dense = append(ch.dense, denseLayer{in: m.In, out: m.Out, w: w, b: b, act: m.Activation})
		case hfmodel.ModNormalize:
			ch.normalize = true
		}
	}
	return ch, nil
}

// withPooling is the chain with its pooling replaced by the wire pooling
// name pool (mean, cls, last); "" keeps it.
func (ch onnxChain) withPooling(pool string) onnxChain {
	if pool != PoolingDefault {
		ch.modes = []string{wirePoolingMode[pool]}
	}
	return ch
}

// project puts one token's hidden state h through the Dense modules and
// writes it L2-normalised to dst (ch.dims(len(h)) values): a multi-vector
// chain's token vector.
func (ch onnxChain) project(h []float32, dst []float32) {
	v := make([]float64, len(h))
	for i, x := range h {
		v[i] = float64(x)
	}
	for _, d := range ch.dense {
		v = d.apply(v)
	}
	normalize64(v)
	for i, x := range v {
		dst[i] = float32(x)
	}
}

// dims is the chain's output width over hidden states of width hidden.
func (ch onnxChain) dims(hidden int) int {
	if n := len(ch.dense); n > 0 {
		return ch.dense[n-1].out
	}
	return len(ch.modes) * hidden
}

// check verifies the chain against the graph's hidden width.
func (ch onnxChain) check(path string, hidden int) error {
	d := len(ch.modes) * hidden
	for i, l := range ch.dense {
		if l.in != d {
			return wire.Errorf(wire.CodeArtifactInvalid, "%s: Dense module %d takes %d values; the pooling (%v over %d-wide hidden states) and the modules before it give %d",
				path, i+1, l.in, ch.modes, hidden, d)
		}
		d = l.out
	}
	return nil
}

// apply pools h (l tokens × w values, row-major), leaving out its first
// from tokens, and runs the Dense and Normalize modules, writing the result
// to dst (ch.dims(w) values).
func (ch onnxChain) apply(h []float32, l, w, from int, dst []float32) {
	v := make([]float64, 0, len(ch.modes)*w)
	for _, mode := range ch.modes {
		v = poolMode(v, mode, h, l, w, from)
	}
	for _, d := range ch.dense {
		v = d.apply(v)
	}
	if ch.normalize {
		normalize64(v)
	}
	for i, x := range v {
		dst[i] = float32(x)
	}
}

// poolMode appends one mode's pooled vector of h to v, as
// sentence-transformers' Pooling.forward computes it for an unpadded
// sequence whose attention mask is zero on its first from tokens (the
// prompt, with include_prompt false) and one on the others. cls takes token
// 0 regardless, as it does; with every token masked, max gives -1e9 and the
// others zeros, as its clamped divisions do.
func poolMode(v []float64, mode string, h []float32, l, w, from int) []float64 {
	row := func(j int) []float32 { return h[j*w : (j+1)*w] }
	from = min(max(from, 0), l)
	switch mode {
	case "cls":
		for _, x := range row(0) {
			v = append(v, float64(x))
		}
		return v
	case "lasttoken":
		if from == l {
			return append(v, make([]float64, w)...)
		}
		for _, x := range row(l - 1) {
			v = append(v, float64(x))
		}
		return v
	case "max":
		out := make([]float64, w)
		for d := range out {
			out[d] = -1e9
		}
		for j := from; j < l; j++ {
			for d, x := range row(j) {
				out[d] = math.Max(out[d], float64(x))
			}
		}
		return append(v, out...)
	}
	// mean, mean_sqrt_len_tokens, weightedmean: a weighted sum over tokens
	// (weight 1, or position 1…l for weightedmean) divided by the weights'
	// sum (mean, weightedmean) or the square root of the token count.
	sum := make([]float64, w)
	var weights float64
	for j := from; j < l; j++ {
		wt := 1.0
		if mode == "weightedmean" {
			wt = float64(j + 1)
		}
		weights += wt
		for d, x := range row(j) {
			sum[d] += wt * float64(x)
		}
	}
	div := max(weights, 1e-9) // torch.clamp(sum_mask, min=1e-9)
	if mode == "mean_sqrt_len_tokens" {
		div = math.Sqrt(max(float64(l-from), 1e-9))
	}
	for d := range sum {
		sum[d] /= div
	}
	return append(v, sum...)
}

// apply computes act(W·x + b).
func (d denseLayer) apply(x []float64) []float64 {
	out := make([]float64, d.out)
	for o := range out {
		var s float64
		for i, wt := range d.w[o*d.in : (o+1)*d.in] {
			s += float64(wt) * x[i]
		}
		if d.b != nil {
			s += float64(d.b[o])
		}
		out[o] = activate(d.act, s)
	}
	return out
}

// activate computes the torch.nn activations hfmodel.Activations names.
func activate(act string, x float64) float64 {
	switch act {
	case "tanh":
		return math.Tanh(x)
	case "relu":
		return math.Max(x, 0)
	case "sigmoid":
		return 1 / (1 + math.Exp(-x))
	case "gelu": // torch.nn.GELU(): the exact (erf) form
		return 0.5 * x * (1 + math.Erf(x/math.Sqrt2))
	case "silu":
		return x / (1 + math.Exp(-x))
	}
	return x // identity
}

// normalize64 scales v to unit length as torch.nn.functional.normalize
// does (a zero vector stays zero).
func normalize64(v []float64) {
	var s float64
	for _, x := range v {
		s += x * x
	}
	n := max(math.Sqrt(s), 1e-12)
	for i := range v {
		v[i] /= n
	}
}

func (ch onnxChain) String() string {
	return fmt.Sprintf("modes=%v dense=%d normalize=%v", ch.modes, len(ch.dense), ch.normalize)
}
