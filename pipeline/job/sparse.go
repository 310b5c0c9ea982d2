package job

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/pgstore"
	"github.com/synapse-embed/synapse/io/previous"
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/model/artifact"
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

// sparse reports whether the job writes sparse vectors.
func (o *EmbedOptions) sparse() bool { return o.Vectors == VectorsSparse }

// checkSparse refuses, before anything starts, what a sparse run cannot
// do: another output kind, a negative --sparse-top-k, and the options of
// dense vectors (late chunking, dtypes, --dims, calibration, pooling) or
// of outputs that hold them (PostgreSQL, a dense --previous).
func (o *EmbedOptions) checkSparse() error {
	switch o.Vectors {
	case "", VectorsDense:
		if o.SparseTopK != 0 {
			return configErrorf("--sparse-top-k needs --vectors sparse")
		}
		if o.AsQuery {
			return configErrorf("--as-query needs --vectors tokens (ColBERT queries)")
		}
		return nil
	case VectorsTokens:
		return o.checkTokens()
	case VectorsSparse:
		if o.AsQuery {
			return configErrorf("--as-query needs --vectors tokens (ColBERT queries)")
		}
	default:
		return configErrorf("--vectors %q: want dense, sparse or tokens", o.Vectors)
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
	case pgstore.IsURL(o.Out) && (o.SparseTopK == 0 || o.SparseTopK > pgstore.SparseMaxNonZero):
		return configErrorf("--vectors sparse into a PostgreSQL table: pgvector's sparsevec holds at most %d non-zero values, so give --sparse-top-k N with N ≤ %d (a chunk's largest weights; SPLADE's documents rarely have more than a few hundred)",
			pgstore.SparseMaxNonZero, pgstore.SparseMaxNonZero)
	}
	return nil
}

// checkSplade refuses what a sentence-transformers SparseEncoder
// directory (MLMTransformer + SpladePooling) asks and synapse would not
// compute: a dense run of it (its output is sparse), and a SpladePooling
// other than max over the tokens of log(1 + relu(logit)), which is what
// the workers' sparse pooling computes.
func (o *EmbedOptions) checkSplade(m *artifact.Artifact) error {
	sp := m.Chain.Splade
	switch {
	case sp == nil:
		return nil
	case !o.sparse():
		return configErrorf("%s is a sparse encoder (modules.json: MLMTransformer + SpladePooling): its output is sparse; give --vectors sparse", m.Name)
	case sp.Strategy != "max" || sp.Activation != "relu":
		return configErrorf("--vectors sparse: %s's SpladePooling (%s) asks for pooling_strategy %q and activation_function %q; synapse computes max over the tokens of log(1 + relu(logit)) only (pooling_strategy max, activation_function relu)",
			m.Name, sp.Dir, sp.Strategy, sp.Activation)
	}
	return nil
}

// checkPreviousKind refuses a --previous output of another kind (dense,
// sparse, tokens), naming both, before the workers start (its settings
// would refuse it too, once the model is loaded, but as a difference of
// dims).
func (o *EmbedOptions) checkPreviousKind(prev *previous.Set) error {
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
	now, nowOut := VectorsDense, ""
	switch {
	case o.sparse():
		now, nowOut = VectorsSparse, OutputSparse
	case o.tokens():
		now, nowOut = VectorsTokens, o.tokensOutput()
	}
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
	resp, err := k.req.do(ctx, req, len(req.IDs))
	if err != nil {
		return nil, err
	}
	sv, ok := resp.(*wire.SparseVectors)
	if !ok {
		return nil, fmt.Errorf("job: EMBED_SPARSE answered with %s", resp.Type())
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
