package artifact

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/modelcache"
)

// cached writes a generated model, adds it to a new store as name (with
// quality q, if not nil) and returns the store, the file and the entry.
func cached(t *testing.T, name string, q *modelcache.Quality) (*modelcache.Store, string, modelcache.Entry) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.TinyEmbedder(modelgen.WordPieceVocab(modelgen.DemoWords)).Write(path); err != nil {
		t.Fatal(err)
	}
	s, err := modelcache.Open(filepath.Join(t.TempDir(), "models"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := modelcache.KeyOf(path)
	if err != nil {
		t.Fatal(err)
	}
	size, digest, err := s.Digest(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stage()
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.Put(path, key, digest)
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := st.Commit(modelcache.Entry{Name: name, Digest: digest, Size: size, File: modelcache.ModelFile, Stored: stored, Quality: q})
	if err != nil {
		t.Fatal(err)
	}
	return s, path, e
}

func TestOpenResolvesCacheRefs(t *testing.T) {
	s, path, e := cached(t, "tiny", nil)
	o := Options{Store: s}
	byPath, err := OpenWith(path, o)
	if err != nil {
		t.Fatal(err)
	}
	if byPath.Path != path || byPath.Digest != e.Digest || byPath.Entry != nil {
		t.Errorf("by path: got %s %s entry %v; want the user's file, %s, no entry", byPath.Path, byPath.Digest, byPath.Entry, e.Digest)
	}
	hexd := strings.TrimPrefix(e.Digest, "sha256:")
	for _, ref := range []string{"tiny", hexd[:8], "sha256:" + hexd[:12], e.Path()} {
		a, err := OpenWith(ref, o)
		if err != nil {
			t.Fatalf("OpenWith(%q): %v", ref, err)
		}
		if a.Path != e.Path() || a.Digest != e.Digest || a.Entry == nil || a.Entry.Name != "tiny" || a.Name != "tiny" {
			t.Errorf("OpenWith(%q): got %s %s %q entry %v; want the cached file %s", ref, a.Path, a.Digest, a.Name, a.Entry, e.Path())
		}
		if a.Tokenizer == nil || a.Arch != "bert" {
			t.Errorf("OpenWith(%q): got arch %q tokenizer %v; want a bert model with its tokenizer", ref, a.Arch, a.Tokenizer)
		}
	}
	// The default store is $SYNAPSE_MODELS.
	t.Setenv(modelcache.EnvDir, s.Root)
	if a, err := Open("tiny"); err != nil || a.Path != e.Path() {
		t.Errorf("Open(tiny) with %s set: got %v; want %s", modelcache.EnvDir, err, e.Path())
	}
}

func TestOpenUnknownRefs(t *testing.T) {
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	s, _, _ := cached(t, "tiny", nil)
	o := Options{Store: s}
	tests := []struct {
		ref       string
		notFound  bool // the cache was asked
		wantInMsg string
	}{
		{"no-such-model", true, "get it with `synapse models pull no-such-model`"}, // a hub id
		{"no such model", true, "neither a file nor"},
		{"missing.gguf", false, "missing.gguf"},
		{filepath.Join(t.TempDir(), "gone"), false, "gone"},
	}
	for _, tt := range tests {
		_, err := OpenWith(tt.ref, o)
		if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, modelcache.ErrNotFound) != tt.notFound || !strings.Contains(err.Error(), tt.wantInMsg) {
			t.Errorf("OpenWith(%q): got %v; want fs.ErrNotExist (cache asked: %t) mentioning %q", tt.ref, err, tt.notFound, tt.wantInMsg)
		}
	}
}

func TestOpenDegraded(t *testing.T) {
	q := &modelcache.Quality{MinCosine: 0.9812, MeanCosine: 0.9934, Texts: 24, MinCosineRequired: 0.999, Degraded: true}
	s, _, e := cached(t, "tiny:q2_k", q)
	_, err := OpenWith("tiny:q2_k", Options{Store: s})
	if !errors.Is(err, ErrDegraded) || !strings.Contains(err.Error(), "0.9812") || !strings.Contains(err.Error(), "--allow-degraded") {
		t.Fatalf("degraded by name: got %v; want ErrDegraded with the measured 0.9812 and the flag", err)
	}
	if a, err := OpenWith("tiny:q2_k", Options{Store: s, AllowDegraded: true}); err != nil || a.Path != e.Path() {
		t.Errorf("degraded with AllowDegraded: got %v; want %s", err, e.Path())
	}
	if _, err := OpenWith(e.Path(), Options{Store: s}); err != nil {
		t.Errorf("degraded variant named by its path: got %v; want it opened (the user named the file)", err)
	}
}
