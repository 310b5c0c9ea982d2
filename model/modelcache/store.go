// Package modelcache is synapse's content-addressed store of models: each
// model file kept once under its SHA-256 with an entry describing it, names
// and digest prefixes to find it by, and a small cache of file digests so
// that a big model is hashed once rather than on every run.
//
// Layout of a store (Root):
//
//	sha256-<hex>/model.gguf    the model (a hard link to the added file, or a copy)
//	sha256-<hex>/model.onnx    or an ONNX model's graph (<hex> is its digest), with the
//	sha256-<hex>/tokenizer.json, config.json, …  model directory's other files copied beside it
//	sha256-<hex>/entry.json    its Entry
//	sha256-<hex>.<key>/…       the same model file with other files beside it (filesDirName)
//	digests.json               digests of files outside the store, by (path, size, mtime, inode)
//	tmp/<id>, tmp/<id>.lock    entries being written; renamed into place when complete
//	locks/<key>.lock           serialises concurrent additions of one model
//	.lock                      held briefly while entries are committed or removed
//
// An entry directory appears by rename, complete, or not at all: an
// interrupted addition leaves only a tmp/ directory, which the next writer
// removes once its lock shows that its process is gone.
package modelcache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/readlimit"
)

// File names inside a store.
const (
	EntryFile = "entry.json"
	ModelFile = "model.gguf"
	ONNXFile  = "model.onnx" // an ONNX model's graph
)

const digestPrefix = "sha256:"

// ErrNotFound is returned for a name or digest prefix no entry has.
var ErrNotFound = errors.New("not in the model cache")

// AmbiguousError is returned for a digest prefix several entries share.
type AmbiguousError struct {
	Ref     string
	Matches []Entry
}

func (e *AmbiguousError) Error() string {
	var names []string
	same := true
	for _, m := range e.Matches {
		names = append(names, m.Short()+" ("+m.Name+")")
		same = same && m.Digest == e.Matches[0].Digest
	}
	if same { // one model file with other files beside it: more digits cannot tell them apart
		return fmt.Sprintf("modelcache: digest prefix %q is ambiguous: %s share the model file, each with other files beside it; name one", e.Ref, strings.Join(names, ", "))
	}
	return fmt.Sprintf("modelcache: digest prefix %q is ambiguous: %s; give more digits", e.Ref, strings.Join(names, ", "))
}

// Store is a model store rooted at a directory, which is created when the
// first entry (or digest) is written.
type Store struct {
	Root string
}

// EnvDir is the environment variable that overrides the default store.
const EnvDir = "SYNAPSE_MODELS"

// DefaultRoot is $SYNAPSE_MODELS, else $XDG_CACHE_HOME/synapse/models, else
// ~/.cache/synapse/models.
func DefaultRoot() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return filepath.Abs(d)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("modelcache: no cache directory (set %s or XDG_CACHE_HOME): %w", EnvDir, err)
	}
	return filepath.Join(base, "synapse", "models"), nil
}

// Open returns the store at root, or at DefaultRoot when root is "".
func Open(root string) (*Store, error) {
	if root == "" {
		var err error
		if root, err = DefaultRoot(); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("modelcache: %w", err)
	}
	return &Store{Root: abs}, nil
}

// dirName is an entry's directory name for a digest.
func dirName(digest string) string {
	return "sha256-" + strings.TrimPrefix(digest, digestPrefix)
}

// filesDirName is the directory name of an entry whose model file an
// entry at dirName(digest) has already, with other files beside it:
// dirName, a dot and 16 hex digits of the SHA-256 of the other files'
// names and digests (Entry.Files), so that an edited tokenizer.json or
// module config makes an entry of its own.
func filesDirName(digest string, files map[string]string) string {
	h := sha256.New()
	for _, n := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s\x00%s\n", n, files[n])
	}
	return dirName(digest) + "." + hex.EncodeToString(h.Sum(nil))[:16]
}

// HashFiles returns the digests ("sha256:<hex>") of files (a name in an
// entry → the path it is read from, as Staging.CopyIn takes them), by
// name: the Files an entry made of them records.
func HashFiles(files map[string]string) (map[string]string, error) {
	if len(files) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(files))
	for n, p := range files {
		d, err := hashFile(p)
		if err != nil {
			return nil, fmt.Errorf("modelcache: %w", err)
		}
		out[n] = d
	}
	return out, nil
}

// Entries returns the store's entries sorted by name. Entries that cannot be
// read are left out and reported, joined, in the error; the others are still
// returned. A store that does not exist yet is empty.
func (s *Store) Entries() ([]Entry, error) {
	if err := s.checkRoot(); err != nil {
		return nil, err
	}
	des, err := os.ReadDir(s.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("modelcache: %w", err)
	}
	var out []Entry
	var bad []error
	for _, de := range des {
		if !de.IsDir() || !strings.HasPrefix(de.Name(), "sha256-") {
			continue
		}
		e, err := readEntry(filepath.Join(s.Root, de.Name()))
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(bad...)
}

// Get returns the entry of a full digest ("sha256:<hex>").
func (s *Store) Get(digest string) (Entry, bool, error) {
	if err := s.checkRoot(); err != nil {
		return Entry{}, false, err
	}
	e, err := readEntry(filepath.Join(s.Root, dirName(digest)))
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	return e, true, nil
}

// GetFiles returns the entry of a full digest whose other files (Files)
// are files: the one at dirName(digest), or the one beside it that an
// edited sidecar made (filesDirName).
func (s *Store) GetFiles(digest string, files map[string]string) (Entry, bool, error) {
	for _, dir := range []string{dirName(digest), filesDirName(digest, files)} {
		if err := s.checkRoot(); err != nil {
			return Entry{}, false, err
		}
		e, err := readEntry(filepath.Join(s.Root, dir))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return Entry{}, false, err
		case maps.Equal(e.Files, files):
			return e, true, nil
		}
	}
	return Entry{}, false, nil
}

// FreeName is name when no entry has it, else a name derived from it that
// none has: name-<8 hex digits of digest>, then with -2, -3, … after it
// (entries of one model file with other files beside it share the digits).
func (s *Store) FreeName(name, digest string) string {
	entries, _ := s.Entries()
	taken := map[string]bool{}
	for _, e := range entries {
		taken[e.Name] = true
	}
	if !taken[name] {
		return name
	}
	base := name + "-" + strings.TrimPrefix(digest, digestPrefix)[:8]
	name = base
	for n := 2; taken[name]; n++ {
		name = fmt.Sprintf("%s-%d", base, n)
	}
	return name
}

// Lookup finds an entry by name, or by a digest prefix of at least four hex
// digits, written bare, as "sha256:<hex>" or as "sha256-<hex>". A name wins
// over a digest prefix. Unknown refs are ErrNotFound; a prefix several
// entries share is *AmbiguousError.
func (s *Store) Lookup(ref string) (Entry, error) {
	entries, listErr := s.Entries()
	if errors.Is(listErr, files.ErrUntrusted) || errors.Is(listErr, readlimit.ErrNotRegular) {
		return Entry{}, listErr // any entry might be the one another user planted
	}
	for _, e := range entries {
		if e.Name == ref {
			return e, nil
		}
	}
	if hexd, ok := digestPrefixOf(ref); ok {
		var matches []Entry
		for _, e := range entries {
			if strings.HasPrefix(strings.TrimPrefix(e.Digest, digestPrefix), hexd) {
				matches = append(matches, e)
			}
		}
		switch len(matches) {
		case 1:
			return matches[0], nil
		case 0:
		default:
			return Entry{}, &AmbiguousError{Ref: ref, Matches: matches}
		}
	}
	err := fmt.Errorf("modelcache: %q: no model of that name or digest prefix %w at %s (see `synapse models ls`)", ref, ErrNotFound, s.Root)
	if listErr != nil {
		err = fmt.Errorf("%w; unreadable entries: %w", err, listErr)
	}
	return Entry{}, err
}

// digestPrefixOf returns the lower-case hex digits of a digest reference.
func digestPrefixOf(ref string) (string, bool) {
	h := strings.ToLower(ref)
	h = strings.TrimPrefix(strings.TrimPrefix(h, "sha256:"), "sha256-")
	if len(h) < 4 || len(h) > 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return "", false
	}
	return h, true
}

// Variant returns the entry quantized from src to file type ftype (a
// gguf.FileType name such as "Q8_0"), if there is one: its Of is src's
// digest and it carries src's other files (an ONNX variant's tokenizer and
// configs are its source's).
func (s *Store) Variant(src Entry, ftype string) (Entry, bool, error) {
	entries, err := s.Entries()
	for _, e := range entries {
		if e.Of == src.Digest && strings.EqualFold(e.Quantization, ftype) && maps.Equal(e.Files, src.Files) {
			return e, true, nil
		}
	}
	return Entry{}, false, err
}

// Converted returns the entry converted with key (Entry.ConvertedFrom), if
// there is one.
func (s *Store) Converted(key string) (Entry, bool, error) {
	entries, err := s.Entries()
	for _, e := range entries {
		if e.ConvertedFrom == key {
			return e, true, nil
		}
	}
	return Entry{}, false, err
}

// Remove deletes an entry: its directory is renamed away under the store's
// lock, so that readers see it whole or not at all, then removed. A hard
// link's source file is not touched.
func (s *Store) Remove(e Entry) error {
	if filepath.Dir(e.dir) != s.Root {
		return fmt.Errorf("modelcache: remove %s: not an entry of %s", e.dir, s.Root)
	}
	unlock, err := s.lockStore()
	if err != nil {
		return err
	}
	trash, err := os.MkdirTemp(s.tmpDir(), "rm-")
	if err == nil {
		err = os.Rename(e.dir, filepath.Join(trash, "entry"))
	}
	unlock()
	if err != nil {
		return fmt.Errorf("modelcache: remove %s: %w", e.Name, err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("modelcache: remove %s: %w", e.Name, err)
	}
	return nil
}

// EntryFor returns the entry whose model file path is, when path lies in an
// entry directory of any trusted store and this user owns the entry: its
// digest is then known without hashing.
func EntryFor(path string) (Entry, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Entry{}, false
	}
	dir := filepath.Dir(abs)
	if !strings.HasPrefix(filepath.Base(dir), "sha256-") {
		return Entry{}, false
	}
	if _, err := files.TrustedPath(filepath.Dir(dir)); err != nil {
		return Entry{}, false // hashed as any file is
	}
	e, err := readEntry(dir)
	if err != nil || e.File != filepath.Base(abs) || e.NeedsVerify() {
		return Entry{}, false
	}
	return e, true
}
