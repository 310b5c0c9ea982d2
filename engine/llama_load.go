package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"time"

	"github.com/hybridgroup/yzma/pkg/llama"

	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/wire"
)

// Defaults for fields a RuntimeConfig leaves zero.
const (
	defaultEmbedCtxMax = 2048 // embedding contexts: min(training context, this)
	defaultGenCtxMax   = 4096 // generation contexts: min(training context, this)
	defaultGenBatch    = 512
	defaultEmbedSeqMax = 64
	maxThreads         = 1024
	maxContext         = 1 << 20
)

// llamaConfig is a RuntimeConfig with every default resolved.
type llamaConfig struct {
	nCtx, nBatch, nUBatch, threads, seqMax int
	pooling                                llama.PoolingType // PoolingTypeUnspecified: the model's
	embeddings                             bool
	vocabOnly                              bool // vocabulary only: no weights, no context
}

func (c llamaConfig) String() string {
	if c.vocabOnly {
		return "vocab_only"
	}
	return fmt.Sprintf("ctx=%d batch=%d ubatch=%d threads=%d seq=%d pool=%d emb=%t",
		c.nCtx, c.nBatch, c.nUBatch, c.threads, c.seqMax, c.pooling, c.embeddings)
}

// Load verifies the artifact, validates the runtime config and loads the
// model with one context. Loading the same digest with the same effective
// config again returns the loaded model's ref.
func (e *Llama) Load(ctx context.Context, req LoadRequest) (ModelInfo, error) {
	if e.closed {
		return ModelInfo{}, wire.Errorf(wire.CodeInternal, "engine closed")
	}
	if req.Format != "" && req.Format != FormatGGUF {
		return ModelInfo{}, wire.Errorf(wire.CodeUnsupported, "format %q: the llama.cpp engine loads gguf", req.Format)
	}
	meta, err := verifyArtifact(req.Path, req.Digest)
	if err != nil {
		return ModelInfo{}, err
	}
	if isQwen3Reranker(meta) {
		return ModelInfo{}, wire.Errorf(wire.CodeUnsupported, "%s: Qwen3 reranker GGUFs stay disabled until their prompt template is faithful", req.Path)
	}
	cfg, err := resolveConfig(req.Config, meta)
	if err != nil {
		return ModelInfo{}, err
	}
	ref := modelRef(req.Digest, cfg)
	if m, ok := e.models[ref]; ok {
		return ModelInfo{Ref: ref, Dims: m.dims}, nil
	}
	start := time.Now()
	m, err := loadModel(req.Path, meta, cfg)
	if err != nil {
		return ModelInfo{}, err
	}
	m.ref = ref
	e.models[ref] = m
	return ModelInfo{Ref: ref, Dims: m.dims, ColdLoad: time.Since(start)}, nil
}

// verifyArtifact checks that path is a readable GGUF file whose SHA-256 is
// digest, and returns its metadata.
func verifyArtifact(path, digest string) (*gguf.File, error) {
	if err := checkDigestSyntax(digest); err != nil {
		return nil, err
	}
	_, got, err := gguf.Digest(path)
	if err != nil {
		return nil, wire.Errorf(wire.CodeArtifactInvalid, "artifact: %w", err)
	}
	if got != digest {
		return nil, wire.Errorf(wire.CodeArtifactInvalid, "artifact %s: digest %s; want %s", path, got, digest)
	}
	meta, err := gguf.Open(path)
	if err != nil {
		return nil, wire.Errorf(wire.CodeArtifactInvalid, "artifact: %w", err)
	}
	if meta.Architecture() == "" {
		return nil, wire.Errorf(wire.CodeArtifactInvalid, "artifact %s: no general.architecture", path)
	}
	return meta, nil
}

// checkDigestSyntax checks that digest is "sha256:<64 lowercase hex digits>".
func checkDigestSyntax(digest string) error {
	want, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(want) != 64 || strings.ToLower(want) != want {
		return wire.Errorf(wire.CodeArtifactInvalid, "artifact_digest %q: want sha256:<64 lowercase hex digits>", digest)
	}
	if _, err := hex.DecodeString(want); err != nil {
		return wire.Errorf(wire.CodeArtifactInvalid, "artifact_digest %q: %w", digest, err)
	}
	return nil
}

// isQwen3Reranker detects a Qwen3 GGUF converted as a reranker: rank pooling,
// classifier labels, or a name that says so.
func isQwen3Reranker(f *gguf.File) bool {
	arch := f.Architecture()
	if arch != "qwen3" {
		return false
	}
	if p, ok := f.Uint(arch + ".pooling_type"); ok && p == uint64(llama.PoolingTypeRank) {
		return true
	}
	if _, ok := f.Get(arch + ".classifier.output_labels"); ok {
		return true
	}
	for _, k := range []string{"general.name", "general.basename", "general.finetune"} {
		if s, ok := f.String(k); ok && strings.Contains(strings.ToLower(s), "rerank") {
			return true
		}
	}
	return false
}

func parsePooling(s string) (llama.PoolingType, error) {
	switch s {
	case PoolingDefault:
		return llama.PoolingTypeUnspecified, nil
	case PoolingNone:
		return llama.PoolingTypeNone, nil
	case PoolingMean:
		return llama.PoolingTypeMean, nil
	case PoolingCLS:
		return llama.PoolingTypeCLS, nil
	case PoolingLast:
		return llama.PoolingTypeLast, nil
	case PoolingRank:
		return llama.PoolingTypeRank, nil
	}
	return 0, fmt.Errorf("pooling %q: want \"\", none, mean, cls, last or rank", s)
}

// resolveConfig validates rc against the model's metadata and fills in defaults.
func resolveConfig(rc wire.RuntimeConfig, meta *gguf.File) (llamaConfig, error) {
	bad := func(format string, args ...any) (llamaConfig, error) {
		return llamaConfig{}, wire.Errorf(wire.CodeConfigInvalid, format, args...)
	}
	if rc.VocabOnly {
		if rc != (wire.RuntimeConfig{VocabOnly: true}) {
			return bad("vocab_only loads no weights and no context: the other runtime_config fields must be zero")
		}
		return llamaConfig{vocabOnly: true}, nil
	}
	arch := meta.Architecture()
	train := 0
	if n, ok := meta.Uint(arch + ".context_length"); ok && n > 0 && n < maxContext {
		train = int(n)
	}
	cfg := llamaConfig{nCtx: rc.ContextSize, nBatch: rc.BatchSize, nUBatch: rc.UBatchSize,
		threads: rc.Threads, seqMax: rc.SeqMax, embeddings: rc.Embeddings}
	p, err := parsePooling(rc.Pooling)
	if err != nil {
		return bad("%w", err)
	}
	cfg.pooling = p
	switch {
	case cfg.nCtx < 0 || cfg.nCtx > maxContext:
		return bad("n_ctx %d: want 0 (default) to %d", cfg.nCtx, maxContext)
	case cfg.nBatch < 0, cfg.nUBatch < 0:
		return bad("n_batch %d, n_ubatch %d: want ≥ 0", cfg.nBatch, cfg.nUBatch)
	case cfg.threads < 0 || cfg.threads > maxThreads:
		return bad("n_threads %d: want 0 (default) to %d", cfg.threads, maxThreads)
	case cfg.seqMax < 0 || uint64(cfg.seqMax) > llama.MaxParallelSequences():
		return bad("n_seq_max %d: want 0 (default) to %d", cfg.seqMax, llama.MaxParallelSequences())
	case !cfg.embeddings && p != llama.PoolingTypeUnspecified && p != llama.PoolingTypeNone:
		return bad("pooling %q needs embeddings: true (generation contexts do not pool)", rc.Pooling)
	}
	if cfg.embeddings && !meta.IsCausal() && train > 0 && cfg.nCtx > train {
		return bad("n_ctx %d exceeds the model's training context %d (bidirectional model)", cfg.nCtx, train)
	}
	if cfg.nCtx == 0 {
		limit := defaultGenCtxMax
		if cfg.embeddings {
			limit = defaultEmbedCtxMax
		}
		cfg.nCtx = limit
		if train > 0 && train < limit {
			cfg.nCtx = train
		}
	}
	return resolveBatches(cfg)
}

// resolveBatches fills batch, ubatch, threads and sequence defaults and
// checks that they fit the context.
func resolveBatches(cfg llamaConfig) (llamaConfig, error) {
	if cfg.nBatch == 0 {
		cfg.nBatch = cfg.nCtx // embeddings: a whole context in one call
		if !cfg.embeddings && cfg.nBatch > defaultGenBatch {
			cfg.nBatch = defaultGenBatch
		}
	}
	if cfg.nUBatch == 0 {
		cfg.nUBatch = cfg.nBatch
	}
	if cfg.nBatch > cfg.nCtx {
		return llamaConfig{}, wire.Errorf(wire.CodeConfigInvalid, "n_batch %d exceeds n_ctx %d", cfg.nBatch, cfg.nCtx)
	}
	if cfg.nUBatch > cfg.nBatch {
		return llamaConfig{}, wire.Errorf(wire.CodeConfigInvalid, "n_ubatch %d exceeds n_batch %d", cfg.nUBatch, cfg.nBatch)
	}
	if cfg.threads == 0 {
		cfg.threads = int(llama.Threads())
	}
	if cfg.seqMax == 0 {
		cfg.seqMax = 1
		if cfg.embeddings { // the largest divisor of n_ubatch up to the default
			for cfg.seqMax = min(defaultEmbedSeqMax, cfg.nUBatch); cfg.nUBatch%cfg.seqMax != 0; cfg.seqMax-- {
			}
		}
	}
	// llama.cpp (v0.5.0) reserves its worst-case graph with n_ubatch tokens
	// spread evenly over n_seq_max sequences, and mean pooling then fails a
	// GGML_ASSERT (an abort) when they do not divide.
	if cfg.embeddings && cfg.nUBatch%cfg.seqMax != 0 {
		return llamaConfig{}, wire.Errorf(wire.CodeConfigInvalid, "n_seq_max %d must divide n_ubatch %d for embedding contexts", cfg.seqMax, cfg.nUBatch)
	}
	return cfg, nil
}

// modelRef names a loaded model by its digest and effective config.
func modelRef(digest string, cfg llamaConfig) string {
	hexd := strings.TrimPrefix(digest, "sha256:")
	return fmt.Sprintf("%s-%08x", hexd[:16], crc32.ChecksumIEEE([]byte(cfg.String())))
}

// loadModel loads the weights and creates the context the config asks for.
func loadModel(path string, meta *gguf.File, cfg llamaConfig) (*llamaModel, error) {
	logs.takeErrors()
	mp := llama.ModelDefaultParams()
	mp.NGpuLayers = 0
	if cfg.vocabOnly {
		mp.VocabOnly = 1
	}
	mdl, err := llama.ModelLoadFromFile(path, mp)
	if err != nil {
		return nil, classifyLoadFailure(path, logs.takeErrors())
	}
	m := &llamaModel{
		path: path, model: mdl, vocab: llama.ModelGetVocab(mdl), cfg: cfg,
		arch:   meta.Architecture(),
		ctxs:   map[llama.PoolingType]llama.Context{},
		hasCls: hasTensor(meta, "cls.weight") || hasTensor(meta, "cls.output.weight"),
	}
	m.scoring, m.scoringErr = hfmodel.LabelScoring(classifierLabels(meta))
	m.nVocab = llama.VocabNTokens(m.vocab)
	if cfg.vocabOnly {
		return m, nil
	}
	m.encode = !meta.IsCausal() || llama.ModelHasEncoder(mdl) && !llama.ModelHasDecoder(mdl)
	if err := m.init(); err != nil {
		m.free()
		return nil, err
	}
	return m, nil
}

// init creates the model's first context and works out its dims.
func (m *llamaModel) init() error {
	if !m.cfg.embeddings {
		c, err := m.newContext(llama.PoolingTypeNone)
		if err != nil {
			return err
		}
		m.gen = c
		m.dims = int(llama.ModelNEmbd(m.model))
		return nil
	}
	if m.cfg.pooling == llama.PoolingTypeRank && !m.hasCls {
		return wire.Errorf(wire.CodeConfigInvalid, "pooling rank: %s has no classifier head (cls.* tensors)", m.path)
	}
	c, err := m.newContext(m.cfg.pooling)
	if err != nil {
		return err
	}
	m.defPool = llama.GetPoolingType(c)
	m.ctxs[m.defPool] = c
	if m.defPool == llama.PoolingTypeRank && !m.hasCls {
		return wire.Errorf(wire.CodeUnsupported, "%s: rank pooling without a cls classifier head", m.path)
	}
	if m.defPool == llama.PoolingTypeRank && m.scoringErr != nil {
		return wire.Errorf(wire.CodeUnsupported, "%s: rank pooling: %v", m.path, m.scoringErr)
	}
	m.dims = m.width(m.defPool)
	return nil
}

// classifierLabels are the names of a classifier's outputs, the metadata
// llama.cpp sizes them by ({arch}.classifier.output_labels, n_cls_out); nil
// when the file names none (llama.cpp's one output).
func classifierLabels(meta *gguf.File) []string {
	labels, _ := meta.Strings(meta.Architecture() + ".classifier.output_labels")
	return labels
}

// classifyLoadFailure turns a model llama.cpp refused into an error code,
// from what it logged: an unknown architecture is unsupported, a malformed
// or truncated file is artifact_invalid, anything else is taken as oom.
func classifyLoadFailure(path, logged string) error {
	l := strings.ToLower(logged)
	switch {
	case strings.Contains(l, "unknown model architecture") || strings.Contains(l, "unsupported"):
		return wire.Errorf(wire.CodeUnsupported, "llama.cpp cannot load %s: %s", path, logged)
	case strings.Contains(l, "tensor") || strings.Contains(l, "corrupt") || strings.Contains(l, "failed to read") ||
		strings.Contains(l, "key not found") || strings.Contains(l, "wrong") || strings.Contains(l, "invalid"):
		return wire.Errorf(wire.CodeArtifactInvalid, "llama.cpp cannot load %s: %s", path, logged)
	}
	return wire.Errorf(wire.CodeOOM, "llama.cpp could not load %s (allocation failed?): %s", path, logged)
}

func hasTensor(f *gguf.File, name string) bool {
	_, ok := f.Tensor(name)
	return ok
}

var errNoContext = errors.New("context creation failed")
