//go:build cgo

package engine

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/synapse-embed/synapse/wire"
)

// onnxModel is one loaded graph with its session and reusable buffers.
type onnxModel struct {
	ref, path string
	sess      *ort.DynamicAdvancedSession
	plan      graphPlan
	cfg       onnxConfig
	useGraph  bool         // the default is the graph's sentence_embedding (it holds the chain)
	chain     onnxChain    // applied to last_hidden_state otherwise
	nVocab    int          // from config.json; 0 when unknown
	width     []int        // last dimension of each output
	ce        crossEncoder // how pairs are built and scored (loaded with pooling rank)
	padID     int32        // config.json pad_token_id (else 0): fills a padded run
	padGraph  bool         // the graph's sentence_embedding ignores masked tokens (probePadding)

	// Per-run buffers, grown as needed (the serve loop runs one request at a time).
	i64  [4][]int64
	i32  [4][]int32
	outs [][]float32
}

func (m *onnxModel) free() {
	if m.sess != nil {
		m.sess.Destroy()
		m.sess = nil
	}
}

// dims is the width of the vectors the graph's sentence_embedding (useGraph)
// or chain ch gives; a cross-encoder's, its logits' width.
func (m *onnxModel) dims(useGraph bool, ch onnxChain) int {
	switch {
	case m.plan.logits >= 0:
		return m.width[m.plan.logits]
	case useGraph:
		return m.width[m.plan.pooled]
	case m.sparseOnly():
		return m.width[m.plan.mlm]
	}
	return ch.dims(m.width[m.plan.hidden])
}

// sparseOnly: the graph's only output is a masked-LM's logits (a
// BertForMaskedLM export); it answers EMBED_SPARSE, and LOADED's dims is
// its vocabulary's size.
func (m *onnxModel) sparseOnly() bool {
	return m.plan.mlm >= 0 && m.plan.hidden < 0 && m.plan.pooled < 0
}

// probe runs one one-token sequence with outputs ONNX Runtime allocates, and
// records each output's width.
func (m *onnxModel) probe() error {
	ins, err := m.inputs(1, 1, nil, nil, func(int, int) int32 { return 0 }, nil)
	defer destroyAll(ins)
	if err != nil {
		return err
	}
	outs := make([]ort.Value, len(m.plan.outputs))
	err = m.sess.Run(ins, outs)
	defer destroyAll(outs)
	if err != nil {
		return wire.Errorf(wire.CodeArtifactInvalid, "%s loads but a one-token run fails: %w: %w", m.path, errProbe, err)
	}
	for i, v := range outs {
		shape := v.GetShape()
		want := 3
		if i == m.plan.pooled || i == m.plan.logits {
			want = 2
		}
		if len(shape) != want || shape[len(shape)-1] < 1 {
			return wire.Errorf(wire.CodeUnsupported, "%s: output %s has shape %v on one token; want %d dimensions", m.path, m.plan.outputs[i], shape, want)
		}
		m.width[i] = int(shape[len(shape)-1])
	}
	return nil
}

// inputs builds the input tensors of a run of n sequences of l tokens; id
// gives token j of sequence i, typ its token type (nil: all 0). lens, if
// not nil, gives each sequence's real length: its tokens from lens[i] on
// are padding (the pad token, mask 0, type 0), and id is not asked for them.
// attend, if not nil, gives how many of each sequence's first tokens are
// attended: its real tokens from attend[i] on keep their ids with mask 0.
func (m *onnxModel) inputs(n, l int, lens, attend []int, id, typ func(i, j int) int32) ([]ort.Value, error) {
	shape := ort.NewShape(int64(n), int64(l))
	vals := make([]ort.Value, 0, len(m.plan.inputs))
	for k, role := range m.plan.roles {
		fill := func(i, j int) int64 {
			if lens != nil && j >= lens[i] {
				switch role {
				case roleIDs:
					return int64(m.padID)
				case rolePositions:
					return int64(j)
				}
				return 0
			}
			switch role {
			case roleIDs:
				return int64(id(i, j))
			case roleMask:
				if attend != nil && j >= attend[i] {
					return 0
				}
				return 1
			case rolePositions:
				return int64(j)
			case roleTypes:
				if typ != nil {
					return int64(typ(i, j))
				}
			}
			return 0
		}
		var (
			v   ort.Value
			err error
		)
		if m.plan.int32s[k] {
			m.i32[k] = grow(m.i32[k], n*l)
			for i := range n {
				for j := range l {
					m.i32[k][i*l+j] = int32(fill(i, j))
				}
			}
			v, err = ort.NewTensor(shape, m.i32[k][:n*l])
		} else {
			m.i64[k] = grow(m.i64[k], n*l)
			for i := range n {
				for j := range l {
					m.i64[k][i*l+j] = fill(i, j)
				}
			}
			v, err = ort.NewTensor(shape, m.i64[k][:n*l])
		}
		if err != nil {
			return vals, wire.Errorf(wire.CodeInternal, "input %s: %w", m.plan.inputs[k], err)
		}
		vals = append(vals, v)
	}
	return vals, nil
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func destroyAll(vs []ort.Value) {
	for _, v := range vs {
		if v != nil {
			v.Destroy()
		}
	}
}

// Embed pools one vector per sequence. By default sequences are never
// padded: a run holds one sequence, or several of exactly the same length
// (up to 4,096 tokens and n_seq_max sequences), so attention masks are all
// ones and no work is spent on padding. Batching equal lengths measured 7%
// faster than one sequence per run on 128-token chunks (docs/onnx-bench.md).
// With ONNXOptions.PadTokens, lengths within that many tokens share a run,
// padded and masked, and only the real tokens are pooled.
func (e *ONNX) Embed(ctx context.Context, ref, pooling string, normalize bool, seqs [][]int32) ([]float32, int, error) {
	return e.EmbedPoolFrom(ctx, ref, pooling, normalize, seqs, nil)
}

// EmbedPoolFrom is Embed with the first from[i] tokens of sequence i left
// out of the pooling (PromptEmbedder); from nil leaves none out.
func (e *ONNX) EmbedPoolFrom(ctx context.Context, ref, pooling string, normalize bool, seqs [][]int32, from []int) ([]float32, int, error) {
	m, err := e.model(ref)
	if err != nil {
		return nil, 0, err
	}
	if m.plan.logits >= 0 {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "model %s is a cross-encoder (loaded with pooling rank): it answers RERANK, not EMBED_BATCH", ref)
	}
	if m.sparseOnly() {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "model %s is a masked-LM graph (logits only): it gives sparse vectors (EMBED_SPARSE, embed --output sparse), not dense ones", ref)
	}
	useGraph, ch := m.useGraph, m.chain
	switch pooling {
	case PoolingDefault:
	case PoolingMean, PoolingCLS, PoolingLast:
		if m.plan.hidden < 0 {
			return nil, 0, wire.Errorf(wire.CodeUnsupported, "pooling %s: model %s outputs only sentence_embedding (its own pooling)", pooling, ref)
		}
		useGraph, ch = false, ch.withPooling(pooling)
		if err := ch.check(m.path, m.width[m.plan.hidden]); err != nil {
			return nil, 0, wire.Errorf(wire.CodeBadRequest, "pooling %s: %w", pooling, err)
		}
	default:
		return nil, 0, wire.Errorf(wire.CodeBadRequest, "pooling %q: EMBED_BATCH on an ONNX model takes \"\", mean, cls or last", pooling)
	}
	if !useGraph && ch.projection {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "model %s is a multi-vector model (a Dense projection of every token, no Pooling): it gives token vectors (EMBED_MULTI, embed --vectors tokens), not pooled ones", ref)
	}
	if from != nil && useGraph {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "pool_from: model %s pools in its graph (sentence_embedding), over every token", ref)
	}
	for i, s := range seqs {
		if err := m.checkIDs(s); err != nil {
			return nil, 0, wire.Errorf(wire.CodeBadRequest, "sequence %d: %w", i, err)
		}
	}
	dims := m.dims(useGraph, ch)
	out := make([]float32, len(seqs)*dims)
	pad := m.cfg.pad
	if useGraph && !m.padGraph {
		pad = 0
	}
	for _, run := range m.runs(seqs, pad) {
		if err := ctx.Err(); err != nil {
			return nil, 0, wire.Errorf(wire.CodeInternal, "embed: %w", err)
		}
		if err := m.run(seqs, run, from, useGraph, ch, dims, out); err != nil {
			return nil, 0, err
		}
	}
	if normalize {
		for i := range seqs {
			l2normalize(out[i*dims : (i+1)*dims])
		}
	}
	return out, dims, nil
}

// probePadding decides, when padding is on, whether the graph's own
// sentence_embedding may come from padded runs: a two-token sequence must
// give the same vector (cosine ≥ 0.99999, length within 1e-4) alone and
// padded by one token beside a three-token sequence. A graph that pools
// every position, masked or not, fails and its sentence_embedding runs stay
// unpadded; pooling in the engine (last_hidden_state) pads regardless.
func (m *onnxModel) probePadding() error {
	if m.cfg.pad == 0 || m.plan.pooled < 0 {
		return nil
	}
	tok := func(k int32) int32 {
		if m.nVocab > 0 {
			return (m.padID + k) % int32(m.nVocab)
		}
		return m.padID + k
	}
	seqs := [][]int32{{tok(1), tok(2)}, {tok(2), tok(1), tok(2)}}
	dims := m.width[m.plan.pooled]
	alone, padded := make([]float32, 2*dims), make([]float32, 2*dims)
	if err := m.run(seqs, []int{0}, nil, true, onnxChain{}, dims, alone); err != nil {
		return fmt.Errorf("padding probe: %w", err)
	}
	if err := m.run(seqs, []int{0, 1}, nil, true, onnxChain{}, dims, padded); err != nil {
		return fmt.Errorf("padding probe: %w", err)
	}
	a, p := alone[:dims], padded[:dims]
	var dot, na, np float64
	for i := range a {
		dot += float64(a[i]) * float64(p[i])
		na += float64(a[i]) * float64(a[i])
		np += float64(p[i]) * float64(p[i])
	}
	m.padGraph = na > 0 && np > 0 && dot/math.Sqrt(na*np) >= 0.99999 && math.Abs(math.Sqrt(np/na)-1) <= 1e-4
	return nil
}

func (m *onnxModel) checkIDs(s []int32) error {
	if len(s) == 0 {
		return errEmptySeq
	}
	if len(s) > m.cfg.nCtx {
		return fmt.Errorf("%d tokens exceed n_ctx %d (the module chunks long inputs)", len(s), m.cfg.nCtx)
	}
	for _, t := range s {
		if t < 0 || m.nVocab > 0 && int(t) >= m.nVocab {
			return fmt.Errorf("token id %d outside the vocabulary [0,%d)", t, m.nVocab)
		}
	}
	return nil
}

// runs groups sequence indices into runs of equal length (or, with pad > 0,
// of lengths at most pad tokens above the run's shortest), each at most
// tokensPerRun tokens counted at the run's longest (but at least one
// sequence) and seqMax sequences, in order of length and then of index. A
// graph whose results mix the rows of a batch (graphPlan.batchOps: dynamic
// quantization takes its scale over the whole tensor) runs one sequence per
// run, so that a sequence's vector never depends on the others of its
// request.
func (m *onnxModel) runs(seqs [][]int32, pad int) [][]int {
	seqMax := m.cfg.seqMax
	if len(m.plan.batchOps) > 0 {
		seqMax = 1
	}
	order := make([]int, len(seqs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(seqs[order[a]]) < len(seqs[order[b]]) })
	var runs [][]int
	for start := 0; start < len(order); {
		l := len(seqs[order[start]])
		end := start + 1
		for end < len(order) && len(seqs[order[end]])-l <= pad && end-start < seqMax && (end-start+1)*len(seqs[order[end]]) <= m.cfg.tokensPerRun {
			end++
		}
		runs = append(runs, order[start:end])
		start = end
	}
	return runs
}

// run evaluates the sequences idx (sorted by length) in one ONNX Runtime
// run, padded to the longest, and writes their vectors to out: the graph's
// sentence_embedding (useGraph) or chain ch over the real tokens of its
// last_hidden_state.
func (m *onnxModel) run(seqs [][]int32, idx, from []int, useGraph bool, ch onnxChain, dims int, out []float32) error {
	l, err := m.evaluate(seqs, idx)
	if err != nil {
		return err
	}
	for i, s := range idx {
		dst := out[s*dims : (s+1)*dims]
		if useGraph {
			copy(dst, m.outs[m.plan.pooled][i*dims:(i+1)*dims])
			continue
		}
		w := m.width[m.plan.hidden]
		skip := 0
		if from != nil {
			skip = from[s]
		}
		k := len(seqs[s]) // the real tokens; the rest of the l rows are padding
		ch.apply(m.outs[m.plan.hidden][i*l*w:i*l*w+k*w], k, w, skip, dst)
	}
	return nil
}

// evaluate runs the sequences idx (sorted by length) through the graph in
// one ONNX Runtime run, padded to the longest (l tokens, returned), leaving
// each output's values in m.outs.
func (m *onnxModel) evaluate(seqs [][]int32, idx []int) (int, error) {
	return m.evaluateAttend(seqs, idx, nil)
}

// evaluateAttend is evaluate with sequence s's tokens from attend[s] on
// outside the attention mask (attend nil, or attend[s] 0: none are).
func (m *onnxModel) evaluateAttend(seqs [][]int32, idx, attend []int) (int, error) {
	n, l := len(idx), len(seqs[idx[len(idx)-1]])
	var lens []int
	if len(seqs[idx[0]]) != l {
		lens = make([]int, n)
		for i, s := range idx {
			lens[i] = len(seqs[s])
		}
	}
	var att []int
	for i, s := range idx {
		if attend != nil && attend[s] > 0 {
			if att == nil {
				att = make([]int, n)
				for k := range att {
					att[k] = l
				}
			}
			att[i] = attend[s]
		}
	}
	ins, err := m.inputs(n, l, lens, att, func(i, j int) int32 { return seqs[idx[i]][j] }, nil)
	defer destroyAll(ins)
	if err != nil {
		return 0, err
	}
	outs := make([]ort.Value, len(m.plan.outputs))
	defer destroyAll(outs)
	if len(m.outs) < len(outs) {
		m.outs = make([][]float32, len(outs))
	}
	for k := range outs {
		shape := ort.NewShape(int64(n), int64(l), int64(m.width[k]))
		if k == m.plan.pooled {
			shape = ort.NewShape(int64(n), int64(m.width[k]))
		}
		m.outs[k] = grow(m.outs[k], int(shape.FlattenedSize()))
		if outs[k], err = ort.NewTensor(shape, m.outs[k]); err != nil {
			return 0, wire.Errorf(wire.CodeInternal, "output %s: %w", m.plan.outputs[k], err)
		}
	}
	if err := m.sess.Run(ins, outs); err != nil {
		return 0, classifyORTRun(err, n, l)
	}
	return l, nil
}

// classifyORTRun turns a failed run into an error code: an index out of
// range (a token id the embedding table lacks) is bad_request, memory is
// oom, anything else internal.
func classifyORTRun(err error, n, l int) error {
	l2 := strings.ToLower(err.Error())
	switch {
	case strings.Contains(l2, "out of bounds") || strings.Contains(l2, "out of range"):
		return wire.Errorf(wire.CodeBadRequest, "ONNX Runtime run (%d×%d tokens): %w", n, l, err)
	case strings.Contains(l2, "bad_alloc") || strings.Contains(l2, "failed to allocate"):
		return wire.Errorf(wire.CodeOOM, "ONNX Runtime run (%d×%d tokens): %w", n, l, err)
	}
	return wire.Errorf(wire.CodeInternal, "ONNX Runtime run (%d×%d tokens): %w", n, l, err)
}
