package supervise

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/gguf"
	"github.com/synapse-embed/synapse/internal/testenv"
	"github.com/synapse-embed/synapse/internal/testmodels"
	"github.com/synapse-embed/synapse/wire"
)

// The real worker (`synapse worker`) on a generated BERT embedder
// (testmodels.Embedder) with the SYNAPSE_CHAOS drills: the same story as
// the helper tests.

// realConfig returns a pool config for `synapse worker`; it fails the test
// when synapse does not build.
func realConfig(t testing.TB, chaos string) (Config, wire.Load) {
	t.Helper()
	lib := testenv.LlamaLib(t)
	model := testmodels.Embedder(t)
	bin := testenv.Binary(t) // a build failure fails the test
	_, digest, err := gguf.Digest(model)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Command:         []string{bin, "worker"},
		Env:             []string{"SYNAPSE_LLAMA_LIB=" + lib, "SYNAPSE_CHAOS=" + chaos},
		RuntimeDir:      shortDir(t),
		StartTimeout:    waitBound,
		ShutdownTimeout: waitBound,
		RestartBackoff:  -1,
		PingInterval:    -1,
	}
	load := wire.Load{ArtifactPath: model, ArtifactDigest: digest, Format: "gguf",
		RuntimeConfig: wire.RuntimeConfig{Embeddings: true, Threads: 1}}
	return cfg, load
}

// poison is the token the drills react to and word a token they do not;
// the generated vocabulary (about 1,800 tokens) holds both.
const (
	poison = 1500
	word   = 1000
)

func TestRealWorkerDrills(t *testing.T) {
	tests := []struct {
		name    string
		chaos   string
		timeout time.Duration
		stage   []string // any of
		signal  string
		status  int
		tail    string
	}{
		{"abort", "abort-on-token=1500", time.Minute, []string{"recv"}, "SIGABRT", -1, ""},
		{"hang", "hang-on-token=1500", 500 * time.Millisecond, []string{"timeout"}, "SIGKILL", -1, ""},
		{"exit-after", "exit-after=3", time.Minute, []string{"send", "recv"}, "", 1, ""}, // LOAD, 2×embed, then exit
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, load := realConfig(t, tt.chaos)
			p := startPool(t, cfg)
			ctx := context.Background()
			loaded, err := p.Load(ctx, load) // request 1
			if err != nil {
				t.Fatalf("Load: %v\n%s", err, p.LogTail(p.Health().Workers[0].ID, 4<<10))
			}
			if loaded.Dims <= 0 {
				t.Fatalf("Load: got dims %d", loaded.Dims)
			}
			for range 2 { // requests 2 and 3
				if _, err := p.Do(ctx, embed(loaded.ModelRef, []int32{101, word, 102}), time.Minute); err != nil {
					t.Fatalf("embed: %v", err)
				}
			}
			err = bounded(t, "Do", func() error {
				_, err := p.Do(ctx, embed(loaded.ModelRef, []int32{101, poison, 102}), tt.timeout)
				return err
			})
			var ce *CrashError
			if !errors.As(err, &ce) {
				t.Fatalf("drill: got %v; want *CrashError", err)
			}
			okStage := false
			for _, s := range tt.stage {
				okStage = okStage || ce.Stage == s
			}
			if !okStage || ce.Signal != tt.signal || ce.ExitStatus != tt.status {
				t.Errorf("crash: got stage %q signal %q exit %d; want %v %q %d\n%s", ce.Stage, ce.Signal, ce.ExitStatus, tt.stage, tt.signal, tt.status, ce.LogTail)
			}
			checkGone(t, ce.PID)
			// Restarted with the model reloaded, the worker serves again.
			resp, err := p.Do(ctx, embed(loaded.ModelRef, []int32{101, word, 102}), time.Minute)
			if err != nil {
				t.Fatalf("embed after restart: %v", err)
			}
			if v := resp.(*wire.Vectors); v.N != 1 || v.Dims != loaded.Dims {
				t.Errorf("vectors after restart: got n=%d dims=%d; want 1, %d", v.N, v.Dims, loaded.Dims)
			}
			if tt.name == "exit-after" {
				// The restarted worker's third request (a PING) would be its
				// last: it exits after answering, so its health is a race.
				if w := p.Health().Workers[0]; w.Restarts != 1 {
					t.Errorf("health: got %+v; want 1 restart", w)
				}
				return
			}
			if err := p.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if w := p.Health().Workers[0]; w.Restarts != 1 || len(w.ModelsLoaded) != 1 || w.RSSMB <= 0 {
				t.Errorf("health: got %+v; want 1 restart, the model loaded, an rss", w)
			}
		})
	}
}

func TestRealWorkerQuarantine(t *testing.T) {
	cfg, load := realConfig(t, "abort-on-token=1500")
	cfg.QuarantineCrashes = 2
	p := startPool(t, cfg)
	ctx := context.Background()
	loaded, err := p.Load(ctx, load)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := p.Do(ctx, embed(loaded.ModelRef, []int32{101, poison, 102}), time.Minute); !errors.As(err, new(*CrashError)) {
			t.Fatalf("poisoned batch: got %v; want a crash", err)
		}
	}
	_, err = p.Do(ctx, embed(loaded.ModelRef, []int32{101, 102}), time.Minute)
	var qe *QuarantinedError
	if !errors.As(err, &qe) || qe.Model != KeyOf(load) {
		t.Fatalf("after 2 crashes: got %v; want *QuarantinedError", err)
	}
	if err := p.Reprobe(ctx, KeyOf(load)); err != nil {
		t.Fatalf("Reprobe: %v", err)
	}
	if _, err := p.Do(ctx, embed(loaded.ModelRef, []int32{101, 102}), time.Minute); err != nil {
		t.Errorf("after Reprobe: %v", err)
	}
}

// TestMain removes the generated models.
func TestMain(m *testing.M) {
	code := m.Run()
	testmodels.RemoveAll()
	os.Exit(code)
}
