package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/gonum/mat"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/safetensors"
	"github.com/synapse-embed/synapse/wire"
)

// DistillOptions are what Distill makes: a Model2Vec directory at Out whose
// rows have Dims values (PCA; 0: 256, or the model's width when smaller),
// weighted by SIF over Zipf frequencies (SIF 0: 1e-4).
type DistillOptions struct {
	Out  string
	Dims int
	SIF  float64
}

// DistillResult is what Distill made.
type DistillResult struct {
	Tokens, Dims, Width int     // the vocabulary, the rows' width, the model's
	Explained           float64 // the share of variance the kept components explain
}

// Distill makes a static model from the embedder ref, as Model2Vec's distill
// does (model2vec 0.10, without its vocabulary changes): every token of the
// model's vocabulary goes through the model alone between its special
// tokens ([CLS] t [SEP]) in a worker, its output mean-pooled over the three;
// the vectors are centred and reduced by PCA, each sign chosen so that its
// largest score is positive; row i is weighted by sif / (sif + p_i), p_i
// Zipf's frequency of the i-th token (1/(i+2), normalized), as token ids are
// roughly in frequency order. The directory (config.json with normalize
// true, model.safetensors's embeddings, the model's tokenizer.json) runs with
// synapse's static engine and model2vec alike.
func Distill(ctx context.Context, ref string, d DistillOptions, o Options) (DistillResult, error) {
	s, err := newSession(o)
	if err != nil {
		return DistillResult{}, err
	}
	defer s.close()
	src, _, err := s.source(ctx, ref)
	if err != nil {
		return DistillResult{}, err
	}
	if src.Kind != modelcache.KindEmbed {
		return DistillResult{}, fmt.Errorf("distill: %w: %s is a %s model; distill takes an embedder", ErrInvalid, src.Name, src.Kind)
	}
	a, err := artifact.Open(src.Path())
	if err != nil {
		return DistillResult{}, err
	}
	dir := src.Path()
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		dir = filepath.Dir(dir) // the entry's graph file: its tokenizer.json is beside it
	}
	tok := filepath.Join(dir, "tokenizer.json")
	if a.Format != artifact.FormatONNX || !fileExists(tok) {
		return DistillResult{}, fmt.Errorf("distill: %w: %s has no tokenizer.json beside its graph (an ONNX model or a converted Hugging Face directory has one; a GGUF file does not)", ErrInvalid, src.Name)
	}
	vecs, width, err := s.tokenVectors(ctx, src, a)
	if err != nil {
		return DistillResult{}, err
	}
	dims := d.Dims
	if dims <= 0 {
		dims = min(256, width)
	}
	if dims > width {
		return DistillResult{}, fmt.Errorf("distill: --dims %d: the model's vectors have %d values", dims, width)
	}
	s.o.progress("PCA of %d token vectors to %d dimensions", len(vecs), dims)
	rows, explained := pca(vecs, width, dims)
	sif := d.SIF
	if sif <= 0 {
		sif = 1e-4
	}
	zipf(rows, dims, sif)
	if err := writeModel2Vec(d.Out, rows, len(vecs), dims, tok, src.Name); err != nil {
		return DistillResult{}, err
	}
	return DistillResult{Tokens: len(vecs), Dims: dims, Width: width, Explained: explained}, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// tokenVectors has a worker embed each token of a's vocabulary between the
// model's special tokens, mean-pooled, not normalized.
func (s *session) tokenVectors(ctx context.Context, src modelcache.Entry, a *artifact.Artifact) ([][]float32, int, error) {
	pre, suf := a.Tokenizer.Affixes()
	n := len(pre) + 1 + len(suf)
	loaded, err := s.load(ctx, src.Path(), src.Digest, src.Format(), runtimeConfig(modelcache.KindEmbed, max(n, 8), s.o.threads()))
	if err != nil {
		return nil, 0, err
	}
	vocab := len(a.Tokenizer.Vocab().Tokens)
	s.o.progress("embedding the %d tokens of %s's vocabulary, each as %d tokens", vocab, src.Name, n)
	out := make([][]float32, 0, vocab)
	const perRequest = 1024
	for first := 0; first < vocab; first += perRequest {
		b := &wire.EmbedBatch{ModelRef: loaded.ModelRef, Pooling: wire.PoolingMean}
		for id := first; id < min(first+perRequest, vocab); id++ {
			b.IDs = append(append(append(b.IDs, pre...), int32(id)), suf...)
			b.Items = append(b.Items, wire.Item{ID: uint64(id), NTokens: n})
		}
		resp, err := s.pool.Do(ctx, b, s.o.RequestTimeout)
		if err != nil {
			return nil, 0, workerError(ctx, "embedding the vocabulary", err)
		}
		v := resp.(*wire.Vectors)
		for i := range v.N {
			out = append(out, v.Data[i*v.Dims:(i+1)*v.Dims])
		}
	}
	return out, loaded.Dims, nil
}

// pca centres vecs [n, width] and projects them on the dims eigenvectors
// of their covariance with the largest eigenvalues (gonum's EigenSym),
// each sign chosen so that its largest score by magnitude is positive, as
// model2vec's PCA does. It returns the scores [n, dims], row major, and the
// share of the variance they keep.
func pca(vecs [][]float32, width, dims int) ([]float64, float64) {
	n := len(vecs)
	mean := make([]float64, width)
	for _, v := range vecs {
		for j, x := range v {
			mean[j] += float64(x)
		}
	}
	for j := range mean {
		mean[j] /= float64(n)
	}
	x := mat.NewDense(n, width, nil)
	for i, v := range vecs {
		for j, f := range v {
			x.Set(i, j, float64(f)-mean[j])
		}
	}
	var cov mat.SymDense
	cov.SymOuterK(1/float64(n-1), x.T())
	var eig mat.EigenSym
	eig.Factorize(&cov, true)
	vals := eig.Values(nil) // ascending
	var vectors mat.Dense
	eig.VectorsTo(&vectors)
	var total, kept float64
	for _, l := range vals {
		total += max(l, 0)
	}
	comp := mat.NewDense(width, dims, nil)
	for k := range dims {
		col := width - 1 - k
		kept += max(vals[col], 0)
		for j := range width {
			comp.Set(j, k, vectors.At(j, col))
		}
	}
	var scores mat.Dense
	scores.Mul(x, comp)
	out := make([]float64, n*dims)
	for k := range dims {
		best := 0.0
		for i := range n {
			if v := scores.At(i, k); math.Abs(v) > math.Abs(best) {
				best = v
			}
		}
		sign := 1.0
		if best < 0 {
			sign = -1
		}
		for i := range n {
			out[i*dims+k] = sign * scores.At(i, k)
		}
	}
	return out, kept / total
}

// zipf weighs row i by sif / (sif + p_i), p_i ∝ 1/(i+2) (model2vec's
// compute_weights).
func zipf(rows []float64, dims int, sif float64) {
	n := len(rows) / dims
	var sum float64
	for i := range n {
		sum += 1 / float64(i+2)
	}
	for i := range n {
		w := sif / (sif + 1/float64(i+2)/sum)
		for k := range dims {
			rows[i*dims+k] *= w
		}
	}
}

// writeModel2Vec writes the distilled model as Model2Vec saves one, into a
// new directory (an existing one is refused: nothing is overwritten).
func writeModel2Vec(dir string, rows []float64, n, dims int, tokenizer, from string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("distill: %w", err)
	}
	emb := make([]float32, len(rows))
	for i, v := range rows {
		emb[i] = float32(v)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), map[string][]float32{hfmodel.TensorModel2Vec: emb},
		map[string][]int64{hfmodel.TensorModel2Vec: {int64(n), int64(dims)}}); err != nil {
		return fmt.Errorf("distill: %w", err)
	}
	cfg, _ := json.MarshalIndent(map[string]any{"model_type": "model2vec", "architectures": []string{"StaticModel"},
		"normalize": true, "hidden_dim": dims, "apply_pca": dims, "sif_coefficient": nil, "base_model": from,
		"distilled_by": "synapse models distill"}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "config.json"), append(cfg, '\n'), 0o644); err != nil {
		return fmt.Errorf("distill: %w", err)
	}
	b, err := readlimit.ReadFile(tokenizer, readlimit.Tokenizer)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644)
	}
	if err != nil {
		return fmt.Errorf("distill: %w", err)
	}
	return nil
}
