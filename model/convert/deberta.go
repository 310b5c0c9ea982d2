package convert

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/onnx"
)

// DeBERTa-v2/v3 (DebertaV2ForSequenceClassification: mxbai-rerank-*-v1 and
// the other DeBERTa-v3 cross-encoders) has a graph of its own
// (debertaGraph): word (and, when type_vocab_size > 0, token type)
// embeddings, LayerNorm, padding rows zeroed, no absolute positions; post-norm
// layers as BERT's, but with disentangled attention: besides the content
// scores q·k, a content-to-position term q_i·Kr[δ(i,j)] and a
// position-to-content term k_j·Qr[δ(i,j)], where Kr and Qr are the layer's
// key_proj and query_proj over the shared relative embeddings (after their
// LayerNorm, norm_rel_ebd "layer_norm") and δ is the relative position
// i − j in DeBERTa's log buckets, shifted into the table; the three are
// scaled by √(head × 3). The classifier head is the ContextPooler (first
// token, dense, GELU) and a dense layer: the logits output. Every detail
// follows transformers' modeling_deberta_v2.py. DeBERTa-v3's attention
// flags are required, other settings refused (readDeberta); token types,
// no position buckets (relative positions clamped to max_relative_positions)
// and rel_embeddings without a LayerNorm are read too (DeBERTa-v2).

// debertaConfig is what config.json says of a DeBERTa-v2/v3 beyond BERT's
// keys; absent keys take transformers' defaults (DebertaV2Config and the
// getattr defaults of the modules).
type debertaConfig struct {
	RelativeAttention    bool            `json:"relative_attention"`
	PositionBiasedInput  *bool           `json:"position_biased_input"`
	PosAttType           json.RawMessage `json:"pos_att_type"`
	ShareAttKey          bool            `json:"share_att_key"`
	PositionBuckets      *int            `json:"position_buckets"`
	MaxRelativePositions *int            `json:"max_relative_positions"`
	NormRelEbd           string          `json:"norm_rel_ebd"`
	ConvKernelSize       int             `json:"conv_kernel_size"`
	EmbeddingSize        *int            `json:"embedding_size"`
	AttentionHeadSize    *int            `json:"attention_head_size"`
	PoolerHiddenSize     *int            `json:"pooler_hidden_size"`
	PoolerHiddenAct      *string         `json:"pooler_hidden_act"`
	LayerNormEps         *float64        `json:"layer_norm_eps"`
}

// debertaLayout is how a DeBERTa's relative positions are read: span is
// the table's half (position_buckets, else max_relative_positions), buckets
// position_buckets (≤ 0: none, relative positions used as they are),
// maxRel max_relative_positions, relNorm whether rel_embeddings has a
// LayerNorm.
type debertaLayout struct {
	span, buckets, maxRel int
	relNorm               bool
}

// debertaSupported says which DeBERTa a refusal names as converted.
const debertaSupported = "synapse converts DeBERTa-v3's layout: relative_attention true, pos_att_type p2c|c2p, share_att_key true, position_biased_input false, no conv layer, embedding_size = hidden_size, pooler_hidden_act gelu"

// readDeberta reads and checks a DeBERTa-v2/v3's settings.
func (s *Source) readDeberta(cfgPath string, b []byte) error {
	var m debertaConfig
	if err := readlimit.UnmarshalJSON(b, &m); err != nil {
		return fmt.Errorf("convert: %s: %w: %v", cfgPath, ErrRefused, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("convert: %s: %w: %s; %s", cfgPath, ErrRefused, fmt.Sprintf(format, args...), debertaSupported)
	}
	c := s.Config
	att, err := posAttTypes(m.PosAttType)
	if err != nil {
		return bad("%v", err)
	}
	normRel := strings.Split(strings.ToLower(m.NormRelEbd), "|")
	for i := range normRel {
		normRel[i] = strings.TrimSpace(normRel[i])
	}
	switch {
	case !m.RelativeAttention:
		return bad("relative_attention is false (or absent)")
	case m.PositionBiasedInput == nil || *m.PositionBiasedInput:
		return bad("position_biased_input is true (or absent, transformers' default): absolute position embeddings")
	case !slices.Equal(att, []string{"c2p", "p2c"}):
		return bad("pos_att_type %s", m.PosAttType)
	case !m.ShareAttKey:
		return bad("share_att_key is false (or absent): pos_key_proj and pos_query_proj")
	case m.ConvKernelSize > 0:
		return bad("conv_kernel_size %d: a convolution after the first layer", m.ConvKernelSize)
	case m.EmbeddingSize != nil && *m.EmbeddingSize != c.HiddenSize:
		return bad("embedding_size %d differs from hidden_size %d (embed_proj)", *m.EmbeddingSize, c.HiddenSize)
	case c.Heads > 0 && m.AttentionHeadSize != nil && *m.AttentionHeadSize != c.HiddenSize/c.Heads:
		return bad("attention_head_size %d is not hidden_size / num_attention_heads", *m.AttentionHeadSize)
	case m.PoolerHiddenSize != nil && *m.PoolerHiddenSize != c.HiddenSize:
		return bad("pooler_hidden_size %d differs from hidden_size %d", *m.PoolerHiddenSize, c.HiddenSize)
	case m.PoolerHiddenAct != nil && *m.PoolerHiddenAct != "gelu":
		return bad("pooler_hidden_act %q", *m.PoolerHiddenAct)
	case c.MaxPositionEmbeddings < 1:
		return bad("max_position_embeddings %d: want positive", c.MaxPositionEmbeddings)
	}
	l := debertaLayout{buckets: -1, maxRel: -1, relNorm: slices.Contains(normRel, "layer_norm")}
	if m.PositionBuckets != nil {
		l.buckets = *m.PositionBuckets
	}
	if m.MaxRelativePositions != nil {
		l.maxRel = *m.MaxRelativePositions
	}
	if l.maxRel < 1 {
		l.maxRel = c.MaxPositionEmbeddings
	}
	l.span = l.maxRel
	if l.buckets > 0 {
		l.span = l.buckets
	}
	if l.buckets > 0 && (l.buckets < 4 || l.maxRel <= l.buckets/2+1) {
		return bad("position_buckets %d with max_relative_positions %d: want at least 4 buckets and max_relative_positions > position_buckets/2 + 1", l.buckets, l.maxRel)
	}
	eps := 1e-7 // DebertaV2Config's default
	if m.LayerNormEps != nil {
		eps = *m.LayerNormEps
	}
	s.Config.LayerNormEps, s.deberta = &eps, &l
	return nil
}

// posAttTypes reads pos_att_type, a list or a "|"-separated string, as
// transformers does (lowercased, trimmed), sorted.
func posAttTypes(raw json.RawMessage) ([]string, error) {
	var out []string
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("no pos_att_type")
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		out = strings.Split(one, "|")
	} else if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("pos_att_type %s: want a list or a string: %v", raw, err)
	}
	for i := range out {
		out[i] = strings.ToLower(strings.TrimSpace(out[i]))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// debertaBucket is transformers' make_log_bucket_position of one relative
// position rel (query less key) as torch computes it in float32: exact
// within bucketSize/2 each way, then logarithmic up to maxPosition.
func debertaBucket(rel, bucketSize, maxPosition int) int {
	mid := bucketSize / 2
	if rel < mid && rel > -mid {
		return rel
	}
	abs := rel
	if abs < 0 {
		abs = -abs
	}
	if abs <= mid {
		return rel
	}
	x := float32(math.Log(float64(float32(abs) / float32(mid))))
	den := float32(math.Log(float64(float32(float64(maxPosition-1) / float64(mid)))))
	v := int(float32(math.Ceil(float64(x/den*float32(mid-1))))) + mid
	if rel < 0 {
		return -v
	}
	return v
}

// debertaIndex is the row of a layer's relative keys (c2p) and relative
// queries (p2c) that each relative position r = key − query from −(p−1) to
// p−1 reads, as transformers' disentangled_attention_bias clamps it:
// bucket(query − key) + span, clamped to [0, 2·span). transformers indexes
// p2c by −bucket(key − query) + span with query and key swapped, then
// transposes: the same row, the buckets being odd (bucket(−r) = −bucket(r)).
func (l debertaLayout) debertaIndex(p int) []int64 {
	idx := make([]int64, 2*p-1)
	for i := range idx {
		rel := -(i - (p - 1)) // query − key
		if l.buckets > 0 {
			rel = debertaBucket(rel, l.buckets, l.maxRel)
		}
		idx[i] = int64(min(max(rel+l.span, 0), 2*l.span-1))
	}
	return idx
}

// debertaGraph converts a DebertaV2ForSequenceClassification: inputs
// input_ids, attention_mask and token_type_ids (read only when
// type_vocab_size > 0), outputs last_hidden_state and logits [batch,
// labels].
func (s *Source) debertaGraph() (onnx.Model, error) {
	w, err := s.openWeights()
	if err != nil {
		return onnx.Model{}, err
	}
	defer w.close()
	e := newEncoder(s, w)
	x, err := e.debertaEmbeddings()
	if err != nil {
		return onnx.Model{}, err
	}
	rel, err := e.debertaRelEmbeddings()
	if err != nil {
		return onnx.Model{}, err
	}
	bias := e.maskBias()
	idx := e.debertaIndices()
	for l := range s.Config.Layers {
		if x, err = e.debertaLayer(l, x, bias, rel, idx); err != nil {
			return onnx.Model{}, err
		}
	}
	e.node("last_hidden_state", "Identity", []string{x})
	h := int64(s.Config.HiddenSize)
	e.g.Outputs = append(e.g.Outputs, onnx.Value{Name: "last_hidden_state", Tensor: true, Elem: onnx.Float,
		Dims: []onnx.Dim{{Param: "batch"}, {Param: "sequence"}, {Value: h}}})
	if err := e.debertaHead(x); err != nil {
		return onnx.Model{}, err
	}
	if e.bytes > maxGraphBytes {
		return onnx.Model{}, fmt.Errorf("convert: %s: %w: %d bytes of float32 weights; a self-contained ONNX graph holds at most %d",
			s.Dir, ErrRefused, e.bytes, int64(maxGraphBytes))
	}
	return onnx.Model{Opset: 17, Producer: fmt.Sprintf("synapse-convert %d", Version), Graph: e.g}, nil
}

// debertaEmbeddings adds DebertaV2Embeddings: word embeddings, plus token
// type embeddings when type_vocab_size > 0, LayerNorm, and padding rows
// zeroed (multiplied by the attention mask).
func (e *encoder) debertaEmbeddings() (string, error) {
	c := e.s.Config
	h, vocab := int64(c.HiddenSize), int64(c.VocabSize)
	if vocab <= 0 {
		vocab = e.w.shapeRows(wordEmb)
	}
	wordE, err := e.w.tensor(wordEmb, vocab, h)
	if err != nil {
		return "", err
	}
	x := e.node("emb.word", "Gather", []string{e.weight(wordEmb, wordE, vocab, h), "input_ids"}, onnx.IntAttr("axis", 0))
	if types := int64(c.TypeVocabSize); types > 0 {
		const typeEmb = "embeddings.token_type_embeddings.weight"
		typeE, err := e.w.tensor(typeEmb, types, h)
		if err != nil {
			return "", err
		}
		t := e.node("emb.type", "Gather", []string{e.weight(typeEmb, typeE, types, h), "token_type_ids"}, onnx.IntAttr("axis", 0))
		x = e.node("emb.word_type", "Add", []string{x, t})
	}
	x, err = e.layerNorm("embeddings.LayerNorm", x)
	if err != nil {
		return "", err
	}
	m := e.node("emb.mask", "Unsqueeze", []string{e.node("emb.mask.float", "Cast", []string{"attention_mask"}, onnx.IntAttr("to", int64(onnx.Float))),
		e.ints("c.axis2", 2)})
	return e.node("emb.masked", "Mul", []string{x, m}), nil
}

// debertaRelEmbeddings adds the relative embeddings every layer reads:
// encoder.rel_embeddings [2·span, hidden], through encoder.LayerNorm when
// norm_rel_ebd says layer_norm.
func (e *encoder) debertaRelEmbeddings() (string, error) {
	const name = "encoder.rel_embeddings.weight"
	h, n := int64(e.s.Config.HiddenSize), int64(2*e.s.deberta.span)
	r, err := e.w.tensor(name, n, h)
	if err != nil {
		return "", err
	}
	rel := e.weight(name, r, n, h)
	if !e.s.deberta.relNorm {
		return rel, nil
	}
	return e.layerNorm("encoder.LayerNorm", rel)
}

// debertaIndices adds the gather index [batch, heads, seq, seq] of the c2p
// and p2c terms: each (query, key) pair's row of the relative keys and
// queries.
func (e *encoder) debertaIndices() string {
	p := e.s.Config.MaxPositionEmbeddings // no sequence is longer
	at := e.node("rel.index", "Add", []string{e.relPositions(), e.constant(onnx.Tensor{Name: "c.rel_offset", Ints: []int64{int64(p - 1)}})})
	shape := e.node("rel.expand", "Concat", []string{
		e.node("rel.batch", "Slice", []string{e.node("rel.in_shape", "Shape", []string{"input_ids"}), e.ints("c.0", 0), e.ints("c.1", 1)}),
		e.ints("c.heads", int64(e.s.Config.Heads)), e.node("rel.seq2", "Unsqueeze", []string{"rel.seq", e.ints("c.axis0", 0)}),
		"rel.seq2"}, onnx.IntAttr("axis", 0))
	idx := e.s.deberta.debertaIndex(p)
	g := e.node("rel.rows", "Gather", []string{e.constant(onnx.Tensor{Name: "rel.rows.table", Dims: []int64{int64(len(idx))}, Ints: idx}), at},
		onnx.IntAttr("axis", 0))
	return e.node("rel.rows.expanded", "Expand", []string{g, shape})
}

// linearAs adds x·Wᵀ + b for the torch Linear module named, [hidden,
// hidden], as node name: a layer's query_proj and key_proj serve both its
// content and its relative embeddings, their weights added once.
func (e *encoder) linearAs(module, name, x string) (string, error) {
	h := int64(e.s.Config.HiddenSize)
	wName, bName := module+".weight", module+".bias"
	if e.consts == nil {
		e.consts = map[string]bool{}
	}
	if !e.consts[wName] {
		w, err := e.w.tensor(wName, h, h)
		if err != nil {
			return "", err
		}
		b, err := e.w.tensor(bName, h)
		if err != nil {
			return "", err
		}
		e.weight(wName, transpose(w, int(h), int(h)), h, h)
		e.weight(bName, b, h)
		e.consts[wName] = true
	}
	return e.node(name, "Add", []string{e.node(name+".matmul", "MatMul", []string{x, wName}), bName}), nil
}

// debertaHeads adds the Linear module over x split into heads: [batch,
// heads, seq, head] or, for the relative embeddings [2·span, hidden]
// (rel), [heads, head, 2·span] (relPerm 1 2 0: the relative keys) or
// [heads, 2·span, head] (1 0 2: the relative queries).
func (e *encoder) debertaHeads(module, name, x string, rel bool, relPerm ...int64) (string, error) {
	c := e.s.Config
	h, heads := int64(c.HiddenSize), int64(c.Heads)
	y, err := e.linearAs(module, name, x)
	if err != nil {
		return "", err
	}
	if rel {
		r := e.node(name+".heads", "Reshape", []string{y, e.ints("c.rel_heads", 0, heads, h/heads)})
		return e.node(name+".t", "Transpose", []string{r}, onnx.Attr{Name: "perm", Ints: relPerm}), nil
	}
	r := e.node(name+".heads", "Reshape", []string{y, e.ints("c.split_heads", 0, 0, heads, h/heads)})
	return e.node(name+".t", "Transpose", []string{r}, onnx.Attr{Name: "perm", Ints: []int64{0, 2, 1, 3}}), nil
}

// debertaLayer adds DeBERTa's layer l over x [batch, seq, hidden]:
// disentangled self-attention (debertaScores), its output projection,
// residual and LayerNorm, then BERT's feed-forward layer (erf GELU),
// residual and LayerNorm.
func (e *encoder) debertaLayer(l int, x, bias, rel, idx string) (string, error) {
	p := fmt.Sprintf("encoder.layer.%d.", l)
	scores, v, err := e.debertaScores(p, x, rel, idx)
	if err != nil {
		return "", err
	}
	probs := e.node(p+"probs", "Softmax", []string{e.node(p+"scores.masked", "Add", []string{scores, bias})}, onnx.IntAttr("axis", -1))
	return e.attended(p, probs, v, x)
}

// debertaScores adds layer p's attention scores [batch, heads, seq, seq]
// before the mask, as DisentangledSelfAttention computes them: q·(kᵀ/s)
// plus c2p/s and p2c/s, s = √(head × 3) in float32, where c2p[i,j] =
// q_i·Kr[idx(i,j)] and p2c[i,j] = k_j·Qr[idx(i,j)], Kr and Qr the layer's
// key_proj and query_proj over the relative embeddings (share_att_key).
// The scale is applied to q and k before the products (one division of
// [batch, heads, seq, head] each, not of [batch, heads, seq, seq]), and
// p2c is gathered from Qr·(kᵀ/s) [batch, heads, 2·span, seq] along its rows,
// with no transposition. It returns the values [batch, heads, seq, head] too.
func (e *encoder) debertaScores(p, x, rel, idx string) (string, string, error) {
	c := e.s.Config
	d := c.HiddenSize / c.Heads
	var hs [5]string // q, k, v, Kr [heads, head, 2·span], Qr [heads, 2·span, head]
	for i, m := range []struct {
		module, name, in string
		perm             []int64
	}{{"query_proj", "q", x, nil}, {"key_proj", "k", x, nil}, {"value_proj", "v", x, nil},
		{"key_proj", "rel.k", rel, []int64{1, 2, 0}}, {"query_proj", "rel.q", rel, []int64{1, 0, 2}}} {
		var err error
		if hs[i], err = e.debertaHeads(p+"attention.self."+m.module, p+m.name, m.in, i >= 3, m.perm...); err != nil {
			return "", "", err
		}
	}
	scale := e.scalar("c.deberta_scale", float32(math.Sqrt(float64(float32(d)*3))))
	kT := e.node(p+"k.tt", "Transpose", []string{hs[1]}, onnx.Attr{Name: "perm", Ints: []int64{0, 1, 3, 2}})
	kScaled := e.node(p+"k.scaled", "Div", []string{kT, scale}) // [batch, heads, head, seq]
	scores := e.node(p+"scores", "MatMul", []string{hs[0], kScaled})
	qScaled := e.node(p+"q.scaled", "Div", []string{hs[0], scale})
	c2pAll := e.node(p+"c2p.all", "MatMul", []string{qScaled, hs[3]}) // [batch, heads, seq, 2·span]
	c2p := e.node(p+"c2p", "GatherElements", []string{c2pAll, idx}, onnx.IntAttr("axis", 3))
	p2cAll := e.node(p+"p2c.all", "MatMul", []string{hs[4], kScaled}) // [batch, heads, 2·span, seq]
	p2c := e.node(p+"p2c", "GatherElements", []string{p2cAll, idx}, onnx.IntAttr("axis", 2))
	relAtt := e.node(p+"rel.att", "Add", []string{c2p, p2c})
	return e.node(p+"scores.rel", "Add", []string{scores, relAtt}), hs[2], nil
}

// debertaHead adds the ContextPooler (the first token's hidden state,
// dense, erf GELU) and the classifier (dense): the logits output [batch,
// labels].
func (e *encoder) debertaHead(x string) error {
	h := int64(e.s.Config.HiddenSize)
	if !e.w.has("classifier.weight") || !e.w.has("pooler.dense.weight") {
		return fmt.Errorf("convert: %s: %w: no tensors pooler.dense.weight and classifier.weight for %s", e.w.fileNames(), ErrRefused, e.s.Arch)
	}
	labels := e.w.shapeRows("classifier.weight")
	pooled, err := e.poolerDense(x, h)
	if err != nil {
		return err
	}
	return e.logits(e.gelu("pooler.gelu", pooled), h, labels)
}
