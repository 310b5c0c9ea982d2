package artifact

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/hub"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// hfCached writes a generated ONNX model directory into the Hugging Face
// cache at cache as huggingface_hub lays one out: each file a blob, the
// snapshot's files symbolic links to ../../blobs/…, refs/main naming the
// commit. It returns the snapshot directory.
func hfCached(t *testing.T, cache, id, commit string, seed uint64) string {
	t.Helper()
	src := t.TempDir()
	if _, err := onnxtest.WriteDir(src, onnxtest.Dir{Encoder: onnxtest.Encoder{Hidden: 8, Positions: 32, Seed: seed}}); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(cache, hub.Ref{ID: id}.Folder())
	snap := filepath.Join(repo, "snapshots", commit)
	for _, d := range []string{filepath.Join(repo, "blobs"), snap, filepath.Join(repo, "refs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	des, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		blob := filepath.Join(repo, "blobs", commit[:6]+"-"+de.Name())
		if err := os.Rename(filepath.Join(src, de.Name()), blob); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "..", "blobs", filepath.Base(blob)), filepath.Join(snap, de.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestOpenHubIDs(t *testing.T) {
	hf := t.TempDir()
	t.Setenv("HF_HUB_CACHE", hf)
	s, _, _ := cached(t, "tiny", nil)
	o := Options{Store: s}
	c1, c2 := strings.Repeat("1", 40), strings.Repeat("2", 40)
	inHF := hfCached(t, hf, "org/minilm", c1, 1)
	hfCached(t, hf, "org/both", c1, 2)
	pulled := hfCached(t, hub.StoreDir(s), "org/both", c2, 3) // the model cache's pulled models come first
	hfCached(t, hf, "tiny", c1, 4)                            // a cache name comes before a hub id
	tests := []struct {
		ref, wantDir, wantName string
	}{
		{"org/minilm", inHF, "org/minilm"},
		{"org/minilm@main", inHF, "org/minilm@main"},
		{"org/minilm@" + c1, inHF, "org/minilm@" + c1},
		{"org/both", pulled, "org/both"},
	}
	for _, tt := range tests {
		a, err := OpenWith(tt.ref, o)
		if err != nil {
			t.Fatalf("OpenWith(%q): %v", tt.ref, err)
		}
		if a.Path != filepath.Join(tt.wantDir, "model.onnx") || a.Format != FormatONNX || a.Name != tt.wantName || a.Tokenizer == nil {
			t.Errorf("OpenWith(%q): got %s %s named %q; want %s/model.onnx, onnx, named %q", tt.ref, a.Path, a.Format, a.Name, tt.wantDir, tt.wantName)
		}
		if p, err := Resolve(tt.ref, o); err != nil || p != tt.wantDir {
			t.Errorf("Resolve(%q): got %s, %v; want %s", tt.ref, p, err, tt.wantDir)
		}
	}
	if a, err := OpenWith("tiny", o); err != nil || a.Format != FormatGGUF || a.Name != "tiny" {
		t.Errorf("OpenWith(tiny) with models--tiny in the Hugging Face cache: got %v; want the cached GGUF model named tiny", err)
	}
	// A path that exists wins over a hub id.
	work := t.TempDir()
	t.Chdir(work)
	if _, err := onnxtest.WriteDir(filepath.Join(work, "org", "minilm"), onnxtest.Dir{Encoder: onnxtest.Tiny()}); err != nil {
		t.Fatal(err)
	}
	if a, err := OpenWith("org/minilm", o); err != nil || a.Path != filepath.Join(work, "org", "minilm", "model.onnx") {
		t.Errorf("OpenWith(org/minilm) with ./org/minilm on disk: got %v; want the directory on disk", err)
	}
}

func TestOpenHubIDsNotFound(t *testing.T) {
	hf := t.TempDir()
	t.Setenv("HF_HUB_CACHE", hf)
	s, _, _ := cached(t, "tiny", nil)
	o := Options{Store: s}
	hfCached(t, hf, "org/other-rev", strings.Repeat("1", 40), 1)
	os.Remove(filepath.Join(hf, "models--org--other-rev", "refs", "main"))
	escaping := hfCached(t, hf, "org/escaping", strings.Repeat("2", 40), 2)
	secret := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(secret, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(escaping, "config.json"))
	if err := os.Symlink(secret, filepath.Join(escaping, "config.json")); err != nil {
		t.Fatal(err)
	}
	safetensorsOnly := filepath.Join(hub.StoreDir(s), "models--org--st-only", "snapshots", strings.Repeat("3", 40))
	if err := os.MkdirAll(safetensorsOnly, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors"} {
		if err := os.WriteFile(filepath.Join(safetensorsOnly, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(filepath.Dir(filepath.Dir(safetensorsOnly)), "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(filepath.Dir(safetensorsOnly)), "refs", "main"), []byte(strings.Repeat("3", 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref     string
		want    error
		wantMsg []string
	}{
		{"org/st-only", ErrInvalid, []string{"cannot convert", "no architectures", "synapse models pull org/st-only --onnx"}},
		{"org/none", fs.ErrNotExist, []string{"file does not exist as a path", s.Root, hf + ", from HF_HUB_CACHE", "synapse models pull org/none"}},
		{"org/other-rev", fs.ErrNotExist, []string{"name one as org/other-rev@" + strings.Repeat("1", 40)}},
		{"org/escaping", ErrInvalid, []string{"outside"}},
	}
	for _, tt := range tests {
		_, err := OpenWith(tt.ref, o)
		if !errors.Is(err, tt.want) || !Unusable(err) {
			t.Errorf("OpenWith(%q): got %v; want %v, unusable", tt.ref, err, tt.want)
			continue
		}
		for _, m := range tt.wantMsg {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("OpenWith(%q): got %v; want it to say %q", tt.ref, err, m)
			}
		}
	}
	if _, err := OpenWith("org/none", o); !errors.Is(err, modelcache.ErrNotFound) {
		t.Errorf("OpenWith(org/none): got %v; want modelcache.ErrNotFound too (the cache was asked)", err)
	}
}
