package artifact

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/convert/converttest"
	"github.com/synapse-embed/synapse/model/hub"
	"github.com/synapse-embed/synapse/model/modelcache"
)

// TestOpenConvertsSafetensors: a safetensors directory given as a path,
// and a pulled snapshot of one named by its hub id, open as the model
// cache's ONNX conversion, saying whether it was converted or reused.
func TestOpenConvertsSafetensors(t *testing.T) {
	s, err := modelcache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HF_HUB_CACHE", t.TempDir()) // no Hugging Face cache of the user's
	dir := filepath.Join(t.TempDir(), "tiny-bert")
	if err := converttest.Tiny().WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	a, err := OpenWith(dir, Options{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if a.Format != FormatONNX || a.Entry == nil || a.Entry.Name != "tiny-bert" || !strings.HasPrefix(a.Converted, "converted "+dir) {
		t.Errorf("first open: format %s, entry %v, converted %q; want the cache's ONNX conversion tiny-bert, converted now", a.Format, a.Entry, a.Converted)
	}
	again, err := OpenWith(dir, Options{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != a.Digest || !strings.HasPrefix(again.Converted, dir+": reusing its ONNX conversion") || again.Name != "tiny-bert" {
		t.Errorf("second open: digest %s (first %s), converted %q; want the first entry reused", again.Digest, a.Digest, again.Converted)
	}

	// A pulled snapshot: other weights (another seed), so another conversion.
	const commit = "0123456789abcdef0123456789abcdef01234567"
	id, err := hub.ParseRef("org/tiny-st")
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(hub.StoreDir(s), id.Folder())
	b := converttest.Tiny()
	b.Seed = 9
	if err := b.WriteDir(filepath.Join(repo, "snapshots", commit)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := OpenWith("org/tiny-st", Options{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if h.Entry == nil || h.Entry.Name != "org--tiny-st" || h.Digest == a.Digest {
		t.Errorf("hub id: entry %v, digest %s; want a new conversion named org--tiny-st", h.Entry, h.Digest)
	}
}
