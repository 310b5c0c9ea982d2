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
	Removed             int     // the model's tokens left out of the vocabulary
	Explained           float64 // the share of variance the kept components explain
}

// Distill makes a static model from the embedder ref as model2vec 0.10's
// distill does: the vocabulary is rebuilt (rebuildVocab: BERT's [unusedN]
// and the special tokens other than the unknown and padding ones left out,
// the rest renumbered in order); every kept token goes through the model
// alone between its special tokens ([CLS] t [SEP]) in a worker, and its
// vector is the mean of the three tokens' last hidden states (EMBED_TOKENS:
// before the model's Dense and Normalize modules, as model2vec takes the
// transformer's output); the vectors are centred and reduced by PCA, each
// sign chosen so that its largest score is positive; row i is weighted by
// sif / (sif + p_i), p_i Zipf's frequency of the i-th kept token (1/(i+2),
// normalized), as token ids are roughly in frequency order. The directory
// (config.json with normalize true, model.safetensors's embeddings, the
// rebuilt tokenizer.json) runs with synapse's static engine and model2vec
// alike.
func Distill(ctx context.Context, ref string, d DistillOptions, o Options) (DistillResult, error) {
	s, err := newSession(o)
	if err != nil {
		return DistillResult{}, err
	}
	defer s.close()
	src, _, err := s.source(ctx, "distill", ref)
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
	tb, err := readlimit.ReadFile(tok, readlimit.Tokenizer)
	if err != nil {
		return DistillResult{}, fmt.Errorf("distill: %w", err)
	}
	pad, err := configPadToken(dir)
	if err != nil {
		return DistillResult{}, fmt.Errorf("distill: %w: %w", ErrInvalid, err)
	}
	vocab, err := rebuildVocab(tb, pad)
	if err != nil {
		return DistillResult{}, fmt.Errorf("distill: %w: %s: %w", ErrInvalid, tok, err)
	}
	vecs, width, err := s.tokenVectors(ctx, src, a, vocab.IDs)
	if err != nil {
		return DistillResult{}, err
	}
	dims := d.Dims
	if dims <= 0 {
		dims = min(256, width)
	}
	if dims > width {
		return DistillResult{}, fmt.Errorf("distill: %w: --dims %d: the model's token states have %d values", ErrInvalid, dims, width)
	}
	if dims >= len(vecs) {
		return DistillResult{}, fmt.Errorf("distill: %w: --dims %d: the vocabulary keeps only %d tokens; PCA needs fewer dimensions than tokens", ErrInvalid, dims, len(vecs))
	}
	s.o.progress("PCA of %d token vectors to %d dimensions", len(vecs), dims)
	rows, explained := pca(vecs, width, dims)
	sif := d.SIF
	if sif <= 0 {
		sif = 1e-4
	}
	zipf(rows, dims, sif)
	if err := writeModel2Vec(d.Out, rows, len(vecs), dims, vocab.JSON, src.Name); err != nil {
		return DistillResult{}, err
	}
	return DistillResult{Tokens: len(vecs), Removed: vocab.Removed, Dims: dims, Width: width, Explained: explained}, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// tokenVectors has a worker run each token of ids through the model
// between the model's special tokens and returns, per token, the mean of
// the sequence's last hidden states (not normalized, no Dense module: the
// transformer's output, as model2vec pools it) and their width.
func (s *session) tokenVectors(ctx context.Context, src modelcache.Entry, a *artifact.Artifact, ids []int32) ([][]float32, int, error) {
	pre, suf := a.Tokenizer.Affixes()
	n := len(pre) + 1 + len(suf)
	loaded, err := s.load(ctx, src.Path(), src.Digest, src.Format(), runtimeConfig(modelcache.KindEmbed, max(n, 8), s.o.threads()))
	if err != nil {
		return nil, 0, err
	}
	if !s.pool.Supports(wire.ExtEmbedTokens) {
		return nil, 0, fmt.Errorf("distill: the worker does not announce %s (an older synapse worker?): distill needs the model's token states", wire.ExtEmbedTokens)
	}
	s.o.progress("embedding the %d kept tokens of %s's vocabulary, each as %d tokens", len(ids), src.Name, n)
	out := make([][]float32, 0, len(ids))
	width := 0
	const perRequest = 1024
	for first := 0; first < len(ids); first += perRequest {
		b := &wire.EmbedTokens{ModelRef: loaded.ModelRef}
		for i, id := range ids[first:min(first+perRequest, len(ids))] {
			b.IDs = append(append(append(b.IDs, pre...), id), suf...)
			b.Items = append(b.Items, wire.Item{ID: uint64(first + i), NTokens: n})
		}
		resp, err := s.pool.Do(ctx, b, s.o.RequestTimeout)
		if err != nil {
			return nil, 0, workerError(ctx, "embedding the vocabulary", err)
		}
		st := resp.(*wire.TokenStates)
		if len(st.NTokens) != len(b.Items) || (width != 0 && st.Dims != width) {
			return nil, 0, fmt.Errorf("distill: the worker answered %d token sequences of width %d for %d", len(st.NTokens), st.Dims, len(b.Items))
		}
		width = st.Dims
		off := 0
		for _, k := range st.NTokens {
			out = append(out, meanRows(st.Data[off:off+k*width], k, width))
			off += k * width
		}
	}
	return out, width, nil
}

// meanRows is the mean of the n rows of h (n × w values), in float64.
func meanRows(h []float32, n, w int) []float32 {
	sum := make([]float64, w)
	for r := range n {
		for j, x := range h[r*w : (r+1)*w] {
			sum[j] += float64(x)
		}
	}
	v := make([]float32, w)
	for j, x := range sum {
		v[j] = float32(x / float64(max(n, 1)))
	}
	return v
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
func writeModel2Vec(dir string, rows []float64, n, dims int, tokenizer []byte, from string) error {
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
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tokenizer, 0o644); err != nil {
		return fmt.Errorf("distill: %w", err)
	}
	return nil
}
