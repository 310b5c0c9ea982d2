package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/synapse-embed/synapse/wire"
)

// Mux is the Engine a worker serves: it routes LOAD by format to one engine
// per format, opened on the first LOAD of that format, and every other
// request to the engine that loaded its model. An engine that cannot be
// opened (its shared library is missing) fails the LOADs of its format with
// the reason and how to fix it; the other formats are unaffected.
type Mux struct {
	openers map[string]func() (Engine, error)
	engines map[string]Engine // opened, by format
	owner   map[string]Engine // model ref → the engine that loaded it
	info    wire.EngineInfo

	// OnOpen, if set, is called when an engine has been opened (to log its
	// library's release and build flags).
	OnOpen func(format string, info wire.EngineInfo)
}

// MuxEngine is one format a Mux serves.
type MuxEngine struct {
	Format string // LOAD's format ("gguf", "onnx")
	Name   string // the engine's name and pinned release, for HELLO ("llama.cpp v0.5.0")
	Open   func() (Engine, error)
}

// NewMux returns a Mux serving the given formats. LOAD's empty format is
// taken as gguf.
func NewMux(engines ...MuxEngine) *Mux {
	m := &Mux{openers: map[string]func() (Engine, error){}, engines: map[string]Engine{}, owner: map[string]Engine{}}
	var names, formats []string
	for _, e := range engines {
		m.openers[e.Format] = e.Open
		names = append(names, e.Name)
		formats = append(formats, e.Format)
	}
	m.info = wire.EngineInfo{Name: "synapse-mux", Version: strings.Join(names, ", "), BuildFlags: "formats=" + strings.Join(formats, ",")}
	return m
}

// Info names the engines the worker can serve (they are opened lazily, so
// their libraries' build flags are logged when each opens).
func (m *Mux) Info() wire.EngineInfo { return m.info }

// Engine returns the engine of a format, opening it on first use.
func (m *Mux) Engine(format string) (Engine, error) {
	if format == "" {
		format = FormatGGUF
	}
	if e, ok := m.engines[format]; ok {
		return e, nil
	}
	open, ok := m.openers[format]
	if !ok {
		known := make([]string, 0, len(m.openers))
		for f := range m.openers {
			known = append(known, f)
		}
		sort.Strings(known)
		return nil, wire.Errorf(wire.CodeUnsupported, "format %q: this worker loads %s", format, strings.Join(known, ", "))
	}
	e, err := open()
	if err != nil {
		return nil, wire.Errorf(wire.CodeUnsupported, "this worker cannot load %s models: %w", format, err)
	}
	m.engines[format] = e
	if m.OnOpen != nil {
		m.OnOpen(format, e.Info())
	}
	return e, nil
}

// Load opens the engine of req.Format if needed and loads the model with it.
func (m *Mux) Load(ctx context.Context, req LoadRequest) (ModelInfo, error) {
	e, err := m.Engine(req.Format)
	if err != nil {
		return ModelInfo{}, err
	}
	info, err := e.Load(ctx, req)
	if err != nil {
		return ModelInfo{}, err
	}
	if prev, ok := m.owner[info.Ref]; ok && prev != e {
		return ModelInfo{}, wire.Errorf(wire.CodeInternal, "model ref %s is already used by another engine", info.Ref)
	}
	m.owner[info.Ref] = e
	return info, nil
}

func (m *Mux) engineOf(ref string) (Engine, error) {
	e, ok := m.owner[ref]
	if !ok {
		return nil, wire.Errorf(wire.CodeModelNotLoaded, "model %q is not loaded", ref)
	}
	return e, nil
}

// Embed runs on the engine that loaded the model.
func (m *Mux) Embed(ctx context.Context, ref, pooling string, normalize bool, seqs [][]int32) ([]float32, int, error) {
	e, err := m.engineOf(ref)
	if err != nil {
		return nil, 0, err
	}
	return e.Embed(ctx, ref, pooling, normalize, seqs)
}

// EmbedPoolFrom runs on the engine that loaded the model, when it can
// leave tokens out of its pooling (the ONNX engine).
func (m *Mux) EmbedPoolFrom(ctx context.Context, ref, pooling string, normalize bool, seqs [][]int32, from []int) ([]float32, int, error) {
	e, err := m.engineOf(ref)
	if err != nil {
		return nil, 0, err
	}
	pe, ok := e.(PromptEmbedder)
	if !ok {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "pool_from: the engine of model %s pools every token", ref)
	}
	return pe.EmbedPoolFrom(ctx, ref, pooling, normalize, seqs, from)
}

// Rerank runs on the engine that loaded the model.
func (m *Mux) Rerank(ctx context.Context, ref string, groups []RerankGroup) ([]float32, error) {
	e, err := m.engineOf(ref)
	if err != nil {
		return nil, err
	}
	return e.Rerank(ctx, ref, groups)
}

// Generate runs on the engine that loaded the model.
func (m *Mux) Generate(ctx context.Context, ref string, prompt []int32, opt GenerateOptions) (Generation, error) {
	e, err := m.engineOf(ref)
	if err != nil {
		return Generation{}, err
	}
	return e.Generate(ctx, ref, prompt, opt)
}

// Extensions implements Extender: GENERATE.sampling, which the llama.cpp
// engine serves (the ONNX engine does not generate at all), and
// QUANTIZE.onnx (Quantize), LOAD.st_modules, EMBED_SPARSE and EMBED_MULTI,
// which the ONNX engine serves (the llama.cpp engine answers EMBED_SPARSE
// and EMBED_MULTI with unsupported), and EMBED_TOKENS, which both serve.
func (m *Mux) Extensions() []string {
	return []string{wire.ExtSampling, wire.ExtQuantizeONNX, wire.ExtSTModules, wire.ExtEmbedTokens, wire.ExtEmbedSparse, wire.ExtEmbedMulti}
}

// Tokenize runs on the engine that loaded the model.
func (m *Mux) Tokenize(ctx context.Context, ref, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	e, err := m.engineOf(ref)
	if err != nil {
		return nil, err
	}
	return e.Tokenize(ctx, ref, text, addSpecial, parseSpecial)
}

// Unload frees the model on the engine that loaded it.
func (m *Mux) Unload(ctx context.Context, ref string) error {
	e, err := m.engineOf(ref)
	if err != nil {
		return err
	}
	if err := e.Unload(ctx, ref); err != nil {
		return err
	}
	delete(m.owner, ref)
	return nil
}

// Stats reports the process RSS and the models of every engine.
func (m *Mux) Stats() Stats {
	refs := make([]string, 0, len(m.owner))
	for ref := range m.owner {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	return Stats{RSSMB: RSSMB(), ModelsLoaded: refs}
}

// Close closes every opened engine.
func (m *Mux) Close() error {
	var errs []error
	for f, e := range m.engines {
		if err := e.Close(); err != nil {
			errs = append(errs, fmt.Errorf("engine %s: %w", f, err))
		}
	}
	clear(m.owner)
	return errors.Join(errs...)
}

// Quantize implements Quantizer: an ONNX graph with QuantizeONNX (pure Go,
// no ONNX Runtime needed), a GGUF file with the GGUF engine, opening it if
// no LOAD has.
func (m *Mux) Quantize(ctx context.Context, req QuantizeRequest) (QuantizeResult, error) {
	switch req.Format {
	case FormatONNX:
		return QuantizeONNX(ctx, req)
	case "", FormatGGUF:
	default:
		return QuantizeResult{}, wire.Errorf(wire.CodeBadRequest, "format %q: want gguf or onnx", req.Format)
	}
	e, err := m.Engine(FormatGGUF)
	if err != nil {
		return QuantizeResult{}, err
	}
	q, ok := e.(Quantizer)
	if !ok {
		return QuantizeResult{}, wire.Errorf(wire.CodeUnsupported, "engine %s cannot quantize models", e.Info().Name)
	}
	return q.Quantize(ctx, req)
}
