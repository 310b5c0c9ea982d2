//go:build cgo

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// TestHubCacheTrust: embed -m ORG/NAME from the Hugging Face cache
// ($HF_HUB_CACHE) or from the model cache's pulled models, with one level
// — the cache, models--ORG--NAME/, refs/, refs/main, snapshots/, the
// snapshot, its model.onnx — owned by another user (a real uid, 65534),
// exits 2 naming that path and its owner and the way out; with every
// level one's own it runs. models pull into a model cache whose folder of
// that model is another user's exits 2 before any network call.
func TestHubCacheTrust(t *testing.T) {
	testenv.Stranger(t)
	in := filepath.Join(t.TempDir(), "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "a", "text": "hello"}})
	commit := strings.Repeat("d", 40)
	levels := []string{"", "models--org--name", "models--org--name/refs", "models--org--name/refs/main",
		"models--org--name/snapshots", "models--org--name/snapshots/" + commit, "models--org--name/snapshots/" + commit + "/model.onnx"}
	layout := func(t *testing.T, cache string) {
		snap := filepath.Join(cache, "models--org--name", "snapshots", commit)
		enc := onnxtest.Tiny()
		enc.Hidden = 32
		if _, err := onnxtest.WriteDir(snap, onnxtest.Dir{Encoder: enc}); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(cache, "models--org--name", "refs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cache, "models--org--name", "refs", "main"), []byte(commit), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, where := range []string{"hf", "pulled"} {
		for _, level := range append([]string{"own"}, levels...) {
			t.Run(where+"/"+level, func(t *testing.T) {
				store := filepath.Join(t.TempDir(), "models")
				hf := filepath.Join(t.TempDir(), "hf")
				cache := map[string]string{"hf": hf, "pulled": filepath.Join(store, "hub")}[where]
				layout(t, cache)
				p := filepath.Join(cache, filepath.FromSlash(level))
				if level != "own" {
					if err := os.Chown(p, testenv.StrangerUID, testenv.StrangerUID); err != nil {
						t.Fatal(err)
					}
				}
				env := append(ortEnv(t), "SYNAPSE_MODELS="+store, "HF_HUB_CACHE="+hf)
				r := runSynapse(t, env, "embed", in, "-m", "org/name", "-o", filepath.Join(t.TempDir(), "v.arrow"), "-q", "--workers", "1")
				if level == "own" {
					r.wantCode(t, exitOK)
					return
				}
				r.wantCode(t, exitUsage)
				way := map[string]string{"hf": "set HF_HUB_CACHE", "pulled": "synapse models rm org/name"}[where]
				if !strings.Contains(r.stderr, p+" is owned by uid 65534") || !strings.Contains(r.stderr, way) {
					t.Errorf("stderr %q; want %s named as owned by uid 65534, and %q", r.stderr, p, way)
				}
				if where != "pulled" {
					return
				}
				r = runSynapse(t, append(env, "HF_ENDPOINT=http://127.0.0.1:9"), "models", "pull", "--attempts", "1", "org/name")
				r.wantCode(t, exitUsage)
				if !strings.Contains(r.stderr, p+" is owned by uid 65534") || !strings.Contains(r.stderr, "models rm org/name") || strings.Contains(r.stderr, "asking") {
					t.Errorf("models pull: stderr %q; want %s refused before the Hub is asked", r.stderr, p)
				}
			})
		}
	}
}
