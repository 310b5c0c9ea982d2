package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/convert"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/supervise"
	"github.com/synapse-embed/synapse/wire"
)

// maxProbeContext bounds the context workers load models with here.
const maxProbeContext = 512

// add adds the file at path; an empty name is derived from the model and,
// when it is taken, made unique with the digest's first hex digits.
func (s *session) add(ctx context.Context, path, name string) (modelcache.Entry, bool, error) {
	st := s.o.Store
	if e, ok := modelcache.EntryFor(path); ok && filepath.Dir(e.Dir()) == st.Root {
		return e, true, nil
	}
	if fi, err := os.Stat(path); err != nil {
		return modelcache.Entry{}, false, fmt.Errorf("add: %w", err)
	} else if hfmodel.IsStatic(path) {
		return modelcache.Entry{}, false, fmt.Errorf("add %s: %w: a static model (Model2Vec, StaticEmbedding) is not stored in the model cache; run it from its directory (-m %s)", path, ErrInvalid, path)
	} else if convert.IsSource(path) {
		return s.addConverted(ctx, path, name)
	} else if hfmodel.IsONNX(path) {
		return s.addONNX(ctx, path, name)
	} else if fi.IsDir() {
		return modelcache.Entry{}, false, fmt.Errorf("add %s: %w: a directory with no model.onnx, onnx/model.onnx or tokenizer.json (want a GGUF file, an ONNX model directory or a Hugging Face directory with config.json and model.safetensors)", path, ErrInvalid)
	}
	key, err := modelcache.KeyOf(path)
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	s.o.progress("checking %s", path)
	a, err := s.checkFile(path)
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	if e, ok, err := st.Get(a.Digest); ok || err != nil {
		return e, ok, err
	}
	if name, err = s.pickName(a, path, name); err != nil {
		return modelcache.Entry{}, false, err
	}
	unlock, err := st.LockKey(ctx, a.Digest, func() { s.o.progress("waiting for another synapse process adding this model") })
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	defer unlock()
	if e, ok, err := st.Get(a.Digest); ok || err != nil { // it finished first
		return e, ok, err
	}
	stg, err := st.Stage()
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	defer stg.Abort()
	stored, err := stg.Put(path, key, a.Digest)
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	kind := kindOf(a)
	s.o.progress("validating %s (%s) in a worker", path, kind)
	loaded, err := s.validate(ctx, stg.File(), a, kind)
	if err != nil {
		return modelcache.Entry{}, false, fmt.Errorf("add %s: %w", path, err)
	}
	e := describe(a, kind, loaded.Dims)
	e.Name, e.SourcePath, e.Stored, e.SynapseVersion = name, key.Path, stored, s.o.Version
	return stg.Commit(e)
}

// checkFile validates a GGUF in the module: header, tokenizer (artifact
// opens both) and tensor directory. Its digest comes from the store's
// digest cache, so a file added before is not hashed again.
func (s *session) checkFile(path string) (*artifact.Artifact, error) {
	a, err := artifact.OpenWith(path, artifact.Options{Store: s.o.Store})
	if errors.Is(err, artifact.ErrInvalid) {
		return nil, fmt.Errorf("add: %w (%w)", ErrInvalid, err)
	}
	if err != nil {
		return nil, fmt.Errorf("add: %w", err)
	}
	if err := a.GGUF.CheckTensors(a.Size); err != nil {
		return nil, fmt.Errorf("add %s: %w: %w", path, ErrInvalid, err)
	}
	if err := checkScoring(path, a); err != nil {
		return nil, err
	}
	return a, nil
}

// checkScoring refuses a cross-encoder whose outputs synapse cannot read as
// one score (hfmodel.Scoring: more than two labels, two whose label 1 is
// not the positive class, no logits), in the module, before a worker starts
// or an entry is staged.
func checkScoring(path string, a *artifact.Artifact) error {
	if a.Classifier > 0 && a.ScoringErr != nil {
		return fmt.Errorf("add %s: %w: a cross-encoder synapse cannot rerank with: %w", path, ErrInvalid, a.ScoringErr)
	}
	return nil
}

// pickName returns the entry's name: the one given, else the model's
// general.name, else the file's name without .gguf, checked and not taken
// by another model. A derived name that is taken gets the digest's first
// eight hex digits appended.
func (s *session) pickName(a *artifact.Artifact, path, name string) (string, error) {
	derived := name == ""
	switch {
	case !derived:
	case a.GGUF == nil: // ONNX: the directory's name, and the graph's for a variant
		name = strings.Join(strings.Fields(strings.ReplaceAll(a.Name, "/", "-")), "-")
	default:
		name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		if n, ok := a.GGUF.String("general.name"); ok && strings.TrimSpace(n) != "" {
			name = strings.Join(strings.Fields(n), "-")
		}
	}
	if err := modelcache.CheckName(name); err != nil {
		return "", fmt.Errorf("add: %w (give --name)", err)
	}
	if derived {
		return s.o.Store.FreeName(name, a.Digest), nil
	}
	entries, _ := s.o.Store.Entries()
	for _, e := range entries {
		if e.Name != name {
			continue
		}
		return "", fmt.Errorf("add: %w: %q is %s (added from %s); give another --name", modelcache.ErrNameTaken, name, e.Digest, e.SourcePath)
	}
	return name, nil
}

// kindOf says what a worker is asked to do with a model: rerank when it has
// a classifier head or rank pooling, embed when it pools or is a
// bidirectional encoder, generate otherwise.
func kindOf(a *artifact.Artifact) string {
	switch {
	case a.Pooling == wire.PoolingRank || a.Classifier > 0:
		return modelcache.KindRerank
	case a.GGUF == nil: // an ONNX encoder
		return modelcache.KindEmbed
	case a.Pooling != "" && a.Pooling != wire.PoolingNone, !a.GGUF.IsCausal():
		return modelcache.KindEmbed
	}
	return modelcache.KindGenerate
}

// runtimeConfig is the LOAD config for a kind with n tokens of context.
func runtimeConfig(kind string, n, threads int) wire.RuntimeConfig {
	switch kind {
	case modelcache.KindGenerate:
		return wire.RuntimeConfig{ContextSize: n, Threads: threads}
	case modelcache.KindRerank:
		return wire.RuntimeConfig{ContextSize: n, BatchSize: n, UBatchSize: n, Threads: threads, Pooling: wire.PoolingRank, Embeddings: true}
	}
	return wire.RuntimeConfig{ContextSize: n, BatchSize: n, UBatchSize: n, Threads: threads, Embeddings: true}
}

// validate has a worker LOAD the file at path and run one request of the
// model's kind; it returns LOADED.
func (s *session) validate(ctx context.Context, path string, a *artifact.Artifact, kind string) (wire.Loaded, error) {
	n := min(a.ContextLength, maxProbeContext)
	loaded, err := s.load(ctx, path, a.Digest, a.Format, runtimeConfig(kind, n, s.o.threads()))
	if err != nil {
		return wire.Loaded{}, err
	}
	pool, _ := s.workers(ctx)
	resp, err := pool.Do(ctx, probe(kind, a, n, loaded.ModelRef), s.o.RequestTimeout)
	if err != nil {
		return wire.Loaded{}, workerError(ctx, kind, err)
	}
	if err := checkProbe(resp, loaded.Dims); err != nil {
		return wire.Loaded{}, fmt.Errorf("%w: %s: %w", ErrInvalid, kind, err)
	}
	return loaded, nil
}

// load has the session's worker LOAD a file of format (artifact.FormatGGUF
// or FormatONNX).
func (s *session) load(ctx context.Context, path, digest, format string, rc wire.RuntimeConfig) (wire.Loaded, error) {
	pool, err := s.workers(ctx)
	if err != nil {
		return wire.Loaded{}, err
	}
	loaded, err := pool.Load(ctx, wire.Load{ArtifactPath: path, ArtifactDigest: digest, Format: format, RuntimeConfig: rc})
	if err != nil {
		return wire.Loaded{}, workerError(ctx, "load", err)
	}
	return loaded, nil
}

// workerError explains a failed worker request: a model the worker refused
// or crashed on is ErrInvalid; an ended context stays the context's error.
func workerError(ctx context.Context, what string, err error) error {
	var we *wire.Error
	var ce *supervise.CrashError
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return fmt.Errorf("%s: %w", what, err)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w: %w", what, ctx.Err(), err)
	case errors.As(err, &ce):
		return fmt.Errorf("%w: the worker crashed during %s (%s); %w", ErrInvalid, what, crashCause(ce), err)
	case errors.As(err, &we):
		return fmt.Errorf("%w: the worker refused %s: %s: %s", ErrInvalid, what, we.Code, we.Msg)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func crashCause(ce *supervise.CrashError) string {
	switch {
	case ce.Stage == "timeout":
		return "past its deadline"
	case ce.Signal != "":
		return "killed by " + ce.Signal
	}
	return fmt.Sprintf("exit status %d", ce.ExitStatus)
}

// probe is the one request that shows a loaded model works.
func probe(kind string, a *artifact.Artifact, n int, ref string) wire.Message {
	text := builtinTexts[4]
	switch kind {
	case modelcache.KindRerank:
		q := a.Tokenizer.Tokenize(builtinTexts[0], tokenize.Options{}).IDs()
		d := a.Tokenizer.Tokenize(text, tokenize.Options{}).IDs()
		d = d[:min(len(d), max(1, n/2))]
		return &wire.Rerank{ModelRef: ref, QueryNTokens: len(q), Candidates: []wire.Candidate{{NTokens: len(d)}}, IDs: append(q, d...)}
	case modelcache.KindGenerate:
		ids := a.Tokenizer.Tokenize(text, tokenize.Options{AddSpecial: true}).IDs()
		return &wire.Generate{ModelRef: ref, MaxTokens: 2, IDs: ids[:min(len(ids), n/2)]}
	}
	ids := window(a, text, n)
	return &wire.EmbedBatch{ModelRef: ref, Normalize: true, Items: []wire.Item{{NTokens: len(ids)}}, IDs: ids}
}

// window returns text's ids wrapped in the model's special tokens and cut to
// fit n tokens.
func window(a *artifact.Artifact, text string, n int) []int32 {
	pre, suf := a.Tokenizer.Affixes()
	ids := a.Tokenizer.Tokenize(text, tokenize.Options{}).IDs()
	ids = ids[:min(len(ids), max(0, n-len(pre)-len(suf)))]
	out := append(append(append(make([]int32, 0, len(pre)+len(ids)+len(suf)), pre...), ids...), suf...)
	return out
}

// checkProbe checks the answer to probe: a finite, non-zero vector of the
// loaded width, a finite score, or any text.
func checkProbe(resp wire.Message, dims int) error {
	switch r := resp.(type) {
	case *wire.Vectors:
		if r.N != 1 || r.Dims != dims || len(r.Data) != dims {
			return fmt.Errorf("got %d vectors of %d values; want 1 of %d", r.N, r.Dims, dims)
		}
		return finite(r.Data, true)
	case *wire.Scores:
		if r.N != 1 {
			return fmt.Errorf("got %d scores; want 1", r.N)
		}
		return finite(r.Data, false)
	case *wire.Text:
		return nil
	}
	return fmt.Errorf("unexpected answer %s", resp.Type())
}

func finite(v []float32, nonZero bool) error {
	var sum float64
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("value %d is %v", i, x)
		}
		sum += float64(x) * float64(x)
	}
	if nonZero && sum == 0 {
		return errors.New("the vector is all zeros")
	}
	return nil
}
