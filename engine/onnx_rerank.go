//go:build cgo

package engine

import (
	"context"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/onnx"
	hftok "github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/wire"
)

// crossEncoder is what a cross-encoder (a graph loaded with pooling rank)
// needs beyond its session: the pair layout of its tokenizer.json
// post-processor and the rule that turns its logits into a score.
type crossEncoder struct {
	pair    hftok.PairTemplate
	scoring hfmodel.Scoring
}

// planLogits plans a cross-encoder: its only output read is logits, a
// float32 [batch, labels] tensor.
func (p *graphPlan) planLogits(files hfmodel.Files, info *onnx.Info) error {
	out, ok := info.Output("logits")
	if !ok {
		return wire.Errorf(wire.CodeUnsupported, "%s: pooling rank needs a cross-encoder's logits output (outputs: %v); an embedding model does not rerank", files.Graph, info.Outputs)
	}
	if !out.Tensor || out.Elem != onnx.Float || len(out.Dims) != 2 {
		return wire.Errorf(wire.CodeUnsupported, "%s: output %s: want a float32 tensor [batch, labels]", files.Graph, out)
	}
	p.outputs, p.logits = []string{"logits"}, 0
	return nil
}

// readCrossEncoder reads the pair layout from the model's tokenizer.json
// and checks that the graph can take its token types.
func readCrossEncoder(files hfmodel.Files, hfc hfmodel.Config, plan graphPlan) (crossEncoder, error) {
	if files.Tokenizer == "" {
		return crossEncoder{}, wire.Errorf(wire.CodeArtifactInvalid, "%s: no tokenizer.json beside the graph: a cross-encoder's pairs are laid out by its post-processor", files.Graph)
	}
	pt, err := hftok.ReadPairTemplate(files.Tokenizer)
	if err != nil {
		return crossEncoder{}, wire.Errorf(wire.CodeUnsupported, "%w", err)
	}
	if !pt.HasB() {
		return crossEncoder{}, wire.Errorf(wire.CodeUnsupported, "%s: the post-processor's pair template (%s) has no $B: it cannot lay out a query–document pair", files.Tokenizer, pt)
	}
	feedsTypes := false
	for _, r := range plan.roles {
		feedsTypes = feedsTypes || r == roleTypes
	}
	if feedsTypes && hfc.TypeVocabSize > 0 && int(pt.MaxType()) >= hfc.TypeVocabSize {
		return crossEncoder{}, wire.Errorf(wire.CodeArtifactInvalid, "%s: the pair template (%s) uses token type %d but config.json's type_vocab_size is %d",
			files.Tokenizer, pt, pt.MaxType(), hfc.TypeVocabSize)
	}
	return crossEncoder{pair: pt}, nil
}

// Rerank scores each candidate against its group's query. A pair is laid
// out as the model's tokenizer.json post-processor lays it out (ids and
// token types: [CLS] q [SEP] d [SEP], <s> q </s></s> d </s>, …); the module
// has cut the document so that the pair fits n_ctx. Pairs of every group
// run together, never padded: a run holds pairs of one length, as Embed's
// runs do. The score is the raw logit (see hfmodel.Scoring for 2 labels).
func (e *ONNX) Rerank(ctx context.Context, ref string, groups []RerankGroup) ([]float32, error) {
	m, err := e.model(ref)
	if err != nil {
		return nil, err
	}
	if m.plan.logits < 0 {
		return nil, wire.Errorf(wire.CodeUnsupported, "model %s was loaded to embed; RERANK needs a cross-encoder loaded with pooling rank", ref)
	}
	var ids, types [][]int32
	for gi, g := range groups {
		for ci, d := range g.Candidates {
			p, t := m.ce.pair.Apply(g.Query, d)
			if err := m.checkIDs(p); err != nil {
				return nil, wire.Errorf(wire.CodeBadRequest, "group %d candidate %d: pair: %w", gi, ci, err)
			}
			ids, types = append(ids, p), append(types, t)
		}
	}
	scores := make([]float32, len(ids))
	for _, run := range m.runs(ids, 0) {
		if err := ctx.Err(); err != nil {
			return nil, wire.Errorf(wire.CodeInternal, "rerank: %w", err)
		}
		if err := m.runLogits(ids, types, run, scores); err != nil {
			return nil, err
		}
	}
	return scores, nil
}

// runLogits evaluates the pairs idx (all of one length) in one run and
// writes their scores.
func (m *onnxModel) runLogits(ids, types [][]int32, idx []int, scores []float32) error {
	n, l := len(idx), len(ids[idx[0]])
	ins, err := m.inputs(n, l, nil, nil, func(i, j int) int32 { return ids[idx[i]][j] }, func(i, j int) int32 { return types[idx[i]][j] })
	defer destroyAll(ins)
	if err != nil {
		return err
	}
	k := m.width[m.plan.logits]
	if len(m.outs) < 1 {
		m.outs = make([][]float32, 1)
	}
	m.outs[0] = grow(m.outs[0], n*k)
	out, err := ort.NewTensor(ort.NewShape(int64(n), int64(k)), m.outs[0])
	if err != nil {
		return wire.Errorf(wire.CodeInternal, "output logits: %w", err)
	}
	defer out.Destroy()
	if err := m.sess.Run(ins, []ort.Value{out}); err != nil {
		return classifyORTRun(err, n, l)
	}
	for i, s := range idx {
		scores[s] = m.ce.scoring.Score(m.outs[0][i*k : (i+1)*k])
	}
	return nil
}
