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
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/wire"
)

// Multi-vector (ColBERT) outputs: --vectors tokens gives every chunk the
// unit vectors of its tokens, each token's final hidden state through the
// model's projection, as PyLate's ColBERT encodes documents (with
// AsQuery, queries). The vector settings' output member of a document run
// and of a query run, and their pooling.
const (
	VectorsTokens     = "tokens"
	OutputTokens      = "tokens"
	OutputTokensQuery = "tokens-query"
	PoolingColBERT    = "colbert"
)

// tokensOut is the multi-vector output kind (--vectors tokens): a unit
// vector a token in the token_vectors column, as PyLate's ColBERT encodes
// documents (--as-query: queries).
type tokensOut struct {
	kindBase
	multi *multiPlan // decided by plan
}

// tokensOutput is the settings' output member of a multi-vector run.
func (o *EmbedOptions) tokensOutput() string {
	if o.AsQuery {
		return OutputTokensQuery
	}
	return OutputTokens
}

// check refuses, before anything starts, what a multi-vector run cannot
// do: the options of pooled vectors (late chunking, --dims, --pooling,
// int8/uint8 ranges) and the outputs that would need them.
func (*tokensOut) check(o *EmbedOptions) error {
	switch {
	case o.SparseTopK != 0:
		return needsSparse()
	case o.LateChunking:
		return refuseTokens("--late-chunking, which pools token states into chunks")
	case o.Dims > 0:
		return refuseTokens("--dims: the projection decides the width")
	case o.Pooling != "":
		return refuseTokens(fmt.Sprintf("--pooling %s: nothing is pooled", o.Pooling))
	case o.Dtype.Ranged() || len(o.Calibration) > 0:
		return refuseTokens(fmt.Sprintf("--dtype %s: int8/uint8 ranges are not calibrated per token; use float32, float16, binary or ubinary", o.Dtype))
	case !o.Normalize:
		return refuseTokens("--no-normalize: ColBERT's token vectors are unit vectors (MaxSim is a sum of cosines)")
	case o.dest().IsTable() || o.Sync:
		return refuseTokens("a PostgreSQL output: write a file")
	case o.AsQuery && (o.ChunkTokens > 0 || o.Overlap > 0):
		return refuseTokens("--as-query and --chunk-tokens or --overlap: a query is cut at the model's query_length")
	}
	return nil
}

// refuseTokens is a multi-vector run's refusal of what.
func refuseTokens(what string) error {
	return configErrorf("--vectors tokens with %s: token vectors are ColBERT's, one a token (docs/token-outputs.md)", what)
}

// plan fits the chunking to the model's multi-vector settings
// (tokenChunking) and refuses a sparse encoder.
func (k *tokensOut) plan(o *EmbedOptions, m *artifact.Artifact, _ stRun, ch Chunking) (Chunking, error) {
	var err error
	if ch, k.multi, err = o.tokenChunking(m, ch); err != nil {
		return ch, err
	}
	return ch, refuseSparseEncoder(m)
}

// probe asks the workers for token vectors (probeMulti) and takes the
// output's width from them.
func (k *tokensOut) probe(ctx context.Context, o *EmbedOptions, r *runner, p *embedPlan) error {
	var err error
	p.dims, err = o.probeMulti(ctx, r, p.ch, k.multi)
	return err
}

func (*tokensOut) settings(o *EmbedOptions, m *artifact.Artifact, s *vector.Settings) {
	s.Output, s.Pooling, s.Normalize, s.Tokens = o.tokensOutput(), PoolingColBERT, true, multiSettings(m)
}

func (*tokensOut) schema(o *EmbedOptions, dims int, meta map[string]string) *arrow.Schema {
	return output.TokensSchema(dims, o.Dtype, o.WithText, meta)
}

func (*tokensOut) startPart(o *EmbedOptions, chunk, dims int) string {
	s := fmt.Sprintf("text fields %s, chunks of %d tokens, token vectors of %d dims, %s", strings.Join(o.textFields(), " + "), chunk, dims, o.Dtype)
	if o.AsQuery {
		s += ", as queries"
	}
	return s
}

// table: check refuses a PostgreSQL output before any work.
func (*tokensOut) table(*EmbedOptions) (string, bool, error) {
	return "", false, refuseTokens("a PostgreSQL output: write a file")
}

func (*tokensOut) names(o *EmbedOptions) (string, string) { return VectorsTokens, o.tokensOutput() }

func (k *tokensOut) execute(ctx context.Context, o *EmbedOptions, r *runner, cfg pipeline.Config, p *embedPlan, e *embedRun) error {
	tk := &tokensKind{embedKind: e.kind, multi: k.multi, dims: p.dims}
	return execute(ctx, r, cfg, storable(o, pipeline.Kind[doc, Chunk, tokenVecs](tk)), e.src, tokensSink{e.sink})
}

// multiPlan is what a multi-vector run decided from the model: the length
// every query is expanded to (0: none), whether the expansion is attended,
// and the document tokens left out of the output.
type multiPlan struct {
	expand int
	attend bool
	skip   map[int32]bool
}

// tokenChunking fits the chunking to the model's multi-vector settings
// (hfmodel.MultiVector): the marker token after the first special token,
// windows of document_length (documents) or one of query_length (a
// query), and decides the skiplist and the query expansion. A model
// without a projection is refused: synapse does not pass a plain
// encoder's raw hidden states off as ColBERT vectors.
func (o *EmbedOptions) tokenChunking(m *artifact.Artifact, ch Chunking) (Chunking, *multiPlan, error) {
	if m.Format != artifact.FormatONNX || !m.Chain.MultiVector() {
		return ch, nil, configErrorf("--vectors tokens: %s has no ColBERT projection (an ONNX model whose sentence-transformers modules are Dense modules right after the Transformer and no Pooling, as PyLate saves a ColBERT model); a plain encoder's raw hidden states are not token vectors", m.Name)
	}
	mv := m.Chain.Multi
	marker, length := mv.DocumentPrefix, mv.DocumentLength
	if o.AsQuery {
		marker, length = mv.QueryPrefix, mv.QueryLength
	}
	vocab := m.Tokenizer.Vocab()
	if marker != "" {
		id, ok := tokenID(vocab, marker)
		if !ok {
			return ch, nil, configErrorf("--vectors tokens: %s's marker token %q is not in its tokenizer's vocabulary", m.Name, marker)
		}
		at := min(1, len(ch.Prefix))
		ch.Prefix = slices.Insert(slices.Clone(ch.Prefix), at, id)
	}
	room := min(length, m.ContextLength) - len(ch.Prefix) - len(ch.Suffix)
	if room <= 0 {
		return ch, nil, configErrorf("--vectors tokens: %s's length of %d tokens leaves no room beside %d special tokens", m.Name, length, len(ch.Prefix)+len(ch.Suffix))
	}
	switch {
	case o.AsQuery:
		ch.Window, ch.Overlap, ch.Truncate = room, 0, true
	case o.ChunkTokens == 0:
		ch.Window = room
	case ch.Window > m.ContextLength-len(ch.Prefix)-len(ch.Suffix):
		return ch, nil, tooLong(ch, m)
	}
	if err := ch.Validate(); err != nil {
		return ch, nil, &ConfigError{err}
	}
	mp := &multiPlan{}
	if o.AsQuery && mv.QueryExpansion {
		if vocab.MASK == tokenize.NoToken {
			return ch, nil, configErrorf("--vectors tokens --as-query: %s expands queries with [MASK], but its tokenizer has no mask token", m.Name)
		}
		mp.expand, mp.attend = room+len(ch.Prefix)+len(ch.Suffix), mv.AttendExpansion
	}
	if !o.AsQuery {
		mp.skip = skiplist(vocab, mv.Skiplist)
	}
	return ch, mp, nil
}

// tokenID is the id of the token whose text is s (added tokens included).
func tokenID(v *tokenize.Vocab, s string) (int32, bool) {
	i := slices.Index(v.Tokens, s)
	return int32(i), i >= 0
}

// skiplist is the ids of the skiplist words as PyLate finds them
// (convert_tokens_to_ids: a word that is no token is the unknown token's
// id, which is then skipped too).
func skiplist(v *tokenize.Vocab, words []string) map[int32]bool {
	skip := map[int32]bool{}
	for _, w := range words {
		if id, ok := tokenID(v, w); ok {
			skip[id] = true
		} else if v.UNK != tokenize.NoToken {
			skip[v.UNK] = true
		}
	}
	return skip
}

// probeMulti checks, before any work, that the workers give token vectors
// for the loaded model: they must announce EMBED_MULTI, and a one-sequence
// EMBED_MULTI of the chunk's special tokens must be answered (unsupported:
// no projection, or the llama.cpp engine; unknown_type: an old worker). It
// returns the vectors' width and caps requests so that every answer fits
// the negotiated frame, refusing a frame that holds no window's answer.
func (o *EmbedOptions) probeMulti(ctx context.Context, r *runner, ch Chunking, mp *multiPlan) (int, error) {
	if !r.pool.Supports(wire.ExtEmbedMulti) {
		return 0, configErrorf("--vectors tokens needs workers that give token vectors (%s); these workers do not announce it (an older synapse worker?)", wire.ExtEmbedMulti)
	}
	ids := slices.Concat(ch.Prefix, ch.Suffix)
	if len(ids) == 0 {
		ids = []int32{0}
	}
	resp, err := r.req.do(ctx, &wire.EmbedMulti{ModelRef: r.req.modelRef, Items: []wire.MultiItem{{NTokens: len(ids)}}, IDs: ids}, len(ids))
	var we *wire.Error
	if errors.As(err, &we) && (we.Code == wire.CodeUnsupported || we.Code == wire.CodeUnknownType) {
		return 0, configErrorf("--vectors tokens: the workers give no token vectors for %s: %s", r.model.Name, we.Msg)
	}
	if err != nil {
		return 0, fmt.Errorf("token vectors probe: %w", err)
	}
	mv, ok := resp.(*wire.MultiVectors)
	if !ok || mv.Dims <= 0 || len(mv.NTokens) != 1 || mv.NTokens[0] != len(ids) {
		return 0, fmt.Errorf("job: token vectors probe answered with %s", resp.Type())
	}
	window := max(ch.Window+len(ch.Prefix)+len(ch.Suffix), mp.expand)
	limit := maxStateTokens(r.pool.MaxFrame(), mv.Dims)
	if window > limit {
		return 0, configErrorf("--vectors tokens: a chunk of %d tokens × %d dims does not fit the %d-byte frame limit", window, mv.Dims, r.pool.MaxFrame())
	}
	o.BatchTokens = min(o.BatchTokens, limit)
	return mv.Dims, nil
}

// tokenVecs are one chunk's token vectors (dims values each), the skipped
// tokens left out.
type tokenVecs [][]float32

// tokensKind embeds documents chunk by chunk into token vectors: the
// chunks of plain embedding with the model's marker, EMBED_MULTI for each
// request.
type tokensKind struct {
	*embedKind
	multi *multiPlan
	dims  int
}

// Items cuts a document into chunks as plain embedding does; a query's
// chunk is expanded to the query length with [MASK] tokens.
func (k *tokensKind) Items(d doc) ([]pipeline.Work[Chunk], error) {
	work, err := k.embedKind.Items(d)
	if err != nil || k.multi.expand == 0 {
		return work, err
	}
	mask := k.tok.Vocab().MASK
	for i := range work {
		c := &work[i].Item
		if pad := k.multi.expand - len(c.IDs); pad > 0 {
			c.IDs = slices.Concat(c.IDs, slices.Repeat([]int32{mask}, pad))
		}
	}
	return work, nil
}

func (k *tokensKind) Call(ctx context.Context, chunks []Chunk) ([]tokenVecs, error) {
	req := &wire.EmbedMulti{ModelRef: k.req.modelRef, Items: make([]wire.MultiItem, len(chunks))}
	marked := len(k.ch.Prefix) + len(k.ch.Suffix)
	for i, c := range chunks {
		req.Items[i].ID, req.Items[i].NTokens = i, len(c.IDs)
		if n := int(c.TokenEnd-c.TokenStart) + marked; k.multi.expand > 0 && !k.multi.attend && n < len(c.IDs) {
			req.Items[i].Attend = n // the expansion is outside the attention mask
		}
		req.IDs = append(req.IDs, c.IDs...)
	}
	mv, err := ask[*wire.MultiVectors](ctx, k.req, req, len(req.IDs))
	if err != nil {
		return nil, err
	}
	if len(mv.NTokens) != len(chunks) || mv.Dims != k.dims {
		return nil, fmt.Errorf("job: MULTI_VECTORS of %d items × %d dims for %d chunks × %d", len(mv.NTokens), mv.Dims, len(chunks), k.dims)
	}
	out := make([]tokenVecs, len(chunks))
	off := 0
	for i, it := range req.Items {
		if mv.NTokens[i] != it.NTokens {
			return nil, fmt.Errorf("job: MULTI_VECTORS item %d of %d tokens; sent %d", i, mv.NTokens[i], it.NTokens)
		}
		rows := mv.Rows(i)
		for j, id := range req.IDs[off : off+it.NTokens] {
			if !k.multi.skip[id] {
				out[i] = append(out[i], rows[j*k.dims:(j+1)*k.dims:(j+1)*k.dims])
			}
		}
		off += it.NTokens
	}
	return out, nil
}

// Check refuses a chunk with no token vector left, or a vector that is not
// finite or not of unit length.
func (k *tokensKind) Check(_ Chunk, vs tokenVecs) error {
	if len(vs) == 0 {
		return refuse(ReasonEngineError, "every token of the chunk is in the skiplist")
	}
	for t, v := range vs {
		var s float64
		for _, x := range v {
			s += float64(x) * float64(x)
		}
		if math.IsNaN(s) || math.IsInf(s, 0) || math.Abs(s-1) > 1e-3 {
			return refuse(ReasonEngineError, "the engine returned token vector %d of squared length %v; want 1", t, s)
		}
	}
	return nil
}

// tokensSink writes token vectors' rows through an embedding sink.
type tokensSink struct{ s *embedSink }

func (k tokensSink) Put(r pipeline.Result[doc, Chunk, tokenVecs]) error {
	return putRows(k.s, r, k.set)
}

func (k tokensSink) Replay(r pipeline.Result[doc, Chunk, tokenVecs]) { replayRows(k.s, r, k.set) }

// set puts a chunk's token vectors in its row, in the dtype.
func (k tokensSink) set(row *output.EmbedRow, vs tokenVecs) {
	if k.s.q == nil || k.s.q.Dtype == vector.Float32 {
		row.TokenEmbeddings = vs
		return
	}
	row.TokenVectors = make([][]byte, len(vs))
	for i, v := range vs {
		row.TokenVectors[i] = k.s.q.Append(nil, v)
	}
}

// tokenBytes is what a row's token vectors hold.
func tokenBytes(r output.EmbedRow) int {
	n := 0
	for _, v := range r.TokenEmbeddings {
		n += 4 * len(v)
	}
	for _, v := range r.TokenVectors {
		n += len(v)
	}
	return n
}

// nonFiniteTokens reports a token vector with a NaN or an infinity.
func nonFiniteTokens(vs [][]float32) bool {
	return slices.ContainsFunc(vs, func(v []float32) bool { return vector.NonFinite(v) >= 0 })
}

// multiSettings is what the settings record of a multi-vector model's
// query and document handling (hfmodel.MultiVector.String).
func multiSettings(m *artifact.Artifact) string {
	if !m.Chain.MultiVector() {
		return ""
	}
	return m.Chain.Multi.String()
}
