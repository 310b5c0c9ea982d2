package job

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// calibrationKeepBytes bounds the float vectors a calibration keeps for
// the run (calCache): requests past it are sent again by the run.
const calibrationKeepBytes = 512 << 20

// calCache holds the answers of the requests a calibration sent
// (EmbedOptions.calibrate), so that the run, meeting the same request,
// quantizes those vectors once the ranges are fixed instead of sending it
// again. A request is known by its chunks' token ids and pooling starts,
// in order: the whole request, because llama.cpp rounds a sequence by its
// place in its batch, so only the same request gives the same bytes. The
// calibration runs the pipeline's own packing, so the run meets them.
// Safe for concurrent use.
type calCache struct {
	mu    sync.Mutex
	held  map[[sha256.Size]byte]*calEntry
	bytes int64
	// kept and over count the chunks kept and those past the budget;
	// served those the run took from the cache.
	kept, over, served int64
}

type calEntry struct {
	out [][]float32
	n   int // times the calibration sent this request: each is taken once
}

func newCalCache() *calCache { return &calCache{held: map[[sha256.Size]byte]*calEntry{}} }

// requestKey is a request's identity for the engine.
func requestKey(chunks []Chunk) [sha256.Size]byte {
	h := sha256.New()
	var b [4]byte
	put := func(x int) {
		binary.LittleEndian.PutUint32(b[:], uint32(x))
		h.Write(b[:])
	}
	put(len(chunks))
	for _, c := range chunks {
		put(len(c.IDs))
		put(c.PoolFrom)
		for _, id := range c.IDs {
			put(int(id))
		}
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// put keeps out, the engine's answer to chunks, unless the budget is spent.
func (cc *calCache) put(chunks []Chunk, out [][]float32) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	k := requestKey(chunks)
	if e, ok := cc.held[k]; ok {
		e.n++
		cc.kept += int64(len(chunks))
		return
	}
	size := int64(0)
	for _, v := range out {
		size += int64(4 * len(v))
	}
	if cc.bytes+size > calibrationKeepBytes {
		cc.over += int64(len(chunks))
		return
	}
	cc.held[k] = &calEntry{out: out, n: 1}
	cc.bytes += size
	cc.kept += int64(len(chunks))
}

// take returns the kept answer to chunks, once per time the calibration
// sent them, and forgets it after the last.
func (cc *calCache) take(chunks []Chunk) ([][]float32, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	k := requestKey(chunks)
	e, ok := cc.held[k]
	if !ok {
		return nil, false
	}
	if e.n--; e.n == 0 {
		delete(cc.held, k)
		for _, v := range e.out {
			cc.bytes -= int64(4 * len(v))
		}
	}
	cc.served += int64(len(chunks))
	return e.out, true
}

// counts are the chunks the calibration kept, those past the budget, and
// those the run took.
func (cc *calCache) counts() (kept, over, served int64) {
	if cc == nil {
		return 0, 0, 0
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.kept, cc.over, cc.served
}

// calKind is the embedding kind of a calibration: its answers are kept.
type calKind struct {
	*embedKind
	cache *calCache
}

func (k *calKind) Call(ctx context.Context, chunks []Chunk) ([][]float32, error) {
	out, err := k.embedKind.call(ctx, chunks)
	if err == nil {
		k.cache.put(chunks, out)
	}
	return out, err
}
