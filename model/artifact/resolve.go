package artifact

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/modelcache"
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
}

// ErrDegraded marks a cached quantized variant refused for its measured
// quality.
var ErrDegraded = errors.New("degraded quantized variant")

// Resolve returns the file a model reference names (OpenWith's rules)
// without opening it, for commands that read only part of a model (its
// vocabulary, its metadata).
func Resolve(ref string, o Options) (string, error) {
	path, _, err := o.resolve(ref)
	return path, err
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

// resolve turns ref into a file path and the way to get its digest: an
// existing path first (its digest from the digest cache), else a cache
// entry by name or digest prefix (its digest is the entry's). A ref with a
// path separator or a .gguf suffix is only ever a path.
func (o Options) resolve(ref string) (string, digestFunc, error) {
	s := o.store()
	digest := digestFunc(gguf.Digest)
	if s != nil {
		digest = s.Digest
	}
	_, statErr := os.Stat(ref)
	if statErr == nil || !errors.Is(statErr, fs.ErrNotExist) || s == nil ||
		strings.ContainsRune(ref, os.PathSeparator) || strings.HasSuffix(strings.ToLower(ref), ".gguf") {
		return ref, digest, nil // OpenWith reports the stat error, if any
	}
	e, err := s.Lookup(ref)
	if errors.Is(err, modelcache.ErrNotFound) {
		return "", nil, fmt.Errorf("model %s: %w: neither a file nor %w", ref, fs.ErrNotExist, err)
	}
	if err != nil {
		return "", nil, fmt.Errorf("model %s: %w", ref, err)
	}
	if e.Degraded() && !o.AllowDegraded {
		return "", nil, degradedError(ref, s, e)
	}
	if e.NeedsVerify() { // another user's (root's) entry: its files are hashed again
		if err := s.Verify(e); err != nil {
			return "", nil, fmt.Errorf("model %s: %w", ref, err)
		}
	}
	known := func(string) (int64, string, error) { return e.Size, e.Digest, nil }
	return e.Path(), known, nil
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

// OpenKnown opens the GGUF file at path whose size and digest the caller
// has just computed (a file being added to the cache), without hashing it
// again or resolving it.
func OpenKnown(path string, size int64, digest string) (*Artifact, error) {
	return openGGUF(path, func(string) (int64, string, error) { return size, digest, nil })
}
