package supervise

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/model/testmodels"
	"github.com/synapse-embed/synapse/wire"
)

// The real worker (`synapse worker`) with the SYNAPSE_CHAOS drills, on
// ref-bert-embed.gguf (llama.cpp) and on a generated ONNX encoder (ONNX
// Runtime, without the llama.cpp libraries): the same story as the helper
// tests.

// realEngine is one engine the drills run against: its pool config, its
// LOAD, a harmless sequence and one holding the poison token.
type realEngine struct {
	cfg          Config
	load         wire.Load
	good, poison []int32
}

// realBinary returns the synapse binary; a build failure fails the test.
func realBinary(t testing.TB) string {
	t.Helper()
	return testenv.Binary(t)
}

func realPoolConfig(bin string, t testing.TB, env ...string) Config {
	return Config{
		Command:         []string{bin, "worker"},
		Env:             env,
		RuntimeDir:      shortDir(t),
		StartTimeout:    waitBound,
		ShutdownTimeout: waitBound,
		RestartBackoff:  -1,
		PingInterval:    -1,
	}
}

// realConfig returns a pool config for `synapse worker` on a generated
// BERT embedder (testmodels.Embedder); a build failure fails the test.
func realConfig(t testing.TB, chaos string) (Config, wire.Load) {
	t.Helper()
	e := realGGUF(t, chaos)
	return e.cfg, e.load
}

func realGGUF(t testing.TB, chaos string) realEngine {
	t.Helper()
	lib := testenv.LlamaLib(t)
	model := testmodels.Embedder(t)
	bin := realBinary(t)
	_, digest, err := gguf.Digest(model)
	if err != nil {
		t.Fatal(err)
	}
	load := wire.Load{ArtifactPath: model, ArtifactDigest: digest, Format: "gguf",
		RuntimeConfig: wire.RuntimeConfig{Embeddings: true, Threads: 1}}
	return realEngine{realPoolConfig(bin, t, "SYNAPSE_LLAMA_LIB="+lib, "SYNAPSE_CHAOS="+chaos), load,
		[]int32{101, word, 102}, []int32{101, poison, 102}}
}

// realONNX is `synapse worker` on a generated ONNX encoder with ONNX
// Runtime and no llama.cpp libraries; it skips when ONNX Runtime is absent.
func realONNX(t testing.TB, chaos string) realEngine {
	t.Helper()
	lib := testenv.ORTLib(t)
	bin := realBinary(t)
	dir := t.TempDir()
	if _, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: onnxtest.Tiny()}); err != nil {
		t.Fatal(err)
	}
	graph := filepath.Join(dir, "model.onnx")
	_, digest, err := hfmodel.Digest(graph)
	if err != nil {
		t.Fatal(err)
	}
	load := wire.Load{ArtifactPath: graph, ArtifactDigest: digest, Format: "onnx",
		RuntimeConfig: wire.RuntimeConfig{Embeddings: true, Threads: 1}}
	p := int32(onnxPoison)
	cfg := realPoolConfig(bin, t, "SYNAPSE_LLAMA_LIB="+t.TempDir(), "SYNAPSE_ORT_LIB="+lib,
		"SYNAPSE_CHAOS="+strings.ReplaceAll(chaos, strconv.Itoa(poison), strconv.Itoa(onnxPoison)))
	return realEngine{cfg, load, []int32{2, 6, 3}, []int32{2, p, 3}}
}

// poison is the token the drills react to and word a token they do not;
// the generated vocabulary (about 1,800 tokens) holds both. onnxPoison
// stands in for poison in the generated ONNX encoder's smaller vocabulary.
const (
	poison     = 1500
	word       = 1000
	onnxPoison = 7
)

func TestRealWorkerDrills(t *testing.T) {
	engines := []struct {
		name string
		new  func(testing.TB, string) realEngine
	}{{"llama.cpp", realGGUF}, {"onnxruntime", realONNX}}
	tests := []struct {
		name    string
		chaos   string
		timeout time.Duration
		stage   []string // any of
		signal  string
		status  int
	}{
		{"abort", "abort-on-token=" + strconv.Itoa(poison), time.Minute, []string{"recv"}, "SIGABRT", -1},
		{"hang", "hang-on-token=" + strconv.Itoa(poison), 500 * time.Millisecond, []string{"timeout"}, "SIGKILL", -1},
		{"exit-after", "exit-after=3", time.Minute, []string{"send", "recv"}, "", 1}, // LOAD, 2×embed, then exit
	}
	for _, eng := range engines {
		for _, tt := range tests {
			t.Run(eng.name+"/"+tt.name, func(t *testing.T) {
				runDrill(t, eng.new(t, tt.chaos), tt.name, tt.timeout, tt.stage, tt.signal, tt.status)
			})
		}
	}
}

// runDrill loads the model, serves two requests, sends the poison (or the
// request past exit-after) and checks the crash, the restart and the
// health that follows.
func runDrill(t *testing.T, e realEngine, name string, timeout time.Duration, stages []string, signal string, status int) {
	p := startPool(t, e.cfg)
	ctx := context.Background()
	loaded, err := p.Load(ctx, e.load) // request 1
	if err != nil {
		t.Fatalf("Load: %v\n%s", err, p.LogTail(p.Health().Workers[0].ID, 4<<10))
	}
	if loaded.Dims <= 0 {
		t.Fatalf("Load: got dims %d", loaded.Dims)
	}
	for range 2 { // requests 2 and 3
		if _, err := p.Do(ctx, embed(loaded.ModelRef, e.good), time.Minute); err != nil {
			t.Fatalf("embed: %v", err)
		}
	}
	err = bounded(t, "Do", func() error {
		_, err := p.Do(ctx, embed(loaded.ModelRef, e.poison), timeout)
		return err
	})
	var ce *CrashError
	if err == nil && name == "exit-after" {
		// The worker exits after answering, between requests: the pool may
		// see it die while idle and restart it before this request, which
		// the new worker then answers. The crash must be on record.
		h, crashes := p.Health(), 0
		for _, n := range h.Crashes {
			crashes += n
		}
		if h.Workers[0].Restarts != 1 || crashes != 1 {
			t.Fatalf("exit-after: request answered, health %+v; want the idle worker's exit recorded and 1 restart", h)
		}
		return
	}
	if !errors.As(err, &ce) {
		t.Fatalf("drill: got %v; want *CrashError", err)
	}
	if !slices.Contains(stages, ce.Stage) || ce.Signal != signal || ce.ExitStatus != status {
		t.Errorf("crash: got stage %q signal %q exit %d; want %v %q %d\n%s", ce.Stage, ce.Signal, ce.ExitStatus, stages, signal, status, ce.LogTail)
	}
	checkGone(t, ce.PID)
	// Restarted with the model reloaded, the worker serves again.
	resp, err := p.Do(ctx, embed(loaded.ModelRef, e.good), time.Minute)
	if err != nil {
		t.Fatalf("embed after restart: %v", err)
	}
	if v := resp.(*wire.Vectors); v.N != 1 || v.Dims != loaded.Dims {
		t.Errorf("vectors after restart: got n=%d dims=%d; want 1, %d", v.N, v.Dims, loaded.Dims)
	}
	if name == "exit-after" {
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
}

func TestRealWorkerQuarantine(t *testing.T) {
	cfg, load := realConfig(t, "abort-on-token="+strconv.Itoa(poison))
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
