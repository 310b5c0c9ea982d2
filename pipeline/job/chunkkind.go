package job

import (
	"context"
	"fmt"

	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/wire"
)

// embedKind embeds documents chunk by chunk, one pooled vector a chunk
// (EMBED_BATCH): the pipeline kind of a dense run, which the sparse and
// tokens kinds extend (sparseKind, tokensKind) and the late kind builds on.
type embedKind struct {
	tok       tokenize.Tokenizer
	ch        Chunking
	req       *requester
	pooling   string
	normalize bool
	dims      int // the width LOADED reported: answers of another width are refused
	// cache holds the answers to the calibration's requests, given again
	// without sending them (nil: none).
	cache *calCache
}

func (k *embedKind) Place(d doc) (int64, int64) { return d.Index, d.Group }

// Weight is the text and the rows copied from the previous output.
func (k *embedKind) Weight(d doc) int64 {
	if d.reuse != nil {
		r := d.reuse[0]
		return int64(len(d.Text) + len(d.reuse)*(4*len(r.Embedding)+len(r.Vector)+8*len(r.SparseIndices)+tokenBytes(r)+64))
	}
	return int64(len(d.Text))
}

// Items cuts a document into chunks; a reused or duplicate document has none.
func (k *embedKind) Items(d doc) ([]pipeline.Work[Chunk], error) {
	if d.reuse != nil || d.dup || d.kept {
		return nil, nil
	}
	chunks := k.chunks(d)
	work := make([]pipeline.Work[Chunk], len(chunks))
	for i, c := range chunks {
		work[i].Item = c
	}
	return work, nil
}

// chunks cuts a document's text; with Truncate, a chunk that leaves
// tokens out says so (Chunk.Cut), for the sink to count.
func (k *embedKind) chunks(d doc) []Chunk {
	res := k.tok.Tokenize(d.Text, tokenize.Options{})
	chunks := dropSkipped(k.tok, k.ch.Cut(res.Tokens))
	if k.ch.Truncate && int(chunks[0].TokenEnd) < len(res.Tokens) {
		chunks[0].Cut = true
	}
	return chunks
}

func (k *embedKind) Tokens(c Chunk) int { return len(c.IDs) }

// packItems lays chunks out as a request's items (numbered from 0, with
// their pooling start when pooled) and its token ids, one chunk after
// another.
func packItems(chunks []Chunk, pooled bool) ([]wire.Item, []int32) {
	items := make([]wire.Item, len(chunks))
	tokens := 0
	for i, c := range chunks {
		items[i] = wire.Item{ID: uint64(i), NTokens: len(c.IDs)}
		if pooled {
			items[i].PoolFrom = c.PoolFrom
		}
		tokens += len(c.IDs)
	}
	ids := make([]int32, 0, tokens)
	for _, c := range chunks {
		ids = append(ids, c.IDs...)
	}
	return items, ids
}

// Call answers a request the calibration sent from its kept answer, and
// asks the engine otherwise.
func (k *embedKind) Call(ctx context.Context, chunks []Chunk) ([][]float32, error) {
	if k.cache != nil {
		if out, ok := k.cache.take(chunks); ok {
			return out, nil
		}
	}
	return k.call(ctx, chunks)
}

// call asks the engine for the chunks' vectors.
func (k *embedKind) call(ctx context.Context, chunks []Chunk) ([][]float32, error) {
	req := &wire.EmbedBatch{ModelRef: k.req.modelRef, Pooling: k.pooling, Normalize: k.normalize}
	req.Items, req.IDs = packItems(chunks, true)
	v, err := ask[*wire.Vectors](ctx, k.req, req, len(req.IDs))
	if err != nil {
		return nil, err
	}
	if v.N != len(chunks) || v.Dims <= 0 || (k.dims > 0 && v.Dims != k.dims) || len(v.Data) != v.N*v.Dims {
		return nil, fmt.Errorf("job: VECTORS n=%d dims=%d for %d chunks", v.N, v.Dims, len(chunks))
	}
	out := make([][]float32, v.N)
	for i := range out {
		out[i] = v.Data[i*v.Dims : (i+1)*v.Dims : (i+1)*v.Dims]
	}
	return out, nil
}

// Check refuses a vector with NaN or infinite values: never a silent value.
func (k *embedKind) Check(_ Chunk, v []float32) error {
	if i := vector.NonFinite(v); i >= 0 {
		return refuse(ReasonEngineError, "the engine returned %v at dimension %d", v[i], i)
	}
	return nil
}
