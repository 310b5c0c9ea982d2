package convert

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/modelcache"
)

// Options are how Cached converts.
type Options struct {
	Format string // FormatONNX ("" : it); FormatGGUF is not written yet
	Name   string // the entry's name; "" : the directory's, made unique with digits of the digest when taken
	// NameIsHint makes Name a derived name: made unique as the
	// directory's is, rather than an error when another model has it.
	NameIsHint bool
	Version    string // synapse's version, recorded in the entry
	// Check, when set, is called on the staged model file (model.onnx with
	// its files beside it, or model.gguf) before it is committed (ingest
	// has a worker load it); it returns the width of the vectors it gives,
	// 0 to leave the one the chain implies.
	Check func(ctx context.Context, dir string) (dims int, err error)
	// Progress, when set, is told what is being done.
	Progress func(format string, args ...any)
}

// Result is what Cached did.
type Result struct {
	Entry  modelcache.Entry
	Reused bool   // the entry was converted before (by this process or another)
	Key    string // Source.Key
}

// Cached returns the model cache's conversion of the directory dir,
// converting it first when the cache has none for its key: into a
// staging directory, committed whole (modelcache.Staging), so that a failed
// or interrupted conversion leaves no entry. Concurrent conversions of one
// source wait for each other.
func Cached(ctx context.Context, st *modelcache.Store, dir string, o Options) (Result, error) {
	if o.Format != "" && o.Format != FormatONNX && o.Format != FormatGGUF {
		return Result{}, fmt.Errorf("convert: %w: format %q; want onnx or gguf", ErrRefused, o.Format)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Result{}, fmt.Errorf("convert: %w", err)
	}
	src, err := Open(abs)
	if err != nil {
		return Result{}, err
	}
	if o.Format == "" {
		o.Format = src.Route()
	}
	key, err := src.Key(o.Format, st.Digest)
	if err != nil {
		return Result{}, err
	}
	if e, ok, _ := st.Converted(key); ok { // unreadable entries do not stop a conversion
		return Result{Entry: e, Reused: true, Key: key}, nil
	}
	unlock, err := st.LockKey(ctx, key, func() { o.progress("waiting for another synapse process converting %s", dir) })
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	if e, ok, _ := st.Converted(key); ok { // it finished first
		return Result{Entry: e, Reused: true, Key: key}, nil
	}
	e, err := convertInto(ctx, st, src, key, o)
	if err != nil {
		return Result{}, err
	}
	return Result{Entry: e, Key: key}, nil
}

func (o Options) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(format, args...)
	}
}

// convertInto converts src into a staging directory and commits it.
func convertInto(ctx context.Context, st *modelcache.Store, src *Source, key string, o Options) (modelcache.Entry, error) {
	side, err := src.Sidecars()
	if err != nil {
		return modelcache.Entry{}, err
	}
	stg, err := st.Stage()
	if err != nil {
		return modelcache.Entry{}, err
	}
	defer stg.Abort()
	o.progress("converting %s (%s, %d layers) to %s", src.Dir, src.Arch, src.Config.Layers, strings.ToUpper(o.Format))
	file, path := modelcache.ONNXFile, stg.Path(modelcache.ONNXFile)
	if o.Format == FormatGGUF {
		file, path = modelcache.ModelFile, stg.File()
		if err = src.WriteGGUF(path); err == nil && src.arch.decoder != "" {
			err = stg.CopyIn(promptsOnly(side)) // the prompts (Qwen3-Embedding's query instruction) stay usable
		}
	} else if err = src.WriteONNX(path); err == nil {
		err = stg.CopyIn(side)
	}
	if err != nil {
		return modelcache.Entry{}, err
	}
	size, digest, err := hfmodel.Digest(path)
	if err != nil {
		return modelcache.Entry{}, fmt.Errorf("convert: %w", err)
	}
	chain, err := hfmodel.ReadChain(src.Dir)
	if err != nil {
		return modelcache.Entry{}, fmt.Errorf("convert: %s: %w: %w", src.Dir, ErrRefused, err)
	}
	dims := chain.Dims(src.Config.HiddenSize)
	if o.Check != nil {
		d, err := o.Check(ctx, path)
		if err != nil {
			return modelcache.Entry{}, err
		}
		if d > 0 {
			dims = d
		}
	}
	name, err := pickName(st, src.Dir, o.Name, o.NameIsHint, digest)
	if err != nil {
		return modelcache.Entry{}, err
	}
	e := modelcache.Entry{Name: name, Digest: digest, Size: size, File: file, SourcePath: src.Dir,
		Stored: modelcache.StoredConverted, Architecture: src.Config.ModelType, Kind: modelcache.KindEmbed, Dims: dims,
		Context: src.context(), Quantization: "F32", Added: time.Now().UTC(), SynapseVersion: o.Version, ConvertedFrom: key}
	switch {
	case src.arch.decoder != "":
		e.Architecture, e.Context = src.arch.decoder, src.ggufContext(chain)
	case o.Format == FormatGGUF:
		e.Architecture, e.Context = "bert", min(e.Context, max(chain.MaxSeqLength, 0))
		if chain.MaxSeqLength <= 0 {
			e.Context = src.context()
		}
	}
	if src.arch.classifier {
		e.Kind = modelcache.KindRerank
	}
	e, _, err = stg.Commit(e)
	return e, err
}

// Route is the format the source converts to by default: GGUF for a
// decoder (llama.cpp runs it), ONNX for an encoder.
func (s *Source) Route() string {
	if s.arch.decoder != "" {
		return FormatGGUF
	}
	return FormatONNX
}

// context is the tokens one sequence may hold: max_position_embeddings,
// less the positions RoBERTa reserves.
func (s *Source) context() int {
	n := s.Config.MaxPositionEmbeddings
	if s.arch.offset {
		n -= s.Config.padID() + 1
	}
	return max(n, 0)
}

// pickName is the entry's name: the one given (an error when another
// model has it), else the hint or the directory's, with the digest's first eight hex
// digits appended when another model has it or "converted-" and twelve
// when it is no usable name.
func pickName(st *modelcache.Store, dir, name string, hint bool, digest string) (string, error) {
	hexd := strings.TrimPrefix(digest, "sha256:")
	given := name != "" && !hint
	if !given {
		if name == "" {
			name = strings.Join(strings.Fields(filepath.Base(dir)), "-")
		}
		if modelcache.CheckName(name) != nil {
			name = "converted-" + hexd[:12]
		}
	}
	if err := modelcache.CheckName(name); err != nil {
		return "", fmt.Errorf("convert: %w (give --name)", err)
	}
	if !given {
		return st.FreeName(name, digest), nil
	}
	entries, _ := st.Entries()
	for _, e := range entries {
		if e.Name == name {
			return "", fmt.Errorf("convert: %w: %q is %s (added from %s); give another --name", modelcache.ErrNameTaken, name, e.Digest, e.SourcePath)
		}
	}
	return name, nil
}

// promptsOnly keeps the sentence-transformers file that names the prompts
// (config_sentence_transformers.json) of a converted model's sidecars: what
// a GGUF file cannot hold and a run still needs (--prompt-name).
const promptsFile = "config_sentence_transformers.json"

func promptsOnly(side map[string]string) map[string]string {
	out := map[string]string{}
	if p, ok := side[promptsFile]; ok {
		out[promptsFile] = p
	}
	return out
}
