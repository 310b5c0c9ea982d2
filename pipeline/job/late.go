package job

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/wire"
)

// OutputLateChunking is the vector settings' output kind of a late-chunked
// embedding (vector.Settings.Output).
const OutputLateChunking = "late-chunking"

// LateChunking cuts a document into windows of up to the model's context
// (Window.Window tokens, consecutive windows sharing Window.Overlap) and
// each window's own tokens (those no earlier window holds) into chunks of
// Chunk tokens, the last of a window shorter when they do not divide
// evenly. A window is embedded once; each of its chunks is the mean of its
// own tokens' states (Jina's late chunking), so that a chunk carries the
// context of the window around it.
type LateChunking struct {
	Window Chunking // the windows the model sees, with its special tokens
	Chunk  int      // content tokens per chunk
}

// lateWindow is one window of a document and the chunks pooled from it.
type lateWindow struct {
	IDs    []int32 // prefix + window + suffix
	Chunks []Chunk // each chunk's IDs are its span of IDs
	Spans  [][2]int
}

// Cut splits a document's tokens into windows and their chunks. A
// document with no tokens yields one window of its special tokens and one
// chunk pooling them, as Chunking.Cut gives every document a vector.
func (c LateChunking) Cut(toks []tokenize.Token) []lateWindow {
	windows := c.Window.Cut(toks)
	out := make([]lateWindow, 0, len(windows))
	next, index := 0, int32(0) // the first token no chunk holds; the next chunk's number
	for _, w := range windows {
		lw := lateWindow{IDs: w.IDs}
		if len(toks) == 0 {
			lw.Chunks = []Chunk{{IDs: w.IDs}}
			lw.Spans = [][2]int{{0, len(w.IDs)}}
		}
		for start := next; start < int(w.TokenEnd); start += c.Chunk {
			end := min(start+c.Chunk, int(w.TokenEnd))
			off := len(c.Window.Prefix) + start - int(w.TokenStart)
			lw.Chunks = append(lw.Chunks, Chunk{Index: index, TokenStart: int32(start), TokenEnd: int32(end),
				ByteStart: toks[start].Start, ByteEnd: toks[end-1].End, IDs: w.IDs[off : off+end-start : off+end-start]})
			lw.Spans = append(lw.Spans, [2]int{off, off + end - start})
			index++
		}
		next = int(w.TokenEnd)
		out = append(out, lw)
	}
	return out
}

// CheckLateFlags refuses the flags --late-chunking cannot go with, from the
// flags alone: the CLI asks it before anything is opened, the job again.
// The refusal is said here only.
func (o *EmbedOptions) CheckLateFlags() error {
	if o.LateChunking && (o.ChunkTokens == 0 || o.Truncate) {
		return configErrorf("--late-chunking needs --chunk-tokens (the chunks pooled from each window) and not --truncate")
	}
	return nil
}

// lateOut is the late-chunking output kind (--late-chunking): dense
// vectors, each chunk pooled from the token states of the window around it
// (EMBED_TOKENS). It writes what denseOut writes.
type lateOut struct{ denseOut }

// check refuses the other kinds' flags and late chunking without
// --chunk-tokens or with --truncate.
func (k *lateOut) check(o *EmbedOptions) error {
	if err := o.CheckLateFlags(); err != nil {
		return err
	}
	return k.denseOut.check(o)
}

// chunking: the windows span the model's context; --chunk-tokens cuts
// them, and must fit one.
func (*lateOut) chunking(o *EmbedOptions, m *artifact.Artifact) (Chunking, error) {
	return o.cut(m, 0, func(ch Chunking) error {
		if o.ChunkTokens > ch.Window {
			return configErrorf("--chunk-tokens %d with --late-chunking is larger than the model's window of %d tokens", o.ChunkTokens, ch.Window)
		}
		return nil
	})
}

// plan refuses late chunking where it cannot be what Jina's method
// computes: on a model whose vectors are not the mean of its token states
// (another pooling, a prompt left out of it, Dense modules after it), and
// the models of no pooled vector.
func (*lateOut) plan(o *EmbedOptions, m *artifact.Artifact, st stRun, ch Chunking) (Chunking, error) {
	if st.poolFrom > 0 {
		return ch, configErrorf("--late-chunking: %s leaves the prompt out of its pooling; late chunking pools each chunk's own tokens", m.Name)
	}
	if p := cmp.Or(o.Pooling, m.Pooling); p != "mean" {
		return ch, configErrorf("--late-chunking pools each chunk's tokens by their mean; %s pools by %s (give --pooling mean to override)", m.Name, p)
	}
	for _, mod := range m.Chain.Modules {
		if mod.Kind != hfmodel.ModPooling && mod.Kind != hfmodel.ModNormalize {
			return ch, configErrorf("--late-chunking: %s has a %s module after its pooling, which synapse does not apply to pooled token states", m.Name, mod.Kind)
		}
	}
	return ch, refusePooled(m)
}

// probe asks the workers for token states of a window (probeTokens).
func (*lateOut) probe(ctx context.Context, o *EmbedOptions, r *runner, p *embedPlan) error {
	_, err := o.probeTokens(ctx, r, p.ch.Window+len(p.ch.Prefix)+len(p.ch.Suffix))
	return err
}

func (*lateOut) chunkSize(o *EmbedOptions, _ Chunking) int { return o.ChunkTokens }

func (*lateOut) settings(_ *EmbedOptions, _ *artifact.Artifact, s *vector.Settings) {
	s.Output = OutputLateChunking
}

// calibrates: the calibration embeds chunks, not windows.
func (*lateOut) calibrates(o *EmbedOptions) error {
	return configErrorf("--dtype %s with --late-chunking: give the ranges with --calibration (an earlier float32 output of the same settings)", o.Dtype)
}

func (*lateOut) execute(ctx context.Context, o *EmbedOptions, r *runner, cfg pipeline.Config, p *embedPlan, e *embedRun) error {
	k := &lateKind{embedKind: e.kind, late: LateChunking{Window: p.ch, Chunk: o.ChunkTokens}, normalize: o.lateNormalize(r.model)}
	return execute(ctx, r, cfg, storable(o, pipeline.Kind[doc, lateWindow, [][]float32](k)), e.src, lateSink{e.sink})
}

// summary counts the chunks and the windows they were pooled from.
func (*lateOut) summary(o *EmbedOptions, r *runner, p *embedPlan, e *embedRun) []SummaryLine {
	j := o.Stats.Snapshot()
	line := SummaryLine{"chunks", fmt.Sprintf("%d, pooled from %d windows of up to %d tokens (--late-chunking)", e.inc.counts.LateChunks, j.Items, p.ch.Window)}
	if j.ItemFailures > 0 {
		line.Text += fmt.Sprintf(" (+ %d windows in errors)", j.ItemFailures)
	}
	r.sum.Items = &line
	return p.st.lines(r.model, p.ch, true, o.ChunkTokens)
}

func (*lateOut) items() string { return "windows" }

// lateNormalize is whether late-chunked vectors are L2-normalised: asked,
// or the model's chain ends in Normalize.
func (o *EmbedOptions) lateNormalize(m *artifact.Artifact) bool {
	return o.Normalize || slices.ContainsFunc(m.Chain.Modules, func(x hfmodel.Module) bool { return x.Kind == hfmodel.ModNormalize })
}

// probeTokens checks, before any work, that the workers return token
// states for the loaded model: they must announce EMBED_TOKENS, and a
// one-sequence EMBED_TOKENS of the model's special tokens must be answered
// (an engine without per-token outputs answers unsupported, an old worker
// unknown_type). It returns the states' width, and caps the request size
// so that an answer fits the negotiated frame.
func (o *EmbedOptions) probeTokens(ctx context.Context, r *runner, window int) (int, error) {
	if !r.pool.Supports(wire.ExtEmbedTokens) {
		return 0, configErrorf("--late-chunking needs workers that return token states (%s); these workers do not announce it (an older synapse worker?)", wire.ExtEmbedTokens)
	}
	pre, suf := r.model.Tokenizer.Affixes()
	ids := slices.Concat(pre, suf)
	if len(ids) == 0 {
		ids = []int32{0}
	}
	resp, err := r.req.do(ctx, &wire.EmbedTokens{ModelRef: r.req.modelRef, Items: []wire.Item{{NTokens: len(ids)}}, IDs: ids}, len(ids))
	var we *wire.Error
	if errors.As(err, &we) && (we.Code == wire.CodeUnsupported || we.Code == wire.CodeUnknownType) {
		return 0, configErrorf("--late-chunking: the workers return no token states for %s: %s", r.model.Name, we.Msg)
	}
	if err != nil {
		return 0, fmt.Errorf("token states probe: %w", err)
	}
	ts, ok := resp.(*wire.TokenStates)
	if !ok || ts.Dims <= 0 || len(ts.NTokens) != 1 || ts.NTokens[0] != len(ids) {
		return 0, fmt.Errorf("job: token states probe answered with %s", resp.Type())
	}
	if ts.Dims != r.loaded.Dims {
		return 0, configErrorf("--late-chunking: %s's token states are %d wide, its vectors %d: its modules change the width", r.model.Name, ts.Dims, r.loaded.Dims)
	}
	limit := maxStateTokens(r.pool.MaxFrame(), ts.Dims)
	if window > limit {
		return 0, configErrorf("--late-chunking: a window of %d tokens × %d dims does not fit the %d-byte frame limit", window, ts.Dims, r.pool.MaxFrame())
	}
	o.BatchTokens = min(o.BatchTokens, limit)
	return ts.Dims, nil
}

// maxStateTokens is the most tokens whose states (dims f32 each) one raw
// frame of maxFrame bytes holds.
func maxStateTokens(maxFrame uint32, dims int) int {
	return int(int64(maxFrame) / (4 * int64(dims)))
}

// lateKind embeds documents window by window and pools their chunks.
type lateKind struct {
	*embedKind
	late      LateChunking
	normalize bool
}

// Items cuts a document into windows; a reused or duplicate one has none.
func (k *lateKind) Items(d doc) ([]pipeline.Work[lateWindow], error) {
	if d.reuse != nil || d.dup {
		return nil, nil
	}
	windows := k.late.Cut(k.tok.Tokenize(d.Text, tokenize.Options{}).Tokens)
	work := make([]pipeline.Work[lateWindow], len(windows))
	for i, w := range windows {
		work[i].Item = w
	}
	return work, nil
}

func (k *lateKind) Tokens(w lateWindow) int { return len(w.IDs) }

// Call asks for the windows' token states and pools each chunk's span.
func (k *lateKind) Call(ctx context.Context, ws []lateWindow) ([][][]float32, error) {
	req := &wire.EmbedTokens{ModelRef: k.req.modelRef, Items: make([]wire.Item, len(ws))}
	tokens := 0
	for i, w := range ws {
		req.Items[i] = wire.Item{ID: uint64(i), NTokens: len(w.IDs)}
		tokens += len(w.IDs)
	}
	req.IDs = make([]int32, 0, tokens)
	for _, w := range ws {
		req.IDs = append(req.IDs, w.IDs...)
	}
	ts, err := ask[*wire.TokenStates](ctx, k.req, req, tokens)
	if err != nil {
		return nil, err
	}
	if len(ts.NTokens) != len(ws) || ts.Dims != k.dims {
		return nil, fmt.Errorf("job: TOKEN_STATES of %d sequences, dims %d, for %d windows of dims %d", len(ts.NTokens), ts.Dims, len(ws), k.dims)
	}
	out := make([][][]float32, len(ws))
	for i, w := range ws {
		if ts.NTokens[i] != len(w.IDs) {
			return nil, fmt.Errorf("job: TOKEN_STATES holds %d tokens for a window of %d", ts.NTokens[i], len(w.IDs))
		}
		states := ts.Rows(i)
		out[i] = make([][]float32, len(w.Spans))
		for j, sp := range w.Spans {
			out[i][j] = meanPool(states, ts.Dims, sp[0], sp[1], k.normalize)
		}
	}
	return out, nil
}

// meanPool is the mean of rows [from, to) of states (dims wide), in
// float64, L2-normalised when asked.
func meanPool(states []float32, dims, from, to int, normalize bool) []float32 {
	acc := make([]float64, dims)
	for t := from; t < to; t++ {
		for d, x := range states[t*dims : (t+1)*dims] {
			acc[d] += float64(x)
		}
	}
	n := float64(to - from)
	var sq float64
	for d := range acc {
		acc[d] /= n
		sq += acc[d] * acc[d]
	}
	scale := 1.0
	if normalize && sq > 0 {
		scale = 1 / math.Sqrt(sq)
	}
	v := make([]float32, dims)
	for d, x := range acc {
		v[d] = float32(x * scale)
	}
	return v
}

// Check refuses a window any of whose vectors is not finite.
func (k *lateKind) Check(w lateWindow, vs [][]float32) error {
	for j, v := range vs {
		if err := k.embedKind.Check(w.Chunks[j], v); err != nil {
			return err
		}
	}
	return nil
}

// lateSink hands an embedding sink the chunks of each window, as if they
// had been embedded one by one: the rows, dedup, --previous and errors of
// a late-chunked run are those of any embedding run.
type lateSink struct{ s *embedSink }

func (l lateSink) Put(r pipeline.Result[doc, lateWindow, [][]float32]) error {
	for _, dn := range r.Done {
		l.s.inc.LateChunks += int64(len(dn.Item.Chunks))
	}
	return l.s.Put(flattenLate(r))
}

func (l lateSink) Replay(r pipeline.Result[doc, lateWindow, [][]float32]) {
	l.s.Replay(flattenLate(r))
}

// flattenLate turns windows' results into their chunks' results.
func flattenLate(r pipeline.Result[doc, lateWindow, [][]float32]) pipeline.Result[doc, Chunk, []float32] {
	out := pipeline.Result[doc, Chunk, []float32]{Rec: r.Rec, Index: r.Index, Group: r.Group, RowErr: r.RowErr, File: r.File}
	for _, dn := range r.Done {
		for j, c := range dn.Item.Chunks {
			out.Done = append(out.Done, pipeline.Done[Chunk, []float32]{Ord: int(c.Index), Item: c, Out: dn.Out[j]})
		}
	}
	for _, f := range r.Failed {
		for _, c := range f.Item.Chunks {
			out.Failed = append(out.Failed, pipeline.Failed[Chunk]{Ord: int(c.Index), Item: c, Err: f.Err})
		}
	}
	return out
}
