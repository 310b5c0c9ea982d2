package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/onnx"
	"github.com/synapse-embed/synapse/supervise"
	"github.com/synapse-embed/synapse/wire"
)

// DefaultMinCosine is the worst cosine between a quantized variant's
// vectors and its source's below which the variant is marked degraded;
// DefaultMinCosineINT8 is the default for an ONNX int8 variant, whose
// activations are quantized per tensor at run time and cost more than a
// GGUF type's per-block weight scales, most on the shortest texts: on the
// built-in sample's 3-token "ok", all-MiniLM-L6-v2's int8 graphs reach
// 0.965 (synapse's), 0.974 (the same with 8-bit weights) and 0.974 (its
// publisher's own int8 export, langchain4j's), while their worst over
// 1,000 SciFact documents is 0.989–0.991 (docs/onnx.md, "int8 on every
// CPU"). 0.95 passes a sound int8 graph and marks a broken one: per-tensor
// weights gave 0.849.
const (
	DefaultMinCosine     = 0.999
	DefaultMinCosineINT8 = 0.95
)

// QuantizeOptions says what to make and how to measure it.
type QuantizeOptions struct {
	// FType is the target: a GGUF file type ("q8_0", "q4_k_m", …:
	// gguf.ParseFileType) for a GGUF model, "int8" for an ONNX one
	// (ParseTarget).
	FType string
	// Name is the variant's name; "" is the source's name, a colon and the
	// file type ("minilm:q8_0").
	Name      string
	MinCosine float64 // 0: DefaultMinCosine (DefaultMinCosineINT8 for an ONNX int8 variant)
	Sample    Sample  // zero: BuiltinSample
	Rounds    int     // timed passes over the sample per variant (0: 3)
	// Timeout bounds the quantizer (0: 10 minutes plus a second per 4 MB
	// of source); past it the worker is killed.
	Timeout time.Duration
}

// Errors of Quantize besides the workers' and the store's.
var (
	// ErrNeedsNewerWorker: the worker answered QUANTIZE with unknown_type.
	ErrNeedsNewerWorker = errors.New("quantization needs a newer synapse worker")
	// ErrCannotQuantize: the source is not one this package quantizes.
	ErrCannotQuantize = errors.New("cannot quantize")
)

func (q *QuantizeOptions) defaults(srcSize int64) {
	if len(q.Sample.Texts) == 0 {
		q.Sample = BuiltinSample()
	}
	if q.Rounds <= 0 {
		q.Rounds = 3
	}
	if q.Timeout <= 0 {
		q.Timeout = 10*time.Minute + time.Duration(srcSize/(4<<20))*time.Second
	}
}

// Quantize makes the variant of a cached model quantized to q.FType, or
// returns the one the cache has (existed true). The quantizer runs in a
// worker; the variant and its source then embed q.Sample, and the entry
// records the cosines and the speed ratio. A variant below q.MinCosine is
// kept, marked degraded. Any failure, interruption or worker crash leaves
// no entry.
func Quantize(ctx context.Context, src modelcache.Entry, q QuantizeOptions, o Options) (modelcache.Entry, bool, error) {
	s, err := newSession(o)
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	defer s.close()
	return s.quantize(ctx, src, q)
}

func (s *session) quantize(ctx context.Context, src modelcache.Entry, q QuantizeOptions) (modelcache.Entry, bool, error) {
	ft, name, err := s.checkQuantize(src, &q)
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	st := s.o.Store
	if v, ok, err := st.Variant(src, ft.Label); err != nil || ok && !v.StaleGraph(onnx.QuantForm) {
		return v, ok, err
	}
	unlock, err := st.LockKey(ctx, "quantize-"+src.Digest+"-"+ft.Label, func() { s.o.progress("waiting for another synapse process quantizing this model") })
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	defer unlock()
	if v, ok, err := st.Variant(src, ft.Label); err != nil || ok && !v.StaleGraph(onnx.QuantForm) {
		return v, ok, err
	} else if ok {
		if err := s.removeStale(v); err != nil {
			return modelcache.Entry{}, false, err
		}
	}
	stg, err := st.Stage()
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	defer stg.Abort()
	s.o.progress("quantizing %s to %s in a worker", src.Name, ft.Label)
	file := stg.File()
	if ft.Format == artifact.FormatONNX {
		file = stg.Path(modelcache.ONNXFile)
	}
	res, err := s.runQuantizer(ctx, src, file, ft, q.Timeout)
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	if ft.Format == artifact.FormatONNX { // the variant is a model directory too: its source's tokenizer and configs
		sidecars, err := src.Sidecars()
		if err == nil {
			err = stg.CopyIn(sidecars)
		}
		if err != nil {
			return modelcache.Entry{}, false, fmt.Errorf("quantize: %w", err)
		}
	}
	out, err := checkOutput(file, ft)
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	if out.Digest != res.OutDigest || out.Size != res.OutSize {
		return modelcache.Entry{}, false, fmt.Errorf("quantize: the worker reported %s (%d bytes); the file is %s (%d bytes)", res.OutDigest, res.OutSize, out.Digest, out.Size)
	}
	s.o.progress("measuring %s against %s on %d %s texts", ft.Label, src.Name, len(q.Sample.Texts), q.Sample.Name)
	quality, err := s.measure(ctx, src, out, q)
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	quality.QuantizeMS = res.MS
	e := describe(out, src.Kind, src.Dims)
	e.Name, e.SourcePath, e.Stored, e.Of, e.Quality, e.SynapseVersion = name, src.Path(), modelcache.StoredQuantized, src.Digest, quality, s.o.Version
	if ft.Format == artifact.FormatONNX {
		quality.Graph = onnx.QuantForm
	}
	return stg.Commit(e)
}

// removeStale removes the variant v an earlier synapse quantized into a
// graph whose vectors depend on the CPU (Entry.StaleGraph), so that it is
// made again; another user's is refused with the way out.
func (s *session) removeStale(v modelcache.Entry) error {
	if v.NeedsVerify() {
		return fmt.Errorf("quantize: %w", artifact.StaleError(v.Name, v))
	}
	s.o.progress("%s was quantized by an earlier synapse into a graph whose vectors depend on the CPU; making it again", v.Name)
	return s.o.Store.Remove(v)
}

// Target is what a variant is quantized to.
type Target struct {
	Format string        // artifact.FormatGGUF or FormatONNX
	FType  gguf.FileType // a GGUF target's file type
	// Label is the variant's Quantization ("Q8_0", "INT8"); Wire is
	// QUANTIZE's ftype ("q8_0", "int8").
	Label, Wire string
}

// ParseTarget checks a --quantize value for a model of format
// (artifact.FormatGGUF, FormatONNX): a GGUF file type name for GGUF,
// "int8" for ONNX (the dynamically quantized graph, onnx.QuantizeDynamic).
func ParseTarget(format, s string) (Target, error) {
	if format == artifact.FormatONNX {
		if !strings.EqualFold(s, onnx.FTypeInt8) {
			return Target{}, fmt.Errorf("%q: an ONNX model is quantized to int8 (int8 MatMul and Gemm weights, activations quantized at run time)", s)
		}
		return Target{Format: format, Label: "INT8", Wire: onnx.FTypeInt8}, nil
	}
	ft, err := gguf.ParseFileType(s)
	if err != nil {
		return Target{}, err
	}
	return Target{Format: artifact.FormatGGUF, FType: ft, Label: ft.String(), Wire: strings.ToLower(ft.String())}, nil
}

// FormatOf is the format of the model ref names (a file or directory, else
// a name or digest prefix in store): artifact.FormatONNX or FormatGGUF, the
// latter also for a ref that names nothing (the error comes later).
func FormatOf(store *modelcache.Store, ref string) string {
	if _, err := os.Stat(ref); err == nil {
		if hfmodel.IsONNX(ref) {
			return artifact.FormatONNX
		}
		return artifact.FormatGGUF
	}
	if store != nil {
		if e, err := store.Lookup(ref); err == nil {
			return e.Format()
		}
	}
	return artifact.FormatGGUF
}

// checkQuantize checks that src can be quantized to q.FType and returns the
// target and the variant's name. An ONNX graph is checked by
// onnx.CheckQuantize here, in the module, so that one the quantizer cannot
// handle is refused before any worker starts or any entry is staged.
func (s *session) checkQuantize(src modelcache.Entry, q *QuantizeOptions) (Target, string, error) {
	q.defaults(src.Size)
	ft, err := ParseTarget(src.Format(), q.FType)
	if err != nil {
		return Target{}, "", fmt.Errorf("quantize %s: %w: %w", src.Name, ErrCannotQuantize, err)
	}
	onnxSrc := ft.Format == artifact.FormatONNX
	if q.MinCosine == 0 {
		q.MinCosine = DefaultMinCosine
		if onnxSrc {
			q.MinCosine = DefaultMinCosineINT8
		}
	}
	switch {
	case src.Kind == modelcache.KindGenerate:
		return Target{}, "", fmt.Errorf("quantize %s: %w: it is a %s model; quality is measured on embeddings and rerank scores, so only embedding models and rerankers are quantized", src.Name, ErrCannotQuantize, src.Kind)
	case onnxSrc && src.Quantization != "F32":
		return Target{}, "", fmt.Errorf("quantize %s: %w: its weights are %s; synapse quantizes float32 ONNX graphs", src.Name, ErrCannotQuantize, src.Quantization)
	case src.Quantization != "F32" && src.Quantization != "F16" && src.Quantization != "BF16":
		return Target{}, "", fmt.Errorf("quantize %s: %w: its weights are %s; quantize from an F32, F16 or BF16 model", src.Name, ErrCannotQuantize, src.Quantization)
	case src.Quantization == ft.Label:
		return Target{}, "", fmt.Errorf("quantize %s: %w: it is %s already", src.Name, ErrCannotQuantize, ft.Label)
	}
	if onnxSrc {
		if _, err := onnx.CheckQuantize(src.Path()); err != nil {
			return Target{}, "", fmt.Errorf("quantize %s: %w: %w", src.Name, ErrCannotQuantize, err)
		}
	}
	name := q.Name
	if name == "" {
		name = src.Name + ":" + strings.ToLower(ft.Label)
	}
	if err := modelcache.CheckName(name); err != nil {
		return Target{}, "", fmt.Errorf("quantize: %w", err)
	}
	return ft, name, nil
}

// runQuantizer has a worker write the quantized copy of src to out.
func (s *session) runQuantizer(ctx context.Context, src modelcache.Entry, out string, ft Target, timeout time.Duration) (*wire.Quantized, error) {
	pool, err := s.workers(ctx)
	if err != nil {
		return nil, err
	}
	req := &wire.Quantize{ArtifactPath: src.Path(), ArtifactDigest: src.Digest, OutPath: out, FType: ft.Wire, Threads: s.o.threads()}
	if ft.Format == artifact.FormatONNX {
		if !pool.Supports(wire.ExtQuantizeONNX) {
			return nil, fmt.Errorf("quantize %s: %w (the worker does not announce %s)", src.Name, ErrNeedsNewerWorker, wire.ExtQuantizeONNX)
		}
		req.Format = artifact.FormatONNX
	}
	resp, err := pool.Do(ctx, req, timeout)
	var we *wire.Error
	var ce *supervise.CrashError
	switch {
	case err == nil:
		return resp.(*wire.Quantized), nil
	case ctx.Err() != nil:
		return nil, workerError(ctx, "quantize", err)
	case errors.As(err, &we) && we.Code == wire.CodeUnknownType:
		return nil, fmt.Errorf("quantize %s: %w (the worker answered %s: %s)", src.Name, ErrNeedsNewerWorker, we.Code, we.Msg)
	case errors.As(err, &we):
		return nil, fmt.Errorf("quantize %s to %s: the worker refused: %s: %s", src.Name, ft.Label, we.Code, we.Msg)
	case errors.As(err, &ce):
		return nil, fmt.Errorf("quantize %s to %s: the worker crashed (%s); nothing was added: %w", src.Name, ft.Label, crashCause(ce), err)
	}
	return nil, fmt.Errorf("quantize %s to %s: %w", src.Name, ft.Label, err)
}

// checkOutput validates the quantizer's file in the module: it hashes it,
// opens it (header, tokenizer), checks its tensor directory and its file
// type.
func checkOutput(path string, t Target) (*artifact.Artifact, error) {
	if t.Format == artifact.FormatONNX {
		return checkONNXOutput(path)
	}
	ft := t.FType
	size, digest, err := gguf.Digest(path)
	if err != nil {
		return nil, fmt.Errorf("quantize: %w", err)
	}
	a, err := artifact.OpenKnown(path, size, digest)
	if err != nil {
		return nil, fmt.Errorf("quantize: the quantized file: %w", err)
	}
	if err := a.GGUF.CheckTensors(size); err != nil {
		return nil, fmt.Errorf("quantize: the quantized file: %w", err)
	}
	if got, ok := a.GGUF.FileType(); !ok || got != ft {
		return nil, fmt.Errorf("quantize: the quantized file says file type %v; want %v", got, ft)
	}
	return a, nil
}

// checkONNXOutput opens the quantized graph in the module (with the
// source's files beside it) and checks that it is quantized.
func checkONNXOutput(path string) (*artifact.Artifact, error) {
	a, err := artifact.OpenWith(path, artifact.Options{})
	if err != nil {
		return nil, fmt.Errorf("quantize: the quantized graph: %w", err)
	}
	if p := a.ONNX.Precision(); p != "INT8" {
		return nil, fmt.Errorf("quantize: the quantized graph's weights are %s; want INT8", p)
	}
	return a, nil
}

// Result is what EnsureQuantized resolved.
type Result struct {
	Variant     modelcache.Entry // the model to run
	Source      modelcache.Entry // the model ref named
	SourceAdded bool             // the source was added to the cache by this call
	Made        bool             // the variant was made by this call; false when the cache had it
}

// EnsureQuantized returns the variant of the model ref names quantized to
// q.FType. ref is a model file, added to the cache first unless it is there
// already, or a name or digest prefix in the cache. A model of that file
// type already is its own variant. The cache's variant is used when there
// is one (a second run neither hashes a file the digest cache knows nor
// starts a worker); else it is made as Quantize does. Whether a degraded
// variant may run is the caller's decision (Entry.Degraded).
func EnsureQuantized(ctx context.Context, ref string, q QuantizeOptions, o Options) (Result, error) {
	s, err := newSession(o)
	if err != nil {
		return Result{}, err
	}
	defer s.close()
	if err := precheckONNX(ref); err != nil {
		return Result{}, err
	}
	src, added, err := s.source(ctx, "quantize", ref)
	if err != nil {
		return Result{}, err
	}
	res := Result{Variant: src, Source: src, SourceAdded: added}
	if ft, err := ParseTarget(src.Format(), q.FType); err == nil && strings.EqualFold(src.Quantization, ft.Label) {
		return res, nil
	}
	v, existed, err := s.quantize(ctx, src, q)
	if err != nil {
		return Result{}, err
	}
	res.Variant, res.Made = v, !existed
	return res, nil
}

// precheckONNX refuses an ONNX model file or directory that the quantizer
// cannot handle before it is added to the cache (a cached model is checked
// by checkQuantize).
func precheckONNX(ref string) error {
	if _, err := os.Stat(ref); err != nil || !hfmodel.IsONNX(ref) {
		return nil
	}
	files, err := hfmodel.Resolve(ref)
	if err != nil {
		return nil // add reports it
	}
	if _, err := onnx.CheckQuantize(files.Graph); errors.Is(err, onnx.ErrCannotQuantize) {
		return fmt.Errorf("quantize %s: %w: %w", ref, ErrCannotQuantize, err)
	}
	return nil
}

// source returns the cache entry of ref, a file (added if needed, then
// added is true) or a name or digest prefix; op (quantize, distill) is the
// operation its lookup error names.
func (s *session) source(ctx context.Context, op, ref string) (e modelcache.Entry, added bool, err error) {
	if fi, err := os.Stat(ref); err == nil && (!fi.IsDir() || hfmodel.IsONNX(ref)) {
		e, existed, err := s.add(ctx, ref, "")
		return e, !existed, err
	}
	e, err = s.o.Store.Lookup(ref)
	if err != nil {
		return modelcache.Entry{}, false, fmt.Errorf("%s: %w", op, err)
	}
	return e, false, nil
}
