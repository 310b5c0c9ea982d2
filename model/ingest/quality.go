package ingest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/onnx/cpuclass"
	"github.com/synapse-embed/synapse/wire"
)

// minTimedTokens is the least a timed pass embeds: a smaller sample is
// repeated, so that a pass lasts long enough to time.
const minTimedTokens = 4096

// measure loads the source and the quantized file in the session's worker
// with the same config and has both embed the sample, alternating which
// goes first over q.Rounds rounds. Cosines compare the first round's
// vectors; speeds are medians. A reranker scores pairs of sample texts
// instead (measureRerank).
func (s *session) measure(ctx context.Context, src modelcache.Entry, out *artifact.Artifact, q QuantizeOptions) (*modelcache.Quality, error) {
	n := min(out.ContextLength, maxProbeContext)
	rc := runtimeConfig(src.Kind, n, s.o.threads())
	ls, err := s.load(ctx, src.Path(), src.Digest, src.Format(), rc)
	if err != nil {
		return nil, fmt.Errorf("quantize: the source: %w", err)
	}
	lq, err := s.load(ctx, out.Path, out.Digest, out.Format, rc)
	if err != nil {
		return nil, fmt.Errorf("quantize: the quantized file: %w", err)
	}
	if ls.Dims != lq.Dims {
		return nil, fmt.Errorf("quantize: the quantized model has %d dims; its source %d", lq.Dims, ls.Dims)
	}
	refs := [2]string{ls.ModelRef, lq.ModelRef}
	if src.Kind == modelcache.KindRerank {
		return s.measureRerank(ctx, src, out, q, n, refs)
	}
	batches, tokens := sampleBatches(out, q.Sample.Texts, n)
	reps := (minTimedTokens + tokens - 1) / max(tokens, 1)
	vecs, times, err := alternate(q.Rounds, func(i int) ([][]float32, time.Duration, error) {
		return s.embedAll(ctx, refs[i], batches, reps)
	})
	if err != nil {
		return nil, err
	}
	for i, who := range []string{"its source", "the quantized model"} {
		if n := nonFinite(vecs[i]); n > 0 {
			return nil, fmt.Errorf("quantize: %w: %s gives NaN or infinite values for %d of the %d sample texts: the variant is unusable, whatever --min-cosine",
				ErrInvalid, who, n, len(vecs[i]))
		}
	}
	qa := &modelcache.Quality{Sample: q.Sample.Name, Texts: len(q.Sample.Texts), Tokens: tokens,
		MinCosineRequired: q.MinCosine, Threads: s.o.threads(), Rounds: q.Rounds, CPU: cpuclass.Of()}
	qa.MinCosine, qa.MeanCosine = cosines(vecs[0], vecs[1])
	qa.Degraded = qa.MinCosine < q.MinCosine
	qa.SourceTokensPerSec = float64(reps*tokens) / median(times[0]).Seconds()
	qa.TokensPerSec = float64(reps*tokens) / median(times[1]).Seconds()
	qa.SpeedRatio = qa.TokensPerSec / qa.SourceTokensPerSec
	return qa, nil
}

// sampleBatches tokenizes texts into windows of at most n tokens (special
// tokens included) and packs them into EMBED_BATCH requests of at most 4n
// tokens, as embed jobs do by default. It returns the batches and the
// number of tokens.
func sampleBatches(a *artifact.Artifact, texts []string, n int) ([]*wire.EmbedBatch, int) {
	var out []*wire.EmbedBatch
	var cur *wire.EmbedBatch
	tokens := 0
	for i, t := range texts {
		ids := window(a, t, n)
		if cur == nil || len(cur.IDs)+len(ids) > 4*n {
			cur = &wire.EmbedBatch{Normalize: true}
			out = append(out, cur)
		}
		cur.Items = append(cur.Items, wire.Item{ID: uint64(i), NTokens: len(ids)})
		cur.IDs = append(cur.IDs, ids...)
		tokens += len(ids)
	}
	return out, tokens
}

// embedAll sends the batches for model ref one after another, reps times,
// and returns the first repetition's vectors in text order and the time
// taken.
func (s *session) embedAll(ctx context.Context, ref string, batches []*wire.EmbedBatch, reps int) ([][]float32, time.Duration, error) {
	var out [][]float32
	start := time.Now()
	for k := range reps * len(batches) {
		b := batches[k%len(batches)]
		req := *b
		req.ModelRef = ref
		resp, err := s.pool.Do(ctx, &req, s.o.RequestTimeout)
		if err != nil {
			return nil, 0, workerError(ctx, "embedding the sample", err)
		}
		if k >= len(batches) {
			continue
		}
		v := resp.(*wire.Vectors)
		for i := range v.N {
			out = append(out, v.Data[i*v.Dims:(i+1)*v.Dims])
		}
	}
	return out, time.Since(start), nil
}

// nonFinite counts the vectors holding a NaN or an infinity.
func nonFinite(vs [][]float32) int {
	n := 0
	for _, v := range vs {
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				n++
				break
			}
		}
	}
	return n
}

// cosines returns the smallest and the mean cosine of a[i] and b[i].
func cosines(a, b [][]float32) (minCos, mean float64) {
	minCos = math.Inf(1)
	for i := range a {
		c := cosine(a[i], b[i])
		minCos = min(minCos, c)
		mean += c
	}
	return minCos, mean / float64(len(a))
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return max(s[len(s)/2], time.Microsecond)
}

// alternate runs the source (0) and the variant (1) rounds times each,
// the source first in even rounds and the variant first in odd ones, and
// returns each one's first result and all its times.
func alternate[T any](rounds int, run func(i int) (T, time.Duration, error)) (first [2]T, times [2][]time.Duration, err error) {
	for r := range rounds {
		for k := range 2 {
			i := k ^ r%2
			v, took, err := run(i)
			if err != nil {
				return first, times, err
			}
			if len(times[i]) == 0 {
				first[i] = v
			}
			times[i] = append(times[i], took)
		}
	}
	return first, times, nil
}
