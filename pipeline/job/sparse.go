package job

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/pgstore"
	"github.com/synapse-embed/synapse/io/previous"
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/wire"
)

// Output kinds of an embedding job (EmbedOptions.Vectors), and the vector
// settings' output member of a sparse one (vector.Settings.Output).
const (
	VectorsDense  = "dense"  // one pooled vector per chunk
	VectorsSparse = "sparse" // one SPLADE vector per chunk over the model's vocabulary
	OutputSparse  = "sparse"
	// PoolingSplade is a sparse output's pooling, as the settings record
	// it: the max over tokens of log(1 + relu(logits)).
	PoolingSplade = "splade-max"
)

// sparseOut is the sparse output kind (--vectors sparse): one SPLADE
// vector a chunk over the model's vocabulary, from a masked-LM's logits
// pooled in the worker (EMBED_SPARSE), in the sparse_indices and
// sparse_values columns.
type sparseOut struct {
	kindBase
	// maxItems caps a request's chunks so that answers fit the frame (0:
	// no cap); set by the probe.
	maxItems int
}

// check refuses a negative --sparse-top-k and the options of dense vectors
// (late chunking, dtypes, --dims, calibration, pooling) or of outputs that
// hold them (a PostgreSQL table without a top-k that fits sparsevec).
func (*sparseOut) check(o *EmbedOptions) error {
	if o.AsQuery {
		return needsTokens()
	}
	refuse := func(what string) error {
		return configErrorf("--vectors sparse with %s: sparse vectors are SPLADE weights over the vocabulary (docs/token-outputs.md)", what)
	}
	switch {
	case o.SparseTopK < 0:
		return configErrorf("--sparse-top-k %d must not be negative (0 keeps every non-zero weight)", o.SparseTopK)
	case o.LateChunking:
		return refuse("--late-chunking, which pools dense token states")
	case o.Dtype != "" && o.Dtype != vector.Float32:
		return refuse(fmt.Sprintf("--dtype %s: the weights are float32", o.Dtype))
	case o.Dims > 0:
		return refuse("--dims, which keeps a dense vector's first dimensions")
	case len(o.Calibration) > 0:
		return refuse("--calibration, which gives int8/uint8 ranges")
	case o.Pooling != "":
		return refuse(fmt.Sprintf("--pooling %s: the weights pool by the max over tokens", o.Pooling))
	case o.dest().IsTable() && (o.SparseTopK == 0 || o.SparseTopK > pgstore.SparseMaxNonZero):
		return configErrorf("--vectors sparse into a PostgreSQL table: pgvector's sparsevec holds at most %d non-zero values, so give --sparse-top-k N with N ≤ %d (a chunk's largest weights; SPLADE's documents rarely have more than a few hundred)",
			pgstore.SparseMaxNonZero, pgstore.SparseMaxNonZero)
	}
	return nil
}

// modules: the worker's SPLADE pooling over the logits, not the chain's.
func (*sparseOut) modules(st *stRun, _ bool) bool {
	st.modules, st.post, st.needsExt = "SpladePooling("+PoolingSplade+")", "", false
	return false
}

// plan refuses a multi-vector model, a SpladePooling other than the one
// the workers compute (max over the tokens of log(1 + relu(logit))), and
// a model without masked-LM logits.
func (*sparseOut) plan(o *EmbedOptions, m *artifact.Artifact, _ stRun, ch Chunking) (Chunking, error) {
	if err := refuseMultiVector(m); err != nil {
		return ch, err
	}
	if sp := m.Chain.Splade; sp != nil && (sp.Strategy != "max" || sp.Activation != "relu") {
		return ch, configErrorf("--vectors sparse: %s's SpladePooling (%s) asks for pooling_strategy %q and activation_function %q; synapse computes max over the tokens of log(1 + relu(logit)) only (pooling_strategy max, activation_function relu)",
			m.Name, sp.Dir, sp.Strategy, sp.Activation)
	}
	if !m.MaskedLM {
		return ch, configErrorf("--vectors sparse: %s has no masked-LM logits output [batch, sequence, vocab] (an ONNX export of a BertForMaskedLM or SPLADE model has one)", m.Name)
	}
	return ch, nil
}

// probe asks the workers for sparse vectors (probeSparse), takes the
// output's width (the vocabulary) from them and fits requests to the
// frame.
func (k *sparseOut) probe(ctx context.Context, o *EmbedOptions, r *runner, p *embedPlan) error {
	var err error
	if p.dims, err = o.probeSparse(ctx, r); err != nil {
		return err
	}
	o.BatchTokens, k.maxItems, err = sparseLimits(r.pool.MaxFrame(), p.dims, o.SparseTopK, o.BatchTokens)
	return err
}

func (*sparseOut) settings(o *EmbedOptions, _ *artifact.Artifact, s *vector.Settings) {
	s.Output, s.SparseTopK, s.Pooling, s.Normalize = OutputSparse, o.SparseTopK, PoolingSplade, false
}

func (*sparseOut) schema(o *EmbedOptions, _ int, meta map[string]string) *arrow.Schema {
	return output.SparseSchema(o.WithText, meta)
}

func (*sparseOut) startPart(o *EmbedOptions, chunk, dims int) string {
	s := fmt.Sprintf("text fields %s, chunks of %d tokens, sparse vectors over %d terms", strings.Join(o.textFields(), " + "), chunk, dims)
	if o.SparseTopK > 0 {
		s += fmt.Sprintf(" (top %d)", o.SparseTopK)
	}
	return s
}

func (*sparseOut) table(*EmbedOptions) (string, bool, error) {
	return pgstore.SparseColumnType(1), true, nil
}

func (*sparseOut) names(*EmbedOptions) (string, string) { return VectorsSparse, OutputSparse }

func (k *sparseOut) execute(ctx context.Context, o *EmbedOptions, r *runner, cfg pipeline.Config, p *embedPlan, e *embedRun) error {
	cfg.MaxItems = k.maxItems
	sk := &sparseKind{embedKind: e.kind, topK: o.SparseTopK, vocab: p.dims}
	return execute(ctx, r, cfg, storable(o, pipeline.Kind[doc, Chunk, sparseVec](sk)), e.src, sparseSink{e.sink})
}

// refuseSparseEncoder refuses a sentence-transformers SparseEncoder
// directory (MLMTransformer + SpladePooling) in a run of another kind: its
// output is sparse.
func refuseSparseEncoder(m *artifact.Artifact) error {
	if m.Chain.Splade != nil {
		return configErrorf("%s is a sparse encoder (modules.json: MLMTransformer + SpladePooling): its output is sparse; give --vectors sparse", m.Name)
	}
	return nil
}

// checkPreviousKind refuses a --previous output of another kind (dense,
// sparse, tokens), naming both, before the workers start (its settings
// would refuse it too, once the model is loaded, but as a difference of
// dims).
func (o *EmbedOptions) checkPreviousKind(k outKind, prev *previous.Set) error {
	if prev == nil || o.PreviousAny {
		return nil
	}
	sc := prev.Schema()
	was, wasOut := VectorsDense, ""
	switch {
	case output.IsSparse(sc):
		was, wasOut = VectorsSparse, OutputSparse
	case output.IsTokens(sc):
		was, wasOut = VectorsTokens, OutputTokens
	}
	now, nowOut := k.names(o)
	if was == now {
		return nil
	}
	return configErrorf("--previous %s holds %s vectors (--vectors %s); this run writes %s ones (--vectors %s): output: previous %q, this run %q", o.Previous[0], was, was, now, now, wasOut, nowOut)
}

// sparseLimits is how a sparse run packs requests so that every request
// and its answer fit a frame of maxFrame bytes: a request's ids take 4
// bytes a token, an answer at most 8 bytes a kept term (vocab, or topK
// when it is smaller) per item. It returns the most tokens and items a
// request may hold, and refuses a frame that holds no answer of one item.
func sparseLimits(maxFrame uint32, vocab, topK, batchTokens int) (tokens, items int, err error) {
	pairs := vocab
	if topK > 0 {
		pairs = min(topK, vocab)
	}
	items = int(int64(maxFrame) / (8 * int64(max(pairs, 1))))
	if items < 1 {
		return 0, 0, configErrorf("--vectors sparse: one chunk's answer of up to %d terms × 8 bytes does not fit the %d-byte frame limit (give --sparse-top-k)", pairs, maxFrame)
	}
	return min(batchTokens, int(maxFrame/4)), items, nil
}

// probeSparse checks, before any work, that the workers give sparse
// vectors for the loaded model: they must announce EMBED_SPARSE, and a
// one-sequence EMBED_SPARSE of the model's special tokens must be answered
// (a model without masked-LM logits, or an engine without them, answers
// unsupported; an old worker unknown_type). It returns the vocabulary's
// size.
func (o *EmbedOptions) probeSparse(ctx context.Context, r *runner) (int, error) {
	if !r.pool.Supports(wire.ExtEmbedSparse) {
		return 0, configErrorf("--vectors sparse needs workers that give sparse vectors (%s); these workers do not announce it (an older synapse worker?)", wire.ExtEmbedSparse)
	}
	pre, suf := r.model.Tokenizer.Affixes()
	ids := slices.Concat(pre, suf)
	if len(ids) == 0 {
		ids = []int32{0}
	}
	resp, err := r.req.do(ctx, &wire.EmbedSparse{ModelRef: r.req.modelRef, TopK: o.SparseTopK, Items: []wire.Item{{NTokens: len(ids)}}, IDs: ids}, len(ids))
	var we *wire.Error
	if errors.As(err, &we) && (we.Code == wire.CodeUnsupported || we.Code == wire.CodeUnknownType) {
		return 0, configErrorf("--vectors sparse: the workers give no sparse vectors for %s: %s", r.model.Name, we.Msg)
	}
	if err != nil {
		return 0, fmt.Errorf("sparse vectors probe: %w", err)
	}
	sv, ok := resp.(*wire.SparseVectors)
	if !ok || sv.Vocab <= 0 || len(sv.NNZ) != 1 {
		return 0, fmt.Errorf("job: sparse vectors probe answered with %s", resp.Type())
	}
	return sv.Vocab, nil
}

// sparseVec is one chunk's sparse vector.
type sparseVec struct {
	indices []uint32
	values  []float32
}

// sparseKind embeds documents chunk by chunk into sparse vectors: the
// chunks of plain embedding (windows, --truncate), EMBED_SPARSE for each
// request.
type sparseKind struct {
	*embedKind
	topK, vocab int
}

func (k *sparseKind) Call(ctx context.Context, chunks []Chunk) ([]sparseVec, error) {
	req := &wire.EmbedSparse{ModelRef: k.req.modelRef, TopK: k.topK}
	req.Items, req.IDs = packItems(chunks, false)
	sv, err := ask[*wire.SparseVectors](ctx, k.req, req, len(req.IDs))
	if err != nil {
		return nil, err
	}
	if len(sv.NNZ) != len(chunks) || sv.Vocab != k.vocab {
		return nil, fmt.Errorf("job: SPARSE_VECTORS of %d items over %d terms for %d chunks over %d", len(sv.NNZ), sv.Vocab, len(chunks), k.vocab)
	}
	out := make([]sparseVec, len(chunks))
	for i := range out {
		out[i].indices, out[i].values = sv.Item(i)
	}
	return out, nil
}

// Check refuses a vector with a weight that is not finite and positive,
// or more terms than --sparse-top-k.
func (k *sparseKind) Check(_ Chunk, v sparseVec) error {
	if k.topK > 0 && len(v.indices) > k.topK {
		return refuse(ReasonEngineError, "the engine returned %d terms; --sparse-top-k is %d", len(v.indices), k.topK)
	}
	for i, x := range v.values {
		if !(x > 0) || math.IsInf(float64(x), 0) {
			return refuse(ReasonEngineError, "the engine returned weight %v for term %d", x, v.indices[i])
		}
	}
	return nil
}

// setSparse puts a chunk's sparse vector in its row.
func setSparse(row *output.EmbedRow, v sparseVec) {
	row.SparseIndices, row.SparseValues = v.indices, v.values
}

// sparseSink writes sparse vectors' rows through an embedding sink.
type sparseSink struct{ s *embedSink }

func (k sparseSink) Put(r pipeline.Result[doc, Chunk, sparseVec]) error {
	return putRows(k.s, r, setSparse)
}

func (k sparseSink) Replay(r pipeline.Result[doc, Chunk, sparseVec]) {
	replayRows(k.s, r, setSparse)
}
