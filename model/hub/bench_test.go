package hub_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/synapse-embed/synapse/model/hub"
	"github.com/synapse-embed/synapse/model/hub/hubtest"
)

// BenchmarkPull pulls a repository with a 64 MB model.safetensors from the
// local Hub (through its CDN redirect), side by side with a plain GET of
// the same file written to disk: the ratio is what checking (a sha256 pass
// over the file) and publishing cost.
//
//	go test ./model/hub -run '^$' -bench Pull -benchtime 5x
func BenchmarkPull(b *testing.B) {
	const size = 64 << 20
	srv := hubtest.New(b)
	dir := b.TempDir()
	weights := make([]byte, size)
	for i := range weights {
		weights[i] = byte(i * 7)
	}
	for name, body := range map[string][]byte{"config.json": []byte("{}"), "model.safetensors": weights} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	commit := srv.Add(b, "org/big", dir, "main")
	b.Run("pull", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			b.StopTimer()
			s := newStore(b)
			c, err := hub.NewClient(srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := c.Pull(context.Background(), s, hub.Ref{ID: "org/big"}, hub.PullOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain-get", func(b *testing.B) {
		b.SetBytes(size)
		c, _ := hub.NewClient(srv.URL)
		u := c.ResolveURL("org/big", commit, "model.safetensors")
		for b.Loop() {
			resp, err := http.Get(u)
			if err != nil {
				b.Fatal(err)
			}
			fh, err := os.Create(filepath.Join(b.TempDir(), "f"))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(fh, resp.Body); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			fh.Close()
		}
	})
}
