package convert

import (
	"fmt"
	"math"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/onnx"
)

// ModernBERT (ModernBertModel: gte-modernbert-base, modernbert-embed-base;
// ModernBertForSequenceClassification: gte-reranker-modernbert-base, whose
// head modernHead adds)
// is an encoder of another shape than BERT's, so it has a graph of its own
// (modernGraph): token embeddings and a LayerNorm, no positions there;
// pre-norm layers (the first without attn_norm) whose attention takes its
// q, k and v from one Wqkv, rotates q and k (rotary positions, NeoX halves,
// one base for global layers and another for local ones) and, in local
// layers, sees only keys within local_attention/2 positions; a GeGLU
// feed-forward layer (Wi's first half through exact GELU times its second
// half, then Wo); a final LayerNorm. No biases in the encoder, as the checkpoints
// have none (norm_bias, attention_bias and mlp_bias true are refused).

// modernConfig is what config.json says of a ModernBERT beyond BERT's keys.
type modernConfig struct {
	Activation     string                     `json:"hidden_activation"`
	NormEps        float64                    `json:"norm_eps"`
	NormBias       bool                       `json:"norm_bias"`
	AttentionBias  bool                       `json:"attention_bias"`
	MLPBias        bool                       `json:"mlp_bias"`
	LocalAttention int                        `json:"local_attention"`
	GlobalEvery    int                        `json:"global_attn_every_n_layers"`
	GlobalTheta    float64                    `json:"global_rope_theta"`
	LocalTheta     float64                    `json:"local_rope_theta"`
	LayerTypes     []string                   `json:"layer_types"`     // transformers 5
	RopeParameters map[string]*ropeParameters `json:"rope_parameters"` // transformers 5: by layer type
	// A ModernBertForSequenceClassification's head.
	ClassifierPooling    string `json:"classifier_pooling"`
	ClassifierActivation string `json:"classifier_activation"`
	ClassifierBias       bool   `json:"classifier_bias"`
}

// modernLayers is how a ModernBERT's layers attend: global (full) or local,
// and each kind's rotary base.
type modernLayers struct {
	global                  []bool
	window                  int // a local layer's keys: within this many positions of the query
	globalTheta, localTheta float64
	meanPool                bool // a classifier's pooling: the mean over the attention mask, else the first token
}

// readModern reads a ModernBERT's settings, filling BERT's (activation, eps)
// for the checks they share.
func (s *Source) readModern(cfgPath string, b []byte) error {
	m := modernConfig{NormEps: 1e-5, GlobalEvery: 3, GlobalTheta: 160000, LocalTheta: 10000, LocalAttention: 128, Activation: "gelu",
		ClassifierPooling: "cls", ClassifierActivation: "gelu"}
	if err := readlimit.UnmarshalJSON(b, &m); err != nil {
		return fmt.Errorf("convert: %s: %w: %v", cfgPath, ErrRefused, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("convert: %s: %w: %s", cfgPath, ErrRefused, fmt.Sprintf(format, args...))
	}
	switch {
	case m.NormBias || m.AttentionBias || m.MLPBias:
		return bad("norm_bias %v, attention_bias %v, mlp_bias %v: synapse converts ModernBERT without biases, as its checkpoints are", m.NormBias, m.AttentionBias, m.MLPBias)
	case m.GlobalEvery < 1 || m.LocalAttention < 2:
		return bad("global_attn_every_n_layers %d, local_attention %d: want positive", m.GlobalEvery, m.LocalAttention)
	case len(m.LayerTypes) > 0 && len(m.LayerTypes) != s.Config.Layers:
		return bad("layer_types names %d layers; num_hidden_layers is %d", len(m.LayerTypes), s.Config.Layers)
	case s.arch.classifier && m.ClassifierPooling != "mean" && m.ClassifierPooling != "cls":
		return bad("classifier_pooling %q; synapse converts \"mean\" and \"cls\"", m.ClassifierPooling)
	case s.arch.classifier && (m.ClassifierActivation != "gelu" || m.ClassifierBias):
		return bad("classifier_activation %q, classifier_bias %v; synapse converts ModernBERT's head with \"gelu\" (exact, erf) and no dense bias, as its checkpoints have", m.ClassifierActivation, m.ClassifierBias)
	}
	l := modernLayers{window: m.LocalAttention / 2, globalTheta: m.GlobalTheta, localTheta: m.LocalTheta, meanPool: m.ClassifierPooling == "mean"}
	for kind, p := range m.RopeParameters {
		if p == nil {
			continue
		}
		if p.RopeType != "" && p.RopeType != "default" {
			return bad("rope_parameters %s: rope_type %q; synapse converts plain rotary positions", kind, p.RopeType)
		}
		switch kind {
		case "full_attention":
			l.globalTheta = p.RopeTheta
		case "sliding_attention":
			l.localTheta = p.RopeTheta
		}
	}
	for i := range s.Config.Layers {
		g := i%m.GlobalEvery == 0
		if len(m.LayerTypes) > 0 {
			switch m.LayerTypes[i] {
			case "full_attention":
				g = true
			case "sliding_attention":
				g = false
			default:
				return bad("layer_types[%d] %q: want full_attention or sliding_attention", i, m.LayerTypes[i])
			}
		}
		l.global = append(l.global, g)
	}
	if l.globalTheta <= 0 || l.localTheta <= 0 {
		return bad("rope thetas %v and %v: want positive", l.globalTheta, l.localTheta)
	}
	eps := m.NormEps
	s.Config.HiddenAct, s.Config.LayerNormEps, s.modern = m.Activation, &eps, &l
	return nil
}

// modernGraph converts a ModernBERT: inputs input_ids, attention_mask and
// token_type_ids (unused: ModernBERT has none; kept so that every
// converted graph takes the same inputs), output last_hidden_state.
func (s *Source) modernGraph() (onnx.Model, error) {
	w, err := s.openWeights()
	if err != nil {
		return onnx.Model{}, err
	}
	defer w.close()
	e := newEncoder(s, w)
	c := s.Config
	h, vocab := int64(c.HiddenSize), int64(c.VocabSize)
	if vocab <= 0 {
		vocab = w.shapeRows("embeddings.tok_embeddings.weight")
	}
	tokE, err := w.tensor("embeddings.tok_embeddings.weight", vocab, h)
	if err != nil {
		return onnx.Model{}, err
	}
	x := e.node("emb.tok", "Gather", []string{e.weight("embeddings.tok_embeddings.weight", tokE, vocab, h), "input_ids"}, onnx.IntAttr("axis", 0))
	if x, err = e.norm("embeddings.norm", x); err != nil {
		return onnx.Model{}, err
	}
	pad := e.maskBias()
	far := e.node("local.far", "Greater", []string{e.node("local.dist", "Abs", []string{e.relPositions()}),
		e.constant(onnx.Tensor{Name: "c.window", Ints: []int64{int64(s.modern.window)}})})
	band := e.node("local.band", "Mul", []string{e.node("local.far.f", "Cast", []string{far}, onnx.IntAttr("to", int64(onnx.Float))),
		e.scalar("c.lowest", -math.MaxFloat32)})
	local := e.node("mask.bias.local", "Add", []string{pad, band})
	seq := e.node("rope.seq", "Slice", []string{e.node("rope.shape", "Shape", []string{"input_ids"}), e.ints("c.1", 1), e.ints("c.2", 2)})
	gcos, gsin := e.rotary("global", s.modern.globalTheta, seq)
	lcos, lsin := e.rotary("local", s.modern.localTheta, seq)
	for l := range c.Layers {
		bias, cos, sin := pad, gcos, gsin
		if !s.modern.global[l] {
			bias, cos, sin = local, lcos, lsin
		}
		if x, err = e.modernLayer(l, x, bias, cos, sin); err != nil {
			return onnx.Model{}, err
		}
	}
	if x, err = e.norm("final_norm", x); err != nil {
		return onnx.Model{}, err
	}
	e.node("last_hidden_state", "Identity", []string{x})
	e.g.Outputs = append(e.g.Outputs, onnx.Value{Name: "last_hidden_state", Tensor: true, Elem: onnx.Float,
		Dims: []onnx.Dim{{Param: "batch"}, {Param: "sequence"}, {Value: h}}})
	if s.arch.classifier {
		if err := e.modernHead(x); err != nil {
			return onnx.Model{}, err
		}
	}
	if e.bytes > maxGraphBytes {
		return onnx.Model{}, fmt.Errorf("convert: %s: %w: %d bytes of float32 weights; a self-contained ONNX graph holds at most %d",
			s.Dir, ErrRefused, e.bytes, int64(maxGraphBytes))
	}
	return onnx.Model{Opset: 17, Producer: fmt.Sprintf("synapse-convert %d", Version), Graph: e.g}, nil
}

// norm adds a LayerNorm without bias over the last axis.
func (e *encoder) norm(module, x string) (string, error) {
	h := int64(e.s.Config.HiddenSize)
	g, err := e.w.tensor(module+".weight", h)
	if err != nil {
		return "", err
	}
	return e.node(module, "LayerNormalization", []string{x, e.weight(module+".weight", g, h)},
		onnx.IntAttr("axis", -1), onnx.FloatAttr("epsilon", e.s.Config.eps())), nil
}

// rows adds x·Wᵀ for rows [from, from+n) of the bias-free torch Linear
// weight w [out, in] (a part of a fused Wqkv or Wi).
func (e *encoder) rows(name, x string, w []float32, in, from, n int64) string {
	part := w[from*in : (from+n)*in]
	return e.node(name+".matmul", "MatMul", []string{x, e.weight(name+".weight", transpose(part, int(n), int(in)), in, n)})
}

// rotary adds the cos and sin tables [sequence, head] of one rotary base,
// as transformers computes them (inverse frequencies 1/θ^(2i/d) in float32,
// each used twice: NeoX's halves), cut to the sequence's length seq.
func (e *encoder) rotary(kind string, theta float64, seq string) (string, string) {
	c := e.s.Config
	d, p := c.HiddenSize/c.Heads, c.MaxPositionEmbeddings
	cos, sin := make([]float32, p*d), make([]float32, p*d)
	for i := range d / 2 {
		inv := float32(1 / math.Pow(theta, float64(float32(2*i)/float32(d))))
		for pos := range p {
			f := float64(float32(pos) * inv)
			cos[pos*d+i], cos[pos*d+i+d/2] = float32(math.Cos(f)), float32(math.Cos(f))
			sin[pos*d+i], sin[pos*d+i+d/2] = float32(math.Sin(f)), float32(math.Sin(f))
		}
	}
	cut := func(name string, v []float32) string {
		return e.node(name, "Slice", []string{e.weight(name+".table", v, int64(p), int64(d)), e.ints("c.0", 0), seq, e.ints("c.0", 0)})
	}
	return cut("rope."+kind+".cos", cos), cut("rope."+kind+".sin", sin)
}

// rotate applies the rotary positions to x [batch, heads, seq, head]:
// x·cos + rotate_half(x)·sin, rotate_half(x) = (-x₂, x₁) of its halves.
func (e *encoder) rotate(name, x, cos, sin string, d int64) string {
	axis := e.ints("c.axis3", 3)
	x1 := e.node(name+".x1", "Slice", []string{x, e.ints("c.0", 0), e.ints("c.half_head", d/2), axis})
	x2 := e.node(name+".x2", "Slice", []string{x, e.ints("c.half_head", d/2), e.ints("c.head", d), axis})
	half := e.node(name+".half", "Concat", []string{e.node(name+".neg", "Neg", []string{x2}), x1}, onnx.IntAttr("axis", 3))
	return e.node(name, "Add", []string{e.node(name+".cos", "Mul", []string{x, cos}), e.node(name+".sin", "Mul", []string{half, sin})})
}

// modernLayer adds ModernBERT's layer l over x [batch, seq, hidden]:
// x + attention(attn_norm(x)), then + GeGLU(mlp_norm(x)).
func (e *encoder) modernLayer(l int, x, bias, cos, sin string) (string, error) {
	c := e.s.Config
	h, heads, inter := int64(c.HiddenSize), int64(c.Heads), int64(c.Intermediate)
	d := h / heads
	p := fmt.Sprintf("layers.%d.", l)
	in := x
	if l > 0 { // the first layer's attn_norm is Identity: the embeddings' norm came just before
		var err error
		if in, err = e.norm(p+"attn_norm", x); err != nil {
			return "", err
		}
	}
	wqkv, err := e.w.tensor(p+"attn.Wqkv.weight", 3*h, h)
	if err != nil {
		return "", err
	}
	split := e.ints("c.split_heads", 0, 0, heads, d)
	var qkv [3]string
	for i, name := range []string{"q", "k", "v"} {
		y := e.rows(p+"attn."+name, in, wqkv, h, int64(i)*h, h)
		r := e.node(p+"attn."+name+".heads", "Reshape", []string{y, split})
		qkv[i] = e.node(p+"attn."+name+".t", "Transpose", []string{r}, onnx.Attr{Name: "perm", Ints: []int64{0, 2, 1, 3}})
	}
	q, k := e.rotate(p+"attn.q.rope", qkv[0], cos, sin, d), e.rotate(p+"attn.k.rope", qkv[1], cos, sin, d)
	kT := e.node(p+"attn.k.rope.t", "Transpose", []string{k}, onnx.Attr{Name: "perm", Ints: []int64{0, 1, 3, 2}})
	scores := e.node(p+"attn.scores", "Mul", []string{e.node(p+"attn.qk", "MatMul", []string{q, kT}), e.scalar(p+"attn.scale", float32(1/math.Sqrt(float64(d))))})
	probs := e.node(p+"attn.probs", "Softmax", []string{e.node(p+"attn.masked", "Add", []string{scores, bias})}, onnx.IntAttr("axis", -1))
	ctx := e.node(p+"attn.context.t", "Transpose", []string{e.node(p+"attn.context", "MatMul", []string{probs, qkv[2]})},
		onnx.Attr{Name: "perm", Ints: []int64{0, 2, 1, 3}})
	merged := e.node(p+"attn.merged", "Reshape", []string{ctx, e.ints("c.merge_heads", 0, 0, h)})
	wo, err := e.w.tensor(p+"attn.Wo.weight", h, h)
	if err != nil {
		return "", err
	}
	x1 := e.node(p+"attn.residual", "Add", []string{x, e.rows(p+"attn.Wo", merged, wo, h, 0, h)})
	m, err := e.norm(p+"mlp_norm", x1)
	if err != nil {
		return "", err
	}
	wi, err := e.w.tensor(p+"mlp.Wi.weight", 2*inter, h)
	if err != nil {
		return "", err
	}
	act := e.gelu(p+"mlp.gelu", e.rows(p+"mlp.Wi.input", m, wi, h, 0, inter))
	glu := e.node(p+"mlp.glu", "Mul", []string{act, e.rows(p+"mlp.Wi.gate", m, wi, h, inter, inter)})
	wo2, err := e.w.tensor(p+"mlp.Wo.weight", h, inter)
	if err != nil {
		return "", err
	}
	return e.node(p+"mlp.residual", "Add", []string{x1, e.rows(p+"mlp.Wo", glu, wo2, inter, 0, h)}), nil
}

// modernHead adds ModernBertForSequenceClassification's head over x
// [batch, seq, hidden], as the logits output [batch, labels]: pooling (the
// mean of the tokens the attention mask keeps, or the first token), then
// head.dense (no bias), exact GELU, head.norm (no bias) and the classifier
// (with its bias).
func (e *encoder) modernHead(x string) error {
	h := int64(e.s.Config.HiddenSize)
	for _, n := range []string{"head.dense.weight", "head.norm.weight", "classifier.weight", "classifier.bias"} {
		if !e.w.has(n) { // the head is outside the encoder's prefix: name it as the checkpoint would
			return fmt.Errorf("convert: %s: %w: no tensor %s for %s", e.w.fileNames(), ErrRefused, n, e.s.Arch)
		}
	}
	labels := e.w.shapeRows("classifier.weight")
	var pooled string
	if e.s.modern.meanPool {
		m := e.node("head.mask", "Unsqueeze", []string{e.node("head.mask.f", "Cast", []string{"attention_mask"}, onnx.IntAttr("to", int64(onnx.Float))), e.ints("c.axis2", 2)})
		sum := e.node("head.sum", "ReduceSum", []string{e.node("head.masked", "Mul", []string{x, m}), e.ints("c.1", 1)}, onnx.IntAttr("keepdims", 0))
		count := e.node("head.count", "ReduceSum", []string{m, e.ints("c.1", 1)}, onnx.IntAttr("keepdims", 0))
		pooled = e.node("head.mean", "Div", []string{sum, count})
	} else {
		pooled = e.node("head.first", "Gather", []string{x, e.scalarInt("c.zero_index", 0)}, onnx.IntAttr("axis", 1))
	}
	dw, err := e.w.tensor("head.dense.weight", h, h)
	if err != nil {
		return err
	}
	act := e.gelu("head.gelu", e.rows("head.dense", pooled, dw, h, 0, h))
	normed, err := e.norm("head.norm", act)
	if err != nil {
		return err
	}
	return e.logits(normed, h, labels)
}
