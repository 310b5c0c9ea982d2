package supervise

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// waitBound is the safety net on every wait in these tests: reaching it is
// a failure (a hang), not a timing assertion.
const waitBound = 30 * time.Second

// fakeClock is an injectable clock for crash-window tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// shortDir returns a short temporary directory (socket paths are limited
// to 107 bytes) removed at cleanup.
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// helperConfig is a pool of helper workers in mode with SYNAPSE_CHAOS.
func helperConfig(t testing.TB, mode, chaos string) Config {
	return Config{
		Command:          helperCommand(),
		Env:              []string{helperEnv + "=" + mode, "SYNAPSE_CHAOS=" + chaos, "GORACE=atexit_sleep_ms=0"},
		RuntimeDir:       shortDir(t),
		StartTimeout:     waitBound,
		ShutdownTimeout:  waitBound,
		RestartBackoff:   -1,
		PingInterval:     -1,
		MaxStartFailures: 3,
	}
}

// checkLeaks records the goroutine count and, at cleanup (after the pool's
// Close, registered later), fails if it did not come back down.
func checkLeaks(t testing.TB) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(waitBound)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("goroutines: got %d after Close; want %d\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
				return
			}
			runtime.Gosched()
		}
	})
}

// startPool starts a pool and registers, in order, its Close and the checks
// that no process, socket file or goroutine is left behind.
func startPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	checkLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	p, err := NewPool(ctx, cfg)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	var pids []int
	t.Cleanup(func() {
		for _, w := range p.Health().Workers {
			pids = append(pids, w.PID)
		}
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		checkGone(t, pids...)
		checkNoSockets(t, cfg.RuntimeDir)
	})
	return p
}

// checkGone fails for every pid that still names a process. The pool reaps
// every worker before returning, so a pid that still exists is a leak.
func checkGone(t testing.TB, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if pid > 0 && processAlive(pid) {
			t.Errorf("worker pid %d: still running; want gone", pid)
		}
	}
}

// checkNoSockets fails if any socket file is left in the runtime dir.
func checkNoSockets(t testing.TB, root string) {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(root, "synapse", "workers", "*.sock"))
	if len(matches) > 0 {
		t.Errorf("socket files left: %v", matches)
	}
}

// waitHealth waits, on the pool's change events, until cond holds.
func waitHealth(t testing.TB, p *Pool, cond func(Health) bool) Health {
	t.Helper()
	timer := time.NewTimer(waitBound)
	defer timer.Stop()
	for {
		p.mu.Lock()
		ch := p.changed
		p.mu.Unlock()
		if h := p.Health(); cond(h) {
			return h
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("health condition not reached: %+v", p.Health())
		}
	}
}

// bounded runs f and fails the test if it does not return within waitBound.
func bounded[T any](t testing.TB, what string, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	timer := time.NewTimer(waitBound)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: did not return within %v", what, waitBound)
	}
	panic("unreachable")
}

// testLoad is the LOAD the tests use; the helper names the model
// "helper:<digest>".
func testLoad(digest string) wire.Load {
	return wire.Load{ReqID: 77, ArtifactPath: "/models/" + digest, ArtifactDigest: "sha256:" + digest, Format: "gguf",
		RuntimeConfig: wire.RuntimeConfig{ContextSize: 512, Embeddings: true}}
}

// embed builds an EMBED_BATCH of one item per id list.
func embed(ref string, items ...[]int32) *wire.EmbedBatch {
	b := &wire.EmbedBatch{ReqID: 5, ModelRef: ref}
	for i, ids := range items {
		b.Items = append(b.Items, wire.Item{ID: uint64(i), NTokens: len(ids)})
		b.IDs = append(b.IDs, ids...)
	}
	return b
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
