package ingest

import (
	"context"
	"math"
	"time"

	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/onnx/cpuclass"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/wire"
)

// sampleQueries is how many of the sample's texts a reranker's quality is
// measured with as queries; every sample text is a document of each.
const sampleQueries = 4

// measureRerank is measure for a cross-encoder: the source and the variant
// score the same query–document pairs (the sample's first texts as queries,
// all its texts as their documents), alternating which goes first over
// q.Rounds rounds. A reranker's scores are compared per query, as a
// ranking uses them: the Pearson correlation of the variant's scores with
// the source's over the query's documents (the cosine of the mean-centred
// score lists) is what MinCosine and MeanCosine hold (Measure "scores");
// MaxScoreDiff is the largest difference of one pair's scores.
func (s *session) measureRerank(ctx context.Context, src modelcache.Entry, out *artifact.Artifact, q QuantizeOptions, n int, refs [2]string) (*modelcache.Quality, error) {
	reqs, tokens := samplePairs(out, q.Sample.Texts, n)
	reps := (minTimedTokens + tokens - 1) / max(tokens, 1)
	scores, times, err := alternate(q.Rounds, func(i int) ([][]float32, time.Duration, error) {
		return s.rerankAll(ctx, refs[i], reqs, reps)
	})
	if err != nil {
		return nil, err
	}
	qa := &modelcache.Quality{Sample: q.Sample.Name, Texts: len(q.Sample.Texts), Tokens: tokens, Measure: modelcache.MeasureScores,
		MinCosineRequired: q.MinCosine, Threads: s.o.threads(), Rounds: q.Rounds, CPU: cpuclass.Of()}
	qa.MinCosine = math.Inf(1)
	for i := range scores[0] {
		c := correlation(scores[0][i], scores[1][i])
		qa.MinCosine = min(qa.MinCosine, c)
		qa.MeanCosine += c / float64(len(scores[0]))
		for j, x := range scores[0][i] {
			qa.MaxScoreDiff = max(qa.MaxScoreDiff, math.Abs(float64(x-scores[1][i][j])))
		}
		qa.Pairs += len(scores[0][i])
	}
	qa.Degraded = qa.MinCosine < q.MinCosine
	qa.SourceTokensPerSec = float64(reps*tokens) / median(times[0]).Seconds()
	qa.TokensPerSec = float64(reps*tokens) / median(times[1]).Seconds()
	qa.SpeedRatio = qa.TokensPerSec / qa.SourceTokensPerSec
	return qa, nil
}

// samplePairs builds one RERANK request per query: the first
// sampleQueries texts against every text, each document cut to fit n
// tokens with the query and the pair's special tokens. It returns the
// requests and the number of tokens they hold (special tokens included).
func samplePairs(a *artifact.Artifact, texts []string, n int) ([]*wire.Rerank, int) {
	overhead := 4 // <s> q </s></s> d </s>
	if p, ok := a.Tokenizer.(tokenize.PairLayout); ok {
		overhead = p.PairTemplate().Overhead()
	}
	plain := func(s string) []int32 { return a.Tokenizer.Tokenize(s, tokenize.Options{}).IDs() }
	var reqs []*wire.Rerank
	tokens := 0
	for _, qt := range texts[:min(sampleQueries, len(texts))] {
		qids := plain(qt)
		qids = qids[:min(len(qids), n/2)]
		req := &wire.Rerank{QueryNTokens: len(qids), IDs: qids}
		for _, dt := range texts {
			d := plain(dt)
			d = d[:min(len(d), max(1, n-overhead-len(qids)))]
			req.Candidates = append(req.Candidates, wire.Candidate{NTokens: len(d)})
			req.IDs = append(req.IDs, d...)
			tokens += len(qids) + len(d) + overhead
		}
		reqs = append(reqs, req)
	}
	return reqs, tokens
}

// rerankAll sends the requests for model ref one after another, reps
// times, and returns the first repetition's scores, one list per request,
// and the time taken.
func (s *session) rerankAll(ctx context.Context, ref string, reqs []*wire.Rerank, reps int) ([][]float32, time.Duration, error) {
	var out [][]float32
	start := time.Now()
	for k := range reps * len(reqs) {
		req := *reqs[k%len(reqs)]
		req.ModelRef = ref
		resp, err := s.pool.Do(ctx, &req, s.o.RequestTimeout)
		if err != nil {
			return nil, 0, workerError(ctx, "scoring the sample", err)
		}
		if k < len(reqs) {
			out = append(out, resp.(*wire.Scores).Data)
		}
	}
	return out, time.Since(start), nil
}

// correlation is the Pearson correlation of a and b; 1 when both are
// constant (the same ranking: all ties), 0 when only one is.
func correlation(a, b []float32) float64 {
	var ma, mb float64
	for i := range a {
		ma += float64(a[i]) / float64(len(a))
		mb += float64(b[i]) / float64(len(b))
	}
	var ab, aa, bb float64
	for i := range a {
		x, y := float64(a[i])-ma, float64(b[i])-mb
		ab, aa, bb = ab+x*y, aa+x*x, bb+y*y
	}
	switch {
	case aa == 0 && bb == 0:
		return 1
	case aa == 0 || bb == 0:
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}
