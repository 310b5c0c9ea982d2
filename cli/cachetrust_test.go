package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/modelcache"
)

// TestModelCacheTrust: embed -m NAME from a model cache another user owns
// (a real second uid), or that everyone may write, exits 2 before any work,
// naming the path and its owner or mode; from a cache of one's own it runs.
func TestModelCacheTrust(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(in, []byte(`{"id":"a","text":"hello"}`+"\n"), 0o644)
	tests := []struct {
		name     string
		stranger bool
		spoil    func(t *testing.T, root string)
		code     int
		want     string
	}{
		{"own", false, func(t *testing.T, root string) {}, exitOK, ""},
		{"owned by another user", true, func(t *testing.T, root string) {
			if err := os.Chown(root, testenv.StrangerUID, testenv.StrangerUID); err != nil {
				t.Fatal(err)
			}
		}, exitUsage, root0 + " is owned by uid 65534"},
		{"writable by all", false, func(t *testing.T, root string) { os.Chmod(root, 0o777) }, exitUsage, root0 + " is writable by others"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.stranger {
				testenv.Stranger(t)
			}
			root := filepath.Join(t.TempDir(), "models")
			cacheModel(t, root, tinyModel(t), "tiny-cached")
			tt.spoil(t, root)
			out := filepath.Join(t.TempDir(), "v.arrow")
			r := runSynapse(t, []string{"SYNAPSE_MODELS=" + root}, "embed", in, "-m", "tiny-cached", "-o", out, "-q", "--workers", "1")
			want := strings.ReplaceAll(tt.want, root0, root)
			if r.code != tt.code || !strings.Contains(r.stderr, want) {
				t.Errorf("exit %d, stderr %q; want exit %d saying %q", r.code, r.stderr, tt.code, want)
			}
		})
	}
}

// root0 stands for the cache's path in TestModelCacheTrust's messages.
const root0 = "ROOT"

// cacheModel adds the GGUF file at path to the store at root as name.
func cacheModel(t *testing.T, root, path, name string) {
	t.Helper()
	s, err := modelcache.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	key, err := modelcache.KeyOf(path)
	if err != nil {
		t.Fatal(err)
	}
	_, digest, err := gguf.Digest(path)
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
	if _, _, err := st.Commit(modelcache.Entry{Name: name, Digest: digest, Size: key.Size, File: modelcache.ModelFile, Stored: stored,
		Kind: modelcache.KindEmbed}); err != nil {
		t.Fatal(err)
	}
}
