package artifact

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/model/convert"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/hub"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/onnx"
)

// Options says where OpenWith looks for models that are not files.
type Options struct {
	// Store is the model cache that names and digest prefixes resolve in
	// and whose digest cache spares hashing a big file on every run; nil
	// means the default store (modelcache.DefaultRoot, $SYNAPSE_MODELS).
	Store *modelcache.Store
	// AllowDegraded lets a name or digest prefix resolve to a quantized
	// variant whose measured quality fell below the threshold it was made
	// with; without it such a reference is ErrDegraded.
	AllowDegraded bool
	// Version is synapse's version, recorded in the entry of a directory
	// converted on first use (package convert).
	Version string
}

// ErrDegraded marks a cached quantized variant refused for its measured
// quality.
var ErrDegraded = errors.New("degraded quantized variant")

// ErrStaleVariant marks a cached ONNX int8 variant quantized by an earlier
// synapse into a graph whose vectors depend on the CPU
// (modelcache.Entry.StaleGraph): its measured quality holds only on the
// CPU class it was measured on.
var ErrStaleVariant = errors.New("int8 variant made by an earlier synapse")

// Resolve returns the file a model reference names (OpenWith's rules)
// without opening it, for commands that read only part of a model (its
// vocabulary, its metadata).
func Resolve(ref string, o Options) (string, error) {
	r, err := o.resolve(ref)
	return r.path, err
}

// Digest returns the size and digest of the model file at path, from the
// model cache when it knows them (o.Store, else the default store).
func Digest(path string, o Options) (int64, string, error) {
	if s := o.store(); s != nil {
		return s.Digest(path)
	}
	return gguf.Digest(path)
}

// digestFunc returns a file's size and digest.
type digestFunc func(path string) (int64, string, error)

// store returns the configured store, or the default one; nil when there is
// no default (no cache directory), in which case only files resolve.
func (o Options) store() *modelcache.Store {
	if o.Store != nil {
		return o.Store
	}
	s, err := modelcache.Open("")
	if err != nil {
		return nil
	}
	return s
}

// resolved is what a model reference names: the file or directory, the
// way to get its digest, and, for a hub id, the id as the model's name.
type resolved struct {
	path   string
	digest digestFunc
	name   string
	// converted says, for a safetensors directory, that it was converted
	// into the model cache now or reused from there (Artifact.Converted).
	converted string
	// given is the model as the user named it (a converted directory's
	// name, a hub id): the Artifact's Name, whatever name the model cache's
	// entry got when the same weights were first converted.
	given string
}

// resolve turns ref into a file path and the way to get its digest, in
// this order: an existing path (its digest from the digest cache); a cache
// entry by name or digest prefix (its digest is the entry's); for a hub id
// (ORG/NAME[@REVISION], package hub), its snapshot among the model cache's
// pulled models, then in the Hugging Face cache. A ref ending in .gguf or
// .onnx, or with a path separator that is no hub id, is only ever a path.
func (o Options) resolve(ref string) (resolved, error) {
	s := o.store()
	r := resolved{path: ref, digest: gguf.Digest}
	if s != nil {
		r.digest = s.Digest
	}
	id, idErr := hub.ParseRef(ref)
	lower := strings.ToLower(ref)
	_, statErr := os.Stat(ref)
	if statErr == nil && convert.IsSource(ref) && !hfmodel.IsStatic(ref) { // a static model runs as it is
		r, err := o.resolveConverted(ref, "", s)
		r.given = filepath.Base(filepath.Clean(ref))
		return r, err
	}
	if statErr == nil || !errors.Is(statErr, fs.ErrNotExist) || strings.HasSuffix(lower, ".gguf") || strings.HasSuffix(lower, ".onnx") ||
		(idErr != nil && (s == nil || strings.ContainsRune(ref, os.PathSeparator))) {
		return r, nil // OpenWith reports the stat error, if any
	}
	var lookupErr error
	if s != nil && !strings.ContainsRune(ref, '/') {
		e, err := s.Lookup(ref)
		switch {
		case err == nil && e.StaleGraph(onnx.QuantForm):
			return resolved{}, StaleError(ref, e)
		case err == nil && e.Degraded() && !o.AllowDegraded:
			return resolved{}, degradedError(ref, s, e)
		case err == nil:
			if e.NeedsVerify() { // another user's (root's) entry: its files are hashed again
				if err := s.Verify(e); err != nil {
					return resolved{}, fmt.Errorf("model %s: %w", ref, err)
				}
			}
			known := func(string) (int64, string, error) { return e.Size, e.Digest, nil }
			return resolved{path: e.Path(), digest: known}, nil
		case !errors.Is(err, modelcache.ErrNotFound):
			return resolved{}, fmt.Errorf("model %s: %w", ref, err)
		}
		lookupErr = err
	}
	if idErr != nil {
		return resolved{}, fmt.Errorf("model %s: %w: neither a file nor %w", ref, fs.ErrNotExist, lookupErr)
	}
	r, err := o.resolveHub(id, s)
	if err == nil && convert.IsSource(r.path) && !hfmodel.IsStatic(r.path) { // a snapshot with safetensors weights and no ONNX export
		r, err = o.resolveConverted(r.path, strings.ReplaceAll(id.String(), "/", "--"), s)
		r.given = id.String()
		if errors.Is(err, convert.ErrRefused) {
			err = fmt.Errorf("%w; `synapse models pull %s --onnx` fetches its ONNX export, where the repository has one", err, id)
		}
	}
	return r, err
}

// resolveConverted converts a Hugging Face safetensors directory into the
// model cache, or finds it converted there already, and resolves to the
// entry.
// name is the entry's name when it is a new one ("": the directory's).
func (o Options) resolveConverted(dir, name string, s *modelcache.Store) (resolved, error) {
	if s == nil {
		return resolved{}, fmt.Errorf("model %s: %w: converting a safetensors directory needs the model cache, and there is none (set %s)", dir, ErrInvalid, modelcache.EnvDir)
	}
	// Nothing enters the cache before it opens as a model (an ONNX
	// directory, or a GGUF file with its vocabulary): a tokenizer synapse
	// cannot compile, say, is refused before the commit.
	check := func(_ context.Context, file string) (int, error) {
		var err error
		if strings.EqualFold(filepath.Ext(file), ".onnx") {
			_, err = openONNX(file)
		} else {
			_, err = openGGUF(file, func(string) (int64, string, error) { return 0, "", nil }) // the commit hashes it
		}
		if err != nil {
			return 0, fmt.Errorf("%w: the converted model: %w", ErrInvalid, err)
		}
		return 0, nil
	}
	res, err := convert.Cached(context.Background(), s, dir, convert.Options{Version: o.Version, Name: name, NameIsHint: true, Check: check})
	if errors.Is(err, convert.ErrRefused) {
		return resolved{}, fmt.Errorf("model %s: %w: %w", dir, ErrInvalid, err)
	}
	if err != nil {
		return resolved{}, fmt.Errorf("model %s: %w", dir, err)
	}
	e := res.Entry
	note := fmt.Sprintf("converted %s to ONNX into the model cache as %s (%s)", dir, e.Name, e.Short())
	if res.Reused {
		// Not the entry's source path: another user's folder, maybe, and
		// not what this run was given.
		note = fmt.Sprintf("%s: reusing its ONNX conversion in the model cache (%s), made before from the same files", dir, e.Short())
	}
	known := func(string) (int64, string, error) { return e.Size, e.Digest, nil }
	return resolved{path: e.Path(), digest: known, converted: note}, nil
}

// resolveHub finds a hub id's snapshot: among the model cache's pulled
// models, then in the Hugging Face cache. Not found, the error names the
// places searched and how to get it.
func (o Options) resolveHub(id hub.Ref, s *modelcache.Store) (resolved, error) {
	hfDir, from, hfErr := hub.CacheDir()
	var dirs []string
	format, args := "model %s: %w as a path", []any{id, fs.ErrNotExist}
	if s != nil {
		dirs = append(dirs, hub.StoreDir(s))
		format, args = format+"; %w (%s: no such name, nor pulled into it)", append(args, modelcache.ErrNotFound, s.Root)
	}
	if hfErr == nil {
		dirs = append(dirs, hfDir)
		format, args = format+"; not in the Hugging Face cache (%s, %s)", append(args, hfDir, hfCacheFrom(from))
	}
	var details []string
	for _, d := range dirs {
		snap, err := hub.Snapshot(d, id)
		if err == nil {
			return resolved{path: snap, digest: hfmodel.Digest, name: id.String()}, nil
		}
		if errors.Is(err, hub.ErrUnsafeLink) {
			return resolved{}, fmt.Errorf("model %s: %w: %w", id, ErrInvalid, err)
		}
		if errors.Is(err, files.ErrUntrusted) {
			hint := fmt.Sprintf("use a Hugging Face cache of your own (set HF_HUB_CACHE; one made under umask 002 needs `chmod -R go-w` on %s), or `synapse models pull %s` into your model cache", filepath.Join(d, id.Folder()), id)
			if s != nil && d == hub.StoreDir(s) {
				hint = fmt.Sprintf("remove it (`synapse models rm %s`) and pull it again, or use a model cache of your own (set %s)", id, modelcache.EnvDir)
			}
			return resolved{}, fmt.Errorf("model %s: %w; %s", id, err, hint)
		}
		if _, statErr := os.Stat(filepath.Join(d, id.Folder())); statErr == nil {
			details = append(details, err.Error())
		}
	}
	format, args = format+"; get it with `synapse models pull %s`", append(args, id)
	if len(details) > 0 {
		format, args = format+" (%s)", append(args, strings.Join(details, "; "))
	}
	return resolved{}, fmt.Errorf(format, args...)
}

// hfCacheFrom says which variable chose the Hugging Face cache.
func hfCacheFrom(from string) string {
	if from == "default" {
		return "the default; HF_HUB_CACHE or HF_HOME set another"
	}
	return "from " + from
}

// degradedError says why a degraded variant is refused, with the measured
// figures.
func degradedError(ref string, s *modelcache.Store, e modelcache.Entry) error {
	src := e.Of
	if se, ok, _ := s.Get(e.Of); ok {
		src = se.Name
	}
	q := e.Quality
	return fmt.Errorf("model %s: %w: %s is %s quantized from %s, and its vectors' cosine to the source's is %.4f at worst (mean %.4f over %d texts), below the %.4g it was made with; use %s, or pass --allow-degraded to use it anyway",
		ref, ErrDegraded, e.Name, e.Quantization, src, q.MinCosine, q.MeanCosine, q.Texts, q.MinCosineRequired, src)
}

// StaleError says why the stale variant e (Entry.StaleGraph) is refused
// and how to make it again.
func StaleError(ref string, e modelcache.Entry) error {
	where := "an unrecorded CPU"
	if e.Quality != nil && e.Quality.CPU != "" {
		where = "a CPU of class " + e.Quality.CPU
	}
	return fmt.Errorf("model %s: %w: %s has 8-bit weights, which ONNX Runtime's int8 kernels sum with saturation on CPUs without VNNI (AVX2, AVX-512 without VNNI), so its measured quality (on %s) does not hold on every CPU; make it again in this synapse's form, the same on every CPU: `synapse models rm %s` and `synapse models add SOURCE --quantize int8` (or `embed --quantize int8`, which remakes a variant of yours by itself)",
		ref, ErrStaleVariant, e.Name, where, e.Name)
}

// OpenKnown opens the GGUF file at path whose size and digest the caller
// has just computed (a file being added to the cache), without hashing it
// again or resolving it.
func OpenKnown(path string, size int64, digest string) (*Artifact, error) {
	return openGGUF(path, func(string) (int64, string, error) { return size, digest, nil })
}
