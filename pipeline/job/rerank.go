package job

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/record"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/wire"
)

// RerankOptions is one `synapse rerank` job. Its input is either query
// files (Inputs, read with Queries) or a first-stage run (Run.Run set).
type RerankOptions struct {
	Options
	Queries corpus.QueryOptions
	Run     corpus.RunOptions
	Sigmoid bool // write 1/(1+e^-score) instead of the raw score
	TopN    int  // write only the best TopN of each query; 0 = all
}

// RerankFormats are the output formats of a rerank job.
var RerankFormats = []output.Format{output.FormatArrow, output.FormatParquet, output.FormatJSONL, output.FormatTREC}

// Check refuses, before anything starts, the job's options and outputs
// that cannot work whatever the model (Options.Check).
func (o *RerankOptions) Check() error {
	c := o.Options
	if o.Run.Run != "" && len(c.Inputs) == 0 {
		c.Inputs = RunInputs(o.Run)
	}
	if err := c.Check(RerankFormats); err != nil {
		return err
	}
	if o.Run.Run == "" {
		return checkQueryInputs(c.Inputs, o.Queries)
	}
	return nil
}

// Rerank output columns besides io/output's TREC ones.
const (
	ColInputRank  = "input_rank"
	ColInputScore = "input_score"
	ColTruncated  = "truncated"
)

// RerankSchema is the output schema: one row per scored (query, candidate).
func RerankSchema(meta map[string]string) *arrow.Schema {
	str := arrow.BinaryTypes.String
	return output.NewSchema([]arrow.Field{
		{Name: output.ColQueryID, Type: str}, {Name: output.ColDocID, Type: str},
		{Name: output.ColScore, Type: arrow.PrimitiveTypes.Float32},
		{Name: output.ColRank, Type: arrow.PrimitiveTypes.Int32},
		{Name: ColInputRank, Type: arrow.PrimitiveTypes.Int32},
		{Name: ColInputScore, Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: ColTruncated, Type: arrow.FixedWidthTypes.Boolean},
	}, meta)
}

// RunInputs are the files of a run job: the run, the queries, the corpus.
func RunInputs(r corpus.RunOptions) []string {
	return append([]string{r.Run}, append(slices.Clone(r.Queries), r.Corpus...)...)
}

// Rerank runs a rerank job.
func Rerank(ctx context.Context, o RerankOptions) (Summary, error) {
	if o.Run.Run != "" && len(o.Inputs) == 0 { // what resume guards and output checks cover
		o.Inputs = RunInputs(o.Run)
	}
	r, err := begin(&o.Options, "rerank", o.Check)
	if err != nil {
		return Summary{Kind: "rerank"}, err
	}
	return r.finish(o.run(ctx, r))
}

func (o *RerankOptions) run(ctx context.Context, r *runner) error {
	m := r.model
	if m.Classifier < 1 {
		return configErrorf("model %s is not a cross-encoder: it has no classifier head (rank pooling)", m.Path)
	}
	if m.ScoringErr != nil {
		return configErrorf("model %s cannot rerank: %v", m.Path, m.ScoringErr)
	}
	overhead, err := pairOverhead(m.Tokenizer)
	if err != nil {
		return configErrorf("model %s: %w", m.Path, err)
	}
	n := m.ContextLength
	if o.BatchTokens <= 0 {
		o.BatchTokens = 4 * n
	}
	if err := r.load(ctx, wire.RuntimeConfig{ContextSize: n, BatchSize: n, UBatchSize: n, Pooling: "rank", Embeddings: true}); err != nil {
		return err
	}
	schema := RerankSchema(o.metadata(r))
	if err := r.openWriter(&output.WriterOptions{Schema: schema}, o.resumeGuard()); err != nil {
		return err
	}
	r.started(fmt.Sprintf("pairs of up to %d tokens", n))
	src, err := o.source(ctx, r)
	if err != nil {
		r.w.Abort()
		return err
	}
	k := &rerankKind{tok: m.Tokenizer, ctx: n, overhead: overhead, req: r.req,
		groups: r.pool.Supports(wire.ExtRerankGroups)}
	sink := &rerankSink{w: r.w, sigmoid: o.Sigmoid, topN: o.TopN}
	return execute(ctx, r, r.config(o.BatchTokens, 0), pipeline.Kind[record.Query, Pair, float32](k), src, sink)
}

// source opens the queries: query files, or a run with its queries and corpus.
func (o *RerankOptions) source(ctx context.Context, r *runner) (pipeline.Source[record.Query], error) {
	ro := r.readOptions(ctx)
	if o.Run.Run != "" {
		o.Run.Read = ro
		rr, err := corpus.OpenRun(o.Run)
		if errors.Is(err, corpus.ErrDuplicateRow) {
			return nil, &ConfigError{err}
		}
		if err != nil {
			return nil, err
		}
		r.closer = append(r.closer, func() { rr.Close() })
		return rr, nil
	}
	qo := o.Queries
	qo.Read = ro
	qr, err := corpus.OpenQueries(o.Inputs, qo)
	if err != nil {
		return nil, err
	}
	r.closer = append(r.closer, func() { qr.Close() })
	return qr, nil
}

func (o *RerankOptions) metadata(r *runner) map[string]string {
	meta := commonMetadata(&o.Options, r.model)
	tag := strings.Join(strings.Fields(r.model.Name), "_")
	for k, v := range map[string]string{
		"synapse.sigmoid":      strconv.FormatBool(o.Sigmoid),
		"synapse.top_n":        strconv.Itoa(o.TopN),
		"synapse.batch_tokens": strconv.Itoa(o.BatchTokens),
		output.MetaRunTag:      tag,
	} {
		meta[k] = v
	}
	if o.Run.Run != "" {
		meta["synapse.depth"] = strconv.Itoa(max(o.Run.Depth, 0))
	}
	return meta
}

// pairOverhead is the number of special tokens the worker puts around a
// query–document pair: for a tokenizer.json (ONNX models) its
// post-processor's pair template (engine/onnx_rerank.go); for GGUF models
// (engine/llama_embed.go, pair) [CLS] q [SEP] d [SEP] for WordPiece
// vocabularies, <s> q </s></s> d </s> otherwise.
func pairOverhead(tok tokenize.Tokenizer) (int, error) {
	if p, ok := tok.(tokenize.PairLayout); ok {
		return p.PairTemplate().Overhead(), nil
	}
	v := tok.Vocab()
	switch {
	case v.Kind == tokenize.KindWPM && v.BOS >= 0 && v.SEP >= 0:
		return 3, nil
	case v.BOS >= 0 && v.EOS >= 0:
		return 4, nil
	}
	return 0, errors.New("its vocabulary has no BOS/SEP/EOS tokens to build query–document pairs with")
}

// Pair is one query–candidate pair to score.
type Pair struct {
	Query, Doc []int32 // plain ids; the worker adds the special tokens
	Cand       int     // the candidate's position in its query's list
	Truncated  bool    // the document was cut to fit the context
	overhead   int
}

// rerankKind scores each query's candidates with a cross-encoder.
type rerankKind struct {
	tok      tokenize.Tokenizer
	ctx      int // the most tokens a pair may have, special tokens included
	overhead int
	req      *requester
	groups   bool // the workers answer RERANK_GROUPS
}

func (k *rerankKind) Place(q record.Query) (int64, int64) { return q.Index, q.Group }

func (k *rerankKind) Weight(q record.Query) int64 {
	n := int64(len(q.Text))
	for _, c := range q.Cands {
		n += int64(len(c.Text))
	}
	return n
}

// Items tokenizes the query once and each candidate, cutting a document
// (never the query) to fit the context.
func (k *rerankKind) Items(q record.Query) ([]pipeline.Work[Pair], error) {
	qerr := q.Err
	var qids []int32
	if qerr == nil {
		qids = k.tok.Tokenize(q.Text, tokenize.Options{}).IDs()
		if room := k.ctx - k.overhead - len(qids); room < 1 {
			qerr = q.Error(record.ReasonQueryTooLong, fmt.Sprintf("the query has %d tokens; with %d special tokens and at least one of the document it must fit the model's context of %d",
				len(qids), k.overhead, k.ctx))
		}
	}
	if qerr != nil && len(q.Cands) == 0 {
		return nil, qerr
	}
	work := make([]pipeline.Work[Pair], len(q.Cands))
	for i, c := range q.Cands {
		work[i].Item = Pair{Cand: i, overhead: k.overhead}
		switch {
		case c.Err != nil:
			work[i].Err = c.Err
		case qerr != nil:
			work[i].Err = q.CandidateError(i, qerr.Reason, qerr.Detail)
		default:
			d := k.tok.Tokenize(c.Text, tokenize.Options{}).IDs()
			if room := k.ctx - k.overhead - len(qids); len(d) > room {
				d, work[i].Item.Truncated = d[:room:room], true
			}
			work[i].Item.Query, work[i].Item.Doc = qids, d
		}
	}
	return work, nil
}

func (k *rerankKind) Tokens(p Pair) int { return len(p.Query) + len(p.Doc) + p.overhead }

// Call scores pairs in one RERANK_GROUPS request, pairs of one query
// together; with workers that lack it, one RERANK per query.
func (k *rerankKind) Call(ctx context.Context, pairs []Pair) ([]float32, error) {
	var groups [][]int // pair indexes by query, in order of first appearance
	byQuery := map[*int32]int{}
	for i, p := range pairs {
		key := queryKey(p.Query)
		g, ok := byQuery[key]
		if !ok || key == nil {
			g = len(groups)
			groups = append(groups, nil)
			byQuery[key] = g
		}
		groups[g] = append(groups[g], i)
	}
	scores := make([]float32, len(pairs))
	if !k.groups {
		for _, g := range groups {
			if err := k.send(ctx, pairs, [][]int{g}, scores); err != nil {
				return nil, err
			}
		}
		return scores, nil
	}
	return scores, k.send(ctx, pairs, groups, scores)
}

// queryKey identifies a query's ids by their first element's address
// (all pairs of a query share one slice); nil for an empty query.
func queryKey(ids []int32) *int32 {
	if len(ids) == 0 {
		return nil
	}
	return &ids[0]
}

// send scores the pairs of groups in one request and files the scores.
func (k *rerankKind) send(ctx context.Context, pairs []Pair, groups [][]int, scores []float32) error {
	var ids []int32
	wg := make([]wire.RerankGroup, len(groups))
	tokens, n := 0, 0
	for gi, g := range groups {
		q := pairs[g[0]].Query
		wg[gi].QueryNTokens = len(q)
		ids = append(ids, q...)
		for _, i := range g {
			wg[gi].Candidates = append(wg[gi].Candidates, wire.Candidate{NTokens: len(pairs[i].Doc)})
			ids = append(ids, pairs[i].Doc...)
			tokens += k.Tokens(pairs[i])
			n++
		}
	}
	var req wire.Message = &wire.RerankGroups{ModelRef: k.req.modelRef, Groups: wg, IDs: ids}
	if !k.groups {
		req = &wire.Rerank{ModelRef: k.req.modelRef, QueryNTokens: wg[0].QueryNTokens, Candidates: wg[0].Candidates, IDs: ids}
	}
	resp, err := k.req.do(ctx, req, tokens)
	if err != nil {
		return err
	}
	s, ok := resp.(*wire.Scores)
	if !ok || len(s.Data) != n {
		return fmt.Errorf("job: %s answered with %s for %d pairs", req.Type(), resp.Type(), n)
	}
	at := 0
	for _, g := range groups {
		for _, i := range g {
			scores[i] = s.Data[at]
			at++
		}
	}
	return nil
}

// Check refuses a NaN or infinite score: never a silent value.
func (k *rerankKind) Check(_ Pair, s float32) error {
	if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
		return refuse(ReasonEngineError, "the engine returned the score %v", s)
	}
	return nil
}

// rerankSink writes each query's scored candidates, ranked.
type rerankSink struct {
	w       *output.Writer
	sigmoid bool
	topN    int
}

func (s *rerankSink) Put(r pipeline.Result[record.Query, Pair, float32]) error {
	if r.File != nil {
		return s.w.PutFileError(r.File)
	}
	if r.RowErr != nil {
		return s.w.Put(r.Index, r.Group, nil, []*record.RowError{r.RowErr})
	}
	q := r.Rec
	rows := make(rerankRows, len(r.Done))
	for i, d := range r.Done {
		c := q.Cands[d.Item.Cand]
		rows[i] = rerankRow{query: q.ID, doc: c.ID, score: d.Out, inputRank: int32(d.Item.Cand + 1), inputScore: c.Score, truncated: d.Item.Truncated}
	}
	rows.rank()
	if s.topN > 0 {
		rows = slices.DeleteFunc(rows, func(x rerankRow) bool { return int(x.rank) > s.topN })
	}
	if s.sigmoid {
		for i := range rows {
			rows[i].score = float32(1 / (1 + math.Exp(-float64(rows[i].score))))
		}
	}
	return s.w.Put(r.Index, r.Group, rows, itemErrors(r.Failed, func(f pipeline.Failed[Pair]) *record.RowError {
		var re *record.RowError
		if errors.As(f.Err, &re) {
			return re
		}
		reason, detail, log := describe(f.Err)
		e := q.CandidateError(f.Item.Cand, reason, detail)
		e.WorkerLog = log
		return e
	}))
}

type rerankRow struct {
	query, doc string
	score      float32
	rank       int32
	inputRank  int32
	inputScore *float32
	truncated  bool
}

// rerankRows are a query's rows in input order.
type rerankRows []rerankRow

// rank numbers the rows by score, best first; ties by document id.
func (rs rerankRows) rank() {
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if rs[a].score != rs[b].score {
			if rs[a].score > rs[b].score {
				return -1
			}
			return 1
		}
		return strings.Compare(rs[a].doc, rs[b].doc)
	})
	for r, i := range order {
		rs[i].rank = int32(r + 1)
	}
}

func (rs rerankRows) Len() int { return len(rs) }

// AppendTo implements output.Rows for a RerankSchema builder.
func (rs rerankRows) AppendTo(b *array.RecordBuilder) error {
	f := b.Fields()
	if len(f) != 7 {
		return fmt.Errorf("job: rerank rows for a schema of %d columns", len(f))
	}
	for _, r := range rs {
		f[0].(*array.StringBuilder).Append(r.query)
		f[1].(*array.StringBuilder).Append(r.doc)
		f[2].(*array.Float32Builder).Append(r.score)
		f[3].(*array.Int32Builder).Append(r.rank)
		f[4].(*array.Int32Builder).Append(r.inputRank)
		if r.inputScore != nil {
			f[5].(*array.Float32Builder).Append(*r.inputScore)
		} else {
			f[5].(*array.Float32Builder).AppendNull()
		}
		f[6].(*array.BooleanBuilder).Append(r.truncated)
	}
	return nil
}
