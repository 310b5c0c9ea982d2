//go:build cgo

package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/onnx"
	"github.com/synapse-embed/synapse/wire"
)

// Defaults of the ONNX engine's runtime config.
const (
	onnxDefaultCtx    = 512
	onnxDefaultSeqMax = 64
	// onnxRunTokens caps the tokens of one run of equal-length sequences:
	// attention's memory grows with sequences × length², and a module
	// request (4 chunks' worth by default) fits.
	onnxRunTokens = 4096
)

// onnxConfig is a RuntimeConfig with every default resolved.
type onnxConfig struct {
	nCtx, tokensPerRun, seqMax, threads int
	pad                                 int    // ONNXOptions.PadTokens: lengths within pad tokens share a padded run
	pooling                             string // as LOAD asked: "" (the model's), mean, cls or last
	modules                             string // the directory's sentence-transformers chain (hfmodel.Chain.String)
}

func (c onnxConfig) String() string {
	s := fmt.Sprintf("onnx ctx=%d run=%d seq=%d threads=%d pool=%s modules=%s", c.nCtx, c.tokensPerRun, c.seqMax, c.threads, c.pooling, c.modules)
	if c.pad > 0 { // refs without padding stay as they were
		s += fmt.Sprintf(" pad=%d", c.pad)
	}
	return s
}

// Load verifies the artifact (the .onnx file's digest), checks its inputs
// and outputs, and creates an ONNX Runtime session. Loading the same digest
// with the same effective config again returns the loaded model's ref.
func (e *ONNX) Load(ctx context.Context, req LoadRequest) (ModelInfo, error) {
	if e.closed {
		return ModelInfo{}, wire.Errorf(wire.CodeInternal, "engine closed")
	}
	if req.Format != FormatONNX {
		return ModelInfo{}, wire.Errorf(wire.CodeUnsupported, "format %q: the ONNX Runtime engine loads onnx", req.Format)
	}
	files, info, err := verifyONNX(req.Path, req.Digest)
	if err != nil {
		return ModelInfo{}, err
	}
	hfc, err := hfmodel.ReadConfig(files.Config)
	if err != nil {
		return ModelInfo{}, wire.Errorf(wire.CodeArtifactInvalid, "%w", err)
	}
	cfg, err := resolveONNXConfig(req.Config, hfc)
	if err != nil {
		return ModelInfo{}, err
	}
	if cfg.modules = files.Chain.String(); req.Config.STModules != "" && req.Config.STModules != cfg.modules {
		return ModelInfo{}, wire.Errorf(wire.CodeArtifactInvalid, "%s: the sentence-transformers modules are %q; the module read %q (the directory changed)",
			files.Root, cfg.modules, req.Config.STModules)
	}
	plan, err := planGraph(files, info, cfg)
	if err != nil {
		return ModelInfo{}, err
	}
	// Padding where it can apply: not for pairs, not where a batch's rows
	// mix (one sequence per run), not without a mask to hide the padding.
	if cfg.pooling != PoolingRank && len(plan.batchOps) == 0 && slices.Contains(plan.roles, roleMask) {
		cfg.pad = e.pad
	}
	var ce crossEncoder
	if cfg.pooling == PoolingRank {
		if ce, err = readCrossEncoder(files, hfc, plan); err != nil {
			return ModelInfo{}, err
		}
	}
	// The digest covers the graph only: a cross-encoder's ref also names its
	// pair layout, which comes from tokenizer.json.
	ref := onnxRef(req.Digest, cfg, ce)
	if m, ok := e.models[ref]; ok {
		return ModelInfo{Ref: ref, Dims: m.dims(m.useGraph, m.chain)}, nil
	}
	start := time.Now()
	var chain onnxChain
	if cfg.pooling != PoolingRank {
		if chain, err = newONNXChain(files.Chain, cfg.pooling); err != nil {
			return ModelInfo{}, err
		}
	}
	m, err := newONNXModel(files.Graph, plan, cfg)
	if err != nil {
		return ModelInfo{}, err
	}
	m.ref, m.nVocab, m.ce = ref, hfc.VocabSize, ce
	if hfc.PadTokenID != nil && *hfc.PadTokenID >= 0 && (m.nVocab == 0 || *hfc.PadTokenID < m.nVocab) {
		m.padID = int32(*hfc.PadTokenID)
	}
	if err := m.probePadding(); err != nil {
		m.free()
		return ModelInfo{}, err
	}
	if cfg.pooling == PoolingRank {
		if m.ce.scoring, err = hfc.Scoring(m.width[plan.logits]); err != nil {
			m.free()
			return ModelInfo{}, wire.Errorf(wire.CodeUnsupported, "%s: %w", files.Graph, err)
		}
	} else if m.sparseOnly() {
		m.chain = chain // pools nothing: the graph gives sparse vectors only
	} else if err := m.setChain(chain); err != nil {
		m.free()
		return ModelInfo{}, err
	}
	e.models[ref] = m
	return ModelInfo{Ref: ref, Dims: m.dims(m.useGraph, m.chain), ColdLoad: time.Since(start)}, nil
}

// setChain checks the chain against the graph's widths: applied after
// last_hidden_state, each module must take what the one before gives; when
// the graph's sentence_embedding is used, it must be as wide as the chain's
// output (it holds the chain).
func (m *onnxModel) setChain(ch onnxChain) error {
	m.chain = ch
	if !m.useGraph {
		return ch.check(m.path, m.width[m.plan.hidden])
	}
	want := 0
	if m.plan.hidden >= 0 {
		want = ch.dims(m.width[m.plan.hidden])
	} else if n := len(ch.dense); n > 0 {
		want = ch.dense[n-1].out
	}
	if got := m.width[m.plan.pooled]; want > 0 && got != want {
		return wire.Errorf(wire.CodeArtifactInvalid, "%s: sentence_embedding is %d wide, but the sentence-transformers modules (%s) give %d: the graph does not hold them",
			m.path, got, ch.desc, want)
	}
	return nil
}

// verifyONNX resolves path, checks the .onnx file's digest and reads its graph.
func verifyONNX(path, digest string) (hfmodel.Files, *onnx.Info, error) {
	if err := checkDigestSyntax(digest); err != nil {
		return hfmodel.Files{}, nil, err
	}
	files, err := hfmodel.Resolve(path)
	if err != nil {
		return hfmodel.Files{}, nil, wire.Errorf(wire.CodeArtifactInvalid, "artifact: %w", err)
	}
	_, got, err := hfmodel.Digest(files.Graph)
	if err != nil {
		return hfmodel.Files{}, nil, wire.Errorf(wire.CodeArtifactInvalid, "artifact: %w", err)
	}
	if got != digest {
		return hfmodel.Files{}, nil, wire.Errorf(wire.CodeArtifactInvalid, "artifact %s: digest %s; want %s", files.Graph, got, digest)
	}
	info, err := onnx.ReadFile(files.Graph)
	if err != nil {
		return hfmodel.Files{}, nil, wire.Errorf(wire.CodeArtifactInvalid, "artifact: %w", err)
	}
	return files, info, nil
}

// resolveONNXConfig validates rc and fills in defaults.
func resolveONNXConfig(rc wire.RuntimeConfig, hfc hfmodel.Config) (onnxConfig, error) {
	bad := func(format string, args ...any) (onnxConfig, error) {
		return onnxConfig{}, wire.Errorf(wire.CodeConfigInvalid, format, args...)
	}
	switch {
	case rc.VocabOnly:
		return onnxConfig{}, wire.Errorf(wire.CodeUnsupported, "vocab_only: the ONNX engine has no tokenizer (the module tokenizes ONNX models)")
	case !rc.Embeddings:
		return onnxConfig{}, wire.Errorf(wire.CodeUnsupported, "embeddings: false asks for generation; the ONNX engine runs encoders (embeddings: true)")
	case rc.ContextSize < 0 || rc.ContextSize > maxContext:
		return bad("n_ctx %d: want 0 (default) to %d", rc.ContextSize, maxContext)
	case rc.BatchSize < 0, rc.UBatchSize < 0, rc.SeqMax < 0:
		return bad("n_batch %d, n_ubatch %d, n_seq_max %d: want ≥ 0", rc.BatchSize, rc.UBatchSize, rc.SeqMax)
	case rc.Threads < 0 || rc.Threads > maxThreads:
		return bad("n_threads %d: want 0 (default) to %d", rc.Threads, maxThreads)
	}
	switch rc.Pooling {
	case PoolingDefault, PoolingMean, PoolingCLS, PoolingLast:
	case PoolingRank: // a cross-encoder: RERANK over the graph's logits
	default:
		return bad("pooling %q: want \"\", mean, cls, last or rank (a cross-encoder)", rc.Pooling)
	}
	train := hfc.ContextLength()
	cfg := onnxConfig{nCtx: rc.ContextSize, tokensPerRun: onnxRunTokens, seqMax: rc.SeqMax, threads: rc.Threads, pooling: rc.Pooling}
	if train > 0 && cfg.nCtx > train {
		return bad("n_ctx %d exceeds the model's context %d (config.json max_position_embeddings)", cfg.nCtx, train)
	}
	if cfg.nCtx == 0 {
		cfg.nCtx = onnxDefaultCtx
		if train > 0 {
			cfg.nCtx = train
		}
	}
	if cfg.seqMax == 0 {
		cfg.seqMax = onnxDefaultSeqMax
	}
	return cfg, nil
}

func onnxRef(digest string, cfg onnxConfig, ce crossEncoder) string {
	hexd := strings.TrimPrefix(digest, "sha256:")
	key := cfg.String()
	if cfg.pooling == PoolingRank {
		key += " pair=" + ce.pair.String()
	}
	return fmt.Sprintf("%s-%08x", hexd[:16], crc32.ChecksumIEEE([]byte(key)))
}

// Graph input roles: what the engine feeds each input.
const (
	roleIDs       = iota // input_ids
	roleMask             // attention_mask: ones, zeros over a padded run's padding
	roleTypes            // token_type_ids: zeros; a cross-encoder pair's types from its post-processor
	rolePositions        // position_ids: 0 … n-1
)

var inputRoles = map[string]int{
	"input_ids": roleIDs, "attention_mask": roleMask, "token_type_ids": roleTypes, "position_ids": rolePositions,
}

// graphPlan is how the engine runs a graph: the inputs it feeds and the
// outputs it reads.
type graphPlan struct {
	inputs  []string
	roles   []int
	int32s  []bool // the input takes int32 (else int64)
	outputs []string
	hidden  int // index in outputs of last_hidden_state (or token_embeddings), -1 for none
	pooled  int // index in outputs of sentence_embedding, -1 for none
	logits  int // index in outputs of logits (cross-encoders, loaded with pooling rank), -1 for none
	// mlm is the index in outputs of a masked-LM's logits [batch,
	// sequence, vocab] (EMBED_SPARSE), -1 for none. A cross-encoder's
	// logits are [batch, labels]: the rank tells them apart.
	mlm int
	// useGraph: the default vectors are sentence_embedding's (LOAD named
	// no pooling and the graph has it); else the chain over last_hidden_state.
	useGraph bool
	// batchOps are the graph's ops whose results mix a batch's rows
	// (onnx.Info.BatchDependent): then every run holds one sequence.
	batchOps []string
}

// planGraph checks a graph's inputs and outputs and picks the default pooling.
func planGraph(files hfmodel.Files, info *onnx.Info, cfg onnxConfig) (graphPlan, error) {
	p := graphPlan{hidden: -1, pooled: -1, logits: -1, mlm: -1, batchOps: info.BatchDependent()}
	unsupported := func(format string, args ...any) (graphPlan, error) {
		return graphPlan{}, wire.Errorf(wire.CodeUnsupported, "%s: "+format, append([]any{files.Graph}, args...)...)
	}
	for _, in := range info.Inputs {
		role, ok := inputRoles[in.Name]
		if !ok {
			return unsupported("graph input %s: the engine feeds input_ids, attention_mask, token_type_ids and position_ids only", in)
		}
		if !in.Tensor || in.Elem != onnx.Int64 && in.Elem != onnx.Int32 || len(in.Dims) != 2 {
			return unsupported("graph input %s: want an int64 or int32 tensor [batch, sequence]", in)
		}
		p.inputs, p.roles, p.int32s = append(p.inputs, in.Name), append(p.roles, role), append(p.int32s, in.Elem == onnx.Int32)
	}
	if _, ok := info.Input("input_ids"); !ok {
		return unsupported("no input_ids input (inputs: %v)", info.Inputs)
	}
	if cfg.pooling == PoolingRank {
		return p, p.planLogits(files, info)
	}
	for _, out := range info.Outputs {
		switch out.Name {
		case "last_hidden_state", "token_embeddings":
			if p.hidden >= 0 {
				continue
			}
			if !out.Tensor || out.Elem != onnx.Float || len(out.Dims) != 3 {
				return unsupported("output %s: want a float32 tensor [batch, sequence, hidden]", out)
			}
			p.hidden = len(p.outputs)
		case "sentence_embedding":
			if !out.Tensor || out.Elem != onnx.Float || len(out.Dims) != 2 {
				return unsupported("output %s: want a float32 tensor [batch, dims]", out)
			}
			p.pooled = len(p.outputs)
		case "logits":
			if !out.Tensor || out.Elem != onnx.Float || len(out.Dims) != 3 {
				continue // a cross-encoder's [batch, labels]: it reranks
			}
			p.mlm = len(p.outputs)
		default:
			continue
		}
		p.outputs = append(p.outputs, out.Name)
	}
	if len(p.outputs) == 0 {
		if _, ok := info.Output("logits"); ok {
			return unsupported("a cross-encoder (logits output, no last_hidden_state or sentence_embedding): it reranks (pooling rank, synapse rerank); it does not embed")
		}
		return unsupported("no last_hidden_state or sentence_embedding output (outputs: %v)", info.Outputs)
	}
	return p, p.pickPooling(files, cfg)
}

// pickPooling decides where the default vectors come from: with LOAD's
// pooling, the chain over last_hidden_state; else the graph's own
// sentence_embedding when it has one (it holds the sentence-transformers
// chain: an exported SentenceTransformer's output), else the chain.
func (p *graphPlan) pickPooling(files hfmodel.Files, cfg onnxConfig) error {
	switch {
	case cfg.pooling != PoolingDefault:
		if p.hidden < 0 {
			return wire.Errorf(wire.CodeConfigInvalid, "pooling %s needs a last_hidden_state output; %s outputs only %s (leave pooling empty)", cfg.pooling, files.Graph, strings.Join(p.outputs, " and "))
		}
	case p.pooled >= 0:
		p.useGraph = true
	}
	return nil
}

// newONNXModel creates the session and learns the output widths from a
// one-token run, which also proves that the graph runs.
func newONNXModel(path string, plan graphPlan, cfg onnxConfig) (*onnxModel, error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, wire.Errorf(wire.CodeInternal, "onnxruntime session options: %w", err)
	}
	defer so.Destroy()
	for _, set := range []func() error{
		func() error { return so.SetIntraOpNumThreads(cfg.threads) },
		func() error { return so.SetInterOpNumThreads(1) },
		func() error { return so.SetExecutionMode(ort.ExecutionModeSequential) },
		func() error { return so.SetGraphOptimizationLevel(ort.GraphOptimizationLevelEnableAll) },
		func() error {
			return so.AddSessionConfigEntry("session.intra_op.allow_spinning", intraOpSpinning(cfg.threads))
		},
	} {
		if err := set(); err != nil {
			return nil, wire.Errorf(wire.CodeInternal, "onnxruntime session options: %w", err)
		}
	}
	sess, err := ort.NewDynamicAdvancedSession(path, plan.inputs, plan.outputs, so)
	if err != nil {
		return nil, classifyORTLoad(path, err)
	}
	m := &onnxModel{path: path, sess: sess, plan: plan, cfg: cfg, useGraph: plan.useGraph, width: make([]int, len(plan.outputs))}
	if err := m.probe(); err != nil {
		m.free()
		return nil, err
	}
	return m, nil
}

// intraOpSpinning is the session's "session.intra_op.allow_spinning": off
// whenever ONNX Runtime runs a pool of intra-op threads (threads 0, its
// default of one per core, or more than 1). Pool threads that spin between
// kernels burn the CPU a neighbour (another worker, another job) would use:
// at 2 threads on a loaded machine spinning off ran 1.7× the tokens per
// second and 1.46× the tokens per CPU second (docs/onnx-bench.md,
// BenchmarkORTOptions). With 1 thread there is no pool and nothing spins;
// ONNX Runtime's default stays.
func intraOpSpinning(threads int) string {
	if threads == 1 {
		return "1"
	}
	return "0"
}

// classifyORTLoad turns a session ONNX Runtime refused into an error code
// from its message: an operator, opset or IR version it lacks is
// unsupported, memory is oom, anything else (a damaged or invalid graph) is
// artifact_invalid.
func classifyORTLoad(path string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "Error creating C session from file: ")
	l := strings.ToLower(msg)
	switch {
	case strings.Contains(l, "no op registered") || strings.Contains(l, "could not find an implementation") ||
		strings.Contains(l, "not_implemented") || strings.Contains(l, "unsupported model ir version") ||
		strings.Contains(l, "opset") && strings.Contains(l, "support"):
		return wire.Errorf(wire.CodeUnsupported, "ONNX Runtime %s cannot run %s: %s", ortInfo.Version, path, msg)
	case strings.Contains(l, "bad_alloc") || strings.Contains(l, "failed to allocate") || strings.Contains(l, "out of memory"):
		return wire.Errorf(wire.CodeOOM, "ONNX Runtime could not load %s: %s", path, msg)
	}
	return wire.Errorf(wire.CodeArtifactInvalid, "ONNX Runtime cannot load %s: %s", path, msg)
}

var errProbe = errors.New("probe run failed")
