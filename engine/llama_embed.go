package engine

import (
	"context"
	"math"

	"github.com/hybridgroup/yzma/pkg/llama"

	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/wire"
)

// llamaModel is one loaded model with its contexts.
//
// A llama.cpp context fixes its pooling when it is created, so an embedding
// model keeps one context per pooling it has been asked for: the one created
// by LOAD (runtime_config.pooling, or the model's own when empty) and, lazily,
// one more for each other pooling an EMBED_BATCH or RERANK names, all with the
// same n_ctx, n_batch, n_ubatch, n_seq_max and threads. A generation model
// (embeddings: false) has one context without pooling.
type llamaModel struct {
	ref, path, arch string
	model           llama.Model
	vocab           llama.Vocab
	nVocab          int32
	cfg             llamaConfig
	dims            int
	encode          bool // bidirectional encoder (BERT, T5 encoder): llama_encode; decoders: llama_decode
	hasCls          bool // has a classifier head, so rank pooling works
	// scoring is how rank pooling's n_cls_out outputs become one score
	// (hfmodel.LabelScoring of the file's classifier labels), scoringErr why
	// they cannot.
	scoring    hfmodel.Scoring
	scoringErr error
	defPool    llama.PoolingType
	ctxs       map[llama.PoolingType]llama.Context
	gen        llama.Context
	batch      llama.Batch
	batchCap   int32
	pieces     [][]byte          // each token's bytes (generation's UTF-8 guard), made on first use
	cur        []llama.TokenData // the candidates of a sampling step
}

// newContext creates a context with the model's config and the given pooling.
func (m *llamaModel) newContext(pool llama.PoolingType) (llama.Context, error) {
	cp := llama.ContextDefaultParams()
	cp.NCtx = uint32(m.cfg.nCtx)
	cp.NBatch = uint32(m.cfg.nBatch)
	cp.NUbatch = uint32(m.cfg.nUBatch)
	cp.NSeqMax = uint32(m.cfg.seqMax)
	cp.NThreads = int32(m.cfg.threads)
	cp.NThreadsBatch = int32(m.cfg.threads)
	cp.PoolingType = pool
	if m.cfg.embeddings {
		cp.Embeddings = 1
		cp.KVUnified = 1 // sequences of one call share n_ctx instead of n_ctx/n_seq_max each
	}
	logs.takeErrors()
	c, err := llama.InitFromModel(m.model, cp)
	if err != nil {
		return 0, wire.Errorf(wire.CodeOOM, "llama.cpp could not create a context (%s) for %s: %w: %s", m.cfg, m.path, errNoContext, logs.takeErrors())
	}
	return c, nil
}

// width is the length of one pooled output for a pooling type.
func (m *llamaModel) width(pool llama.PoolingType) int {
	if pool == llama.PoolingTypeRank {
		return int(llama.ModelNClsOut(m.model))
	}
	if n := llama.ModelNEmbdOut(m.model); n > 0 {
		return int(n)
	}
	return int(llama.ModelNEmbd(m.model))
}

// context returns the embedding context for a pooling, creating it on first use.
func (m *llamaModel) context(pool llama.PoolingType) (llama.Context, error) {
	if c, ok := m.ctxs[pool]; ok {
		return c, nil
	}
	if pool == llama.PoolingTypeRank && !m.hasCls {
		return 0, wire.Errorf(wire.CodeUnsupported, "model %s has no classifier head for rank pooling", m.ref)
	}
	if pool == llama.PoolingTypeRank && m.scoringErr != nil {
		return 0, wire.Errorf(wire.CodeUnsupported, "model %s cannot rerank: %v", m.ref, m.scoringErr)
	}
	c, err := m.newContext(pool)
	if err != nil {
		return 0, err
	}
	m.ctxs[pool] = c
	return c, nil
}

func (m *llamaModel) free() {
	if m.batchCap > 0 {
		llama.BatchFree(m.batch)
		m.batchCap = 0
	}
	for p, c := range m.ctxs {
		llama.Free(c)
		delete(m.ctxs, p)
	}
	if m.gen != 0 {
		llama.Free(m.gen)
		m.gen = 0
	}
	if m.model != 0 {
		llama.ModelFree(m.model)
		m.model = 0
	}
}

// Unload frees a model and its contexts.
func (e *Llama) Unload(_ context.Context, ref string) error {
	m, err := e.model(ref)
	if err != nil {
		return err
	}
	m.free()
	delete(e.models, ref)
	return nil
}

// Embed pools one vector per sequence. Sequences are packed into as few
// llama.cpp calls as fit n_ubatch tokens and n_seq_max sequences each; each
// sequence has its own seq id, and attention never crosses sequences.
func (e *Llama) Embed(ctx context.Context, ref, pooling string, normalize bool, seqs [][]int32) ([]float32, int, error) {
	m, err := e.runnable(ref, "embed")
	if err != nil {
		return nil, 0, err
	}
	if !m.cfg.embeddings {
		return nil, 0, wire.Errorf(wire.CodeBadRequest, "model %s was loaded for generation (embeddings: false)", ref)
	}
	pool := m.defPool
	if pooling != PoolingDefault {
		if pool, err = parsePooling(pooling); err != nil {
			return nil, 0, wire.Errorf(wire.CodeBadRequest, "%w", err)
		}
	}
	if pool == llama.PoolingTypeNone {
		return nil, 0, wire.Errorf(wire.CodeBadRequest, "pooling none gives per-token outputs; EMBED_BATCH needs mean, cls, last or rank")
	}
	c, err := m.context(pool)
	if err != nil {
		return nil, 0, err
	}
	dims := m.width(pool)
	out := make([]float32, len(seqs)*dims)
	if err := m.run(ctx, c, seqs, dims, out); err != nil {
		return nil, 0, err
	}
	if normalize {
		for i := range seqs {
			l2normalize(out[i*dims : (i+1)*dims])
		}
	}
	return out, dims, nil
}

// run evaluates seqs in calls of at most n_ubatch tokens and n_seq_max
// sequences, writing each sequence's pooled output (dims floats) to out.
func (m *llamaModel) run(ctx context.Context, c llama.Context, seqs [][]int32, dims int, out []float32) error {
	limit := min(m.cfg.nUBatch, m.cfg.nCtx)
	for i, s := range seqs {
		if err := m.checkIDs(s, limit); err != nil {
			return wire.Errorf(wire.CodeBadRequest, "sequence %d: %w", i, err)
		}
	}
	for start := 0; start < len(seqs); {
		if err := ctx.Err(); err != nil {
			return wire.Errorf(wire.CodeInternal, "embed: %w", err)
		}
		end, tokens := start, 0
		for end < len(seqs) && end-start < m.cfg.seqMax && tokens+len(seqs[end]) <= limit {
			tokens += len(seqs[end])
			end++
		}
		if err := m.evalChunk(c, seqs[start:end], tokens, dims, out[start*dims:end*dims]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// evalChunk runs one llama.cpp call over seqs (seq id = index) and copies out
// the pooled outputs.
func (m *llamaModel) evalChunk(c llama.Context, seqs [][]int32, tokens, dims int, out []float32) error {
	if err := m.eval(c, seqs, tokens); err != nil {
		return err
	}
	for k := range seqs {
		v, _ := llama.GetEmbeddingsSeq(c, llama.SeqId(k), int32(dims))
		if v == nil {
			return wire.Errorf(wire.CodeInternal, "llama.cpp returned no pooled output for sequence %d", k)
		}
		copy(out[k*dims:(k+1)*dims], v)
	}
	return nil
}

// eval runs one llama.cpp call over seqs (seq id = index), every token
// with an output, in a cleared memory.
func (m *llamaModel) eval(c llama.Context, seqs [][]int32, tokens int) error {
	if mem, err := llama.GetMemory(c); err == nil && mem != 0 {
		llama.MemoryClear(mem, true)
	}
	b := m.batchFor(tokens)
	b.Clear()
	for k, s := range seqs {
		id := []llama.SeqId{llama.SeqId(k)}
		for pos, tok := range s {
			if err := b.Add(llama.Token(tok), llama.Pos(pos), id, true); err != nil {
				return wire.Errorf(wire.CodeInternal, "batch: %w", err)
			}
		}
	}
	var rc int32
	if m.encode {
		rc, _ = llama.Encode(c, *b)
	} else {
		rc, _ = llama.Decode(c, *b)
	}
	if rc != 0 {
		return wire.Errorf(wire.CodeInternal, "llama.cpp evaluation failed (code %d, %d tokens, %d sequences): %s", rc, tokens, len(seqs), logs.takeErrors())
	}
	return nil
}

// batchFor returns the model's reusable batch, grown to hold n tokens.
func (m *llamaModel) batchFor(n int) *llama.Batch {
	if int32(n) > m.batchCap {
		if m.batchCap > 0 {
			llama.BatchFree(m.batch)
		}
		capacity := max(int32(n), int32(min(m.cfg.nUBatch, m.cfg.nCtx)))
		m.batch = llama.BatchInit(capacity, 0, 1)
		m.batchCap = capacity
	}
	return &m.batch
}

// checkIDs rejects an empty or over-long sequence and ids outside the vocabulary.
func (m *llamaModel) checkIDs(s []int32, limit int) error {
	if len(s) == 0 {
		return errEmptySeq
	}
	if len(s) > limit {
		return &seqLenError{n: len(s), limit: limit}
	}
	for _, t := range s {
		if t < 0 || t >= m.nVocab {
			return &tokenError{tok: t, nVocab: m.nVocab}
		}
	}
	return nil
}

// Rerank scores query–candidate pairs with rank pooling, the pairs of all
// groups evaluated together. A pair's score is its one classifier output,
// or logits[1] − logits[0] for two labels whose label 1 is the positive
// class (hfmodel.LabelScoring; other label sets are refused). Each pair is built from the plain ids with the
// model's special tokens: BERT-style [CLS] q [SEP] d [SEP] for WordPiece
// vocabularies, XLM-R-style <s> q </s></s> d </s> otherwise.
func (e *Llama) Rerank(ctx context.Context, ref string, groups []RerankGroup) ([]float32, error) {
	m, err := e.runnable(ref, "rerank")
	if err != nil {
		return nil, err
	}
	if !m.cfg.embeddings {
		return nil, wire.Errorf(wire.CodeBadRequest, "model %s was loaded for generation (embeddings: false)", ref)
	}
	c, err := m.context(llama.PoolingTypeRank)
	if err != nil {
		return nil, err
	}
	var pairs [][]int32
	for _, g := range groups {
		for _, d := range g.Candidates {
			p, err := m.pair(g.Query, d)
			if err != nil {
				return nil, err
			}
			pairs = append(pairs, p)
		}
	}
	dims := m.width(llama.PoolingTypeRank)
	if dims != m.scoring.Labels {
		return nil, wire.Errorf(wire.CodeUnsupported, "model %s has %d classifier outputs; its labels say %d", ref, dims, m.scoring.Labels)
	}
	out := make([]float32, len(pairs)*dims)
	if err := m.run(ctx, c, pairs, dims, out); err != nil {
		return nil, err
	}
	scores := make([]float32, len(pairs))
	for i := range scores {
		scores[i] = m.scoring.Score(out[i*dims : (i+1)*dims])
	}
	return scores, nil
}

// pair builds one cross-encoder input from plain query and document ids.
func (m *llamaModel) pair(q, d []int32) ([]int32, error) {
	bos, eos, sep := int32(llama.VocabBOS(m.vocab)), int32(llama.VocabEOS(m.vocab)), int32(llama.VocabSEP(m.vocab))
	p := make([]int32, 0, len(q)+len(d)+4)
	switch {
	case llama.GetVocabType(m.vocab) == llama.VocabTypeWPM && bos >= 0 && sep >= 0:
		p = append(append(append(append(append(p, bos), q...), sep), d...), sep)
	case bos >= 0 && eos >= 0:
		p = append(append(append(append(append(p, bos), q...), eos, eos), d...), eos)
	default:
		return nil, wire.Errorf(wire.CodeUnsupported, "model %s: no BOS/SEP/EOS tokens to build rerank pairs with", m.ref)
	}
	return p, nil
}

func l2normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
}
