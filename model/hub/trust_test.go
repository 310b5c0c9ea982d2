package hub

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/files"
)

// TestSnapshotTrustEveryLevel: a Hugging Face cache repository with any
// one level — the cache, models--ORG--NAME/, refs/, a ref, snapshots/, a
// snapshot, a directory in it, a link in it, blobs/, a blob, partial/ and
// a file there — owned by another user (a real uid, 65534), or writable
// by others, is refused with ErrUntrusted naming that path; the folder as
// a link into another user's directory is refused too; the same cache of
// one's own resolves.
func TestSnapshotTrustEveryLevel(t *testing.T) {
	commit := strings.Repeat("c", 40)
	files := map[string]string{"config.json": "{}", "onnx/model.onnx": "graph"}
	blob := commit[:8] + "-onnx_model.onnx"
	levels := []string{"", "models--org--name", "models--org--name/refs", "models--org--name/refs/main",
		"models--org--name/snapshots", "models--org--name/snapshots/" + commit, "models--org--name/snapshots/" + commit + "/onnx",
		"models--org--name/snapshots/" + commit + "/config.json", "models--org--name/blobs", "models--org--name/blobs/" + blob,
		"models--org--name/partial", "models--org--name/partial/" + commit + "/model.safetensors"}
	setup := func(t *testing.T) string {
		cache := filepath.Join(t.TempDir(), "hub")
		hfLayout(t, cache, "models--org--name", commit, files, "main")
		mustWrite(t, filepath.Join(cache, "models--org--name", "partial", commit, "model.safetensors"), "half")
		return cache
	}
	ref := Ref{ID: "org/name"}
	if _, err := Snapshot(setup(t), ref); err != nil {
		t.Fatalf("a cache of one's own: %v", err)
	}
	for _, level := range levels {
		t.Run("owned/"+level, func(t *testing.T) {
			testenv.Stranger(t)
			cache := setup(t)
			p := filepath.Join(cache, filepath.FromSlash(level))
			if err := os.Lchown(p, testenv.StrangerUID, testenv.StrangerUID); err != nil {
				t.Fatal(err)
			}
			wantRefused(t, cache, ref, p+" is owned by uid 65534")
		})
	}
	for _, level := range []string{"", "models--org--name/refs", "models--org--name/blobs/" + blob, "models--org--name/partial"} {
		t.Run("writable/"+level, func(t *testing.T) {
			cache := setup(t)
			p := filepath.Join(cache, filepath.FromSlash(level))
			if err := os.Chmod(p, 0o777); err != nil {
				t.Fatal(err)
			}
			wantRefused(t, cache, ref, p+" is writable by others")
		})
	}
	t.Run("folder linked into another user's directory", func(t *testing.T) {
		testenv.Stranger(t)
		cache := setup(t)
		hers := filepath.Join(t.TempDir(), "hers")
		folder := filepath.Join(cache, "models--org--name")
		if err := os.Rename(folder, hers); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(hers, folder); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(hers, testenv.StrangerUID, testenv.StrangerUID); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, cache, ref, hers+" is owned by uid 65534")
	})
}

// wantRefused checks that Snapshot refuses ref in cache as untrusted,
// saying want.
func wantRefused(t *testing.T, cache string, ref Ref, want string) {
	t.Helper()
	snap, err := Snapshot(cache, ref)
	if !errors.Is(err, files.ErrUntrusted) || !strings.Contains(err.Error(), want) {
		t.Errorf("Snapshot: %q, %v; want ErrUntrusted saying %q", snap, err, want)
	}
}
