package job

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// calibrationKeepBytes bounds the float vectors a calibration keeps for
// the run (calCache): chunks past it are embedded again by the run.
const calibrationKeepBytes = 512 << 20

// calCache holds the float vectors of the chunks a calibration embedded
// (EmbedOptions.calibrate), so that the run quantizes them once the ranges
// are fixed instead of embedding them again. A chunk is known by its
// token ids and pooling start (what the engine's answer depends on), so a
// shard or a resumed run finds those of its chunks the calibration holds,
// whatever their place. Safe for concurrent use.
type calCache struct {
	mu    sync.Mutex
	vecs  map[[sha256.Size]byte]*calEntry
	bytes int64
	// kept and over count the chunks kept and those past the budget;
	// served those the run took from the cache.
	kept, over, served int64
}

type calEntry struct {
	v []float32
	n int // the chunks of these ids the calibration embedded: each is taken once
}

func newCalCache() *calCache { return &calCache{vecs: map[[sha256.Size]byte]*calEntry{}} }

// chunkKey is a chunk's identity for the engine.
func chunkKey(c Chunk) [sha256.Size]byte {
	h := sha256.New()
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(c.PoolFrom))
	h.Write(b[:])
	for _, id := range c.IDs {
		binary.LittleEndian.PutUint32(b[:], uint32(id))
		h.Write(b[:])
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// put keeps v, the engine's answer for c, unless the budget is spent.
func (cc *calCache) put(c Chunk, v []float32) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	k := chunkKey(c)
	if e, ok := cc.vecs[k]; ok {
		e.n++
		cc.kept++
		return
	}
	if cc.bytes+int64(4*len(v)) > calibrationKeepBytes {
		cc.over++
		return
	}
	cc.vecs[k] = &calEntry{v: v, n: 1}
	cc.bytes += int64(4 * len(v))
	cc.kept++
}

// take returns the kept vector of c, once per time the calibration
// embedded it, and forgets it after the last.
func (cc *calCache) take(c Chunk) ([]float32, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	k := chunkKey(c)
	e, ok := cc.vecs[k]
	if !ok {
		return nil, false
	}
	if e.n--; e.n == 0 {
		delete(cc.vecs, k)
		cc.bytes -= int64(4 * len(e.v))
	}
	cc.served++
	return e.v, true
}

// giveBack returns a vector take gave when its request failed: a retry
// takes it again.
func (cc *calCache) giveBack(c Chunk, v []float32) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.served--
	k := chunkKey(c)
	if e, ok := cc.vecs[k]; ok {
		e.n++
		return
	}
	cc.vecs[k] = &calEntry{v: v, n: 1}
	cc.bytes += int64(4 * len(v))
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
