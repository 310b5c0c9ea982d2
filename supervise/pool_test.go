package supervise

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

func TestHandshakeRefused(t *testing.T) {
	tests := []struct {
		mode  string
		want  error
		stage string
		as    any // a wire error type that must be in the chain, or nil
	}{
		{"wrong-nonce", ErrNonce, "handshake", nil},
		{"wrong-version", ErrVersion, "handshake", nil},
		{"request-first", ErrProtocol, "handshake", nil},
		{"garbage", ErrProtocol, "handshake", new(*wire.ProtocolError)},
		{"oversize", ErrProtocol, "handshake", new(*wire.FrameTooLargeError)},
		{"slow-start", ErrStartTimeout, "accept", nil},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			checkLeaks(t)
			cfg := helperConfig(t, tt.mode, "")
			if tt.mode == "slow-start" {
				cfg.StartTimeout = 300 * time.Millisecond
			}
			err := bounded(t, "NewPool", func() error {
				p, err := NewPool(context.Background(), cfg)
				if p != nil {
					p.Close()
				}
				return err
			})
			var se *StartError
			if !errors.As(err, &se) {
				t.Fatalf("NewPool: got %v; want a *StartError", err)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("NewPool: got %v; want %v in the chain", err, tt.want)
			}
			if se.Stage != tt.stage {
				t.Errorf("stage: got %q; want %q", se.Stage, tt.stage)
			}
			if tt.as != nil && !errors.As(err, tt.as) {
				t.Errorf("NewPool: got %v; want %T in the chain", err, tt.as)
			}
			if se.PID <= 0 {
				t.Errorf("StartError.PID: got %d; want the child's pid", se.PID)
			}
			checkGone(t, se.PID)
			checkNoSockets(t, cfg.RuntimeDir)
		})
	}
}

func TestLoadAndEmbed(t *testing.T) {
	p := startPool(t, helperConfig(t, "worker", ""))
	ctx := context.Background()
	load := testLoad("aa")
	loaded, err := p.Load(ctx, load)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if loaded.ModelRef != "helper:sha256:aa" || loaded.Dims != 2 || loaded.ReqID != 77 {
		t.Errorf("Load: got %+v; want model_ref helper:sha256:aa, dims 2, req_id 77", loaded)
	}
	again, err := p.Load(ctx, load) // already loaded: not sent again
	if err != nil {
		t.Fatalf("second Load: %v", err)
	}
	if again.ModelRef != loaded.ModelRef || again.Dims != loaded.Dims {
		t.Errorf("second Load: got %+v; want model_ref %s, dims %d as the first", again, loaded.ModelRef, loaded.Dims)
	}
	req := embed(loaded.ModelRef, []int32{1, 2, 3}, []int32{10})
	resp, err := p.Do(ctx, req, time.Minute)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	v := resp.(*wire.Vectors)
	want := []float32{3, 6, 1, 10}
	if v.N != 2 || v.Dims != 2 || len(v.Data) != 4 {
		t.Fatalf("Vectors: got n=%d dims=%d data=%v; want n=2 dims=2 data=%v", v.N, v.Dims, v.Data, want)
	}
	for i := range want {
		if v.Data[i] != want[i] {
			t.Errorf("Vectors.Data[%d]: got %v; want %v", i, v.Data[i], want[i])
		}
	}
	if v.ReqID != 5 || req.ReqID != 5 {
		t.Errorf("req_id: got reply %d, request %d after Do; want 5 and 5", v.ReqID, req.ReqID)
	}
	if err := p.Refresh(ctx); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if got := p.Health().Workers[0].ModelsLoaded; len(got) != 1 {
		t.Errorf("models loaded after two Loads: got %v; want one", got)
	}
}

func TestLoadRefused(t *testing.T) {
	p := startPool(t, helperConfig(t, "worker", ""))
	l := testLoad("bb")
	l.ArtifactPath = "missing"
	_, err := p.Load(context.Background(), l)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeArtifactInvalid {
		t.Fatalf("Load: got %v; want *wire.Error artifact_invalid", err)
	}
	var ce *CrashError
	if errors.As(err, &ce) {
		t.Errorf("Load: got a crash %v; want a reported error only", ce)
	}
	p.mu.Lock()
	n := len(p.models)
	p.mu.Unlock()
	if n != 0 {
		t.Errorf("wanted models after refusal: got %d; want 0", n)
	}
	if h := p.Health(); h.Workers[0].Restarts != 0 || h.Workers[0].State != StateReady {
		t.Errorf("worker after ERR: got %+v; want ready, no restart", h.Workers[0])
	}
}

// crashOnce loads a model on p, sends a batch with the poison token and
// returns the crash.
func crashOnce(t *testing.T, p *Pool, digest string, poison int32, timeout time.Duration) *CrashError {
	t.Helper()
	ctx := context.Background()
	loaded, err := p.Load(ctx, testLoad(digest))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	err = bounded(t, "Do", func() error {
		_, err := p.Do(ctx, embed(loaded.ModelRef, []int32{4, poison}), timeout)
		return err
	})
	var ce *CrashError
	if !errors.As(err, &ce) {
		t.Fatalf("Do: got %v; want *CrashError", err)
	}
	return ce
}

func TestCrashMidRequest(t *testing.T) {
	p := startPool(t, helperConfig(t, "worker", "abort-on-token=666"))
	ce := crashOnce(t, p, "cc", 666, time.Minute)
	if ce.Stage != "recv" || ce.Signal != "SIGABRT" || ce.ExitStatus != -1 {
		t.Errorf("crash: got stage %q signal %q exit %d; want recv SIGABRT -1", ce.Stage, ce.Signal, ce.ExitStatus)
	}
	if ce.Code() != "engine_crashed" || ce.Request != "EMBED_BATCH" || ce.Model.Artifact != "sha256:cc" {
		t.Errorf("crash: got code %q request %q model %v", ce.Code(), ce.Request, ce.Model)
	}
	if !contains(ce.LogTail, "stderr: GGML_ASSERT(token 666) failed") {
		t.Errorf("crash log tail: got %q; want the GGML_ASSERT line", ce.LogTail)
	}
	checkGone(t, ce.PID)

	// The restarted worker has the model back before it takes work.
	loaded, _ := p.Load(context.Background(), testLoad("cc"))
	resp, err := p.Do(context.Background(), embed(loaded.ModelRef, []int32{4, 5}), time.Minute)
	if err != nil {
		t.Fatalf("Do after restart: %v", err)
	}
	if v := resp.(*wire.Vectors); v.Data[1] != 9 {
		t.Errorf("Vectors after restart: got %v; want [2 9]", v.Data)
	}
	h := p.Health()
	w := h.Workers[0]
	if w.Restarts != 1 || w.LastCrash == nil || w.LastCrash.Stage != "recv" || w.PID == ce.PID {
		t.Errorf("health after restart: got %+v (last crash %+v); want 1 restart, a new pid, last crash recv", w, w.LastCrash)
	}
	if !maps.Equal(h.Crashes, map[string]int{"recv": 1}) {
		t.Errorf("crashes by stage: got %v; want recv: 1", h.Crashes)
	}
}

func TestHangPastDeadline(t *testing.T) {
	tests := []struct {
		name    string
		ctx     time.Duration // context deadline, 0 = none
		timeout time.Duration // per-call timeout
	}{
		{"per-call timeout", 0, 200 * time.Millisecond},
		{"context deadline", 200 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startPool(t, helperConfig(t, "worker", "hang-on-token=13"))
			loaded, err := p.Load(context.Background(), testLoad("dd"))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tt.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctx)
				defer cancel()
			}
			err = bounded(t, "Do", func() error {
				_, err := p.Do(ctx, embed(loaded.ModelRef, []int32{13}), tt.timeout)
				return err
			})
			var ce *CrashError
			if !errors.As(err, &ce) || ce.Stage != "timeout" || ce.Signal != "SIGKILL" {
				t.Fatalf("Do: got %v; want engine_crashed stage timeout, SIGKILL", err)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Do: got %v; want context.DeadlineExceeded in the chain", err)
			}
			if !contains(ce.LogTail, "hanging on token 13") {
				t.Errorf("log tail: got %q; want the hang line", ce.LogTail)
			}
			checkGone(t, ce.PID)
		})
	}
}

// doHanging sends a request holding token 13 (the hang-on-token=13 helper
// never answers it) and returns once the worker is busy with it; the
// request's error arrives on the channel.
func doHanging(t *testing.T, p *Pool, ctx context.Context, ref string) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := p.Do(ctx, embed(ref, []int32{13}), 0)
		errc <- err
	}()
	waitHealth(t, p, func(h Health) bool { return h.Workers[0].State == StateBusy })
	return errc
}

func TestCancelMidRequest(t *testing.T) {
	p := startPool(t, helperConfig(t, "worker", "hang-on-token=13"))
	loaded, err := p.Load(context.Background(), testLoad("ee"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := doHanging(t, p, ctx, loaded.ModelRef)
	cancel()
	err = bounded(t, "Do", func() error { return <-errc })
	var ce *CrashError
	if !errors.Is(err, context.Canceled) || errors.As(err, &ce) {
		t.Fatalf("Do: got %v; want context.Canceled, not a crash", err)
	}
	h := waitHealth(t, p, func(h Health) bool { return h.Workers[0].State == StateReady })
	if h.CrashesInWindow != 0 || h.Workers[0].LastCrash != nil {
		t.Errorf("health: got %d crashes, last %+v; want a cancellation not counted", h.CrashesInWindow, h.Workers[0].LastCrash)
	}
	if len(h.Crashes) != 0 {
		t.Errorf("crashes by stage: got %v; want none for a cancellation", h.Crashes)
	}
}

func TestExitAfterN(t *testing.T) {
	p := startPool(t, helperConfig(t, "worker", "exit-after=2"))
	ctx := context.Background()
	for i := range 2 {
		if _, err := p.Do(ctx, &wire.Ping{}, time.Minute); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
	}
	_, err := p.Do(ctx, &wire.Ping{}, time.Minute)
	var ce *CrashError
	if !errors.As(err, &ce) || ce.Stage != "recv" || ce.ExitStatus != 3 || ce.Signal != "" {
		t.Fatalf("third ping: got %v; want engine_crashed recv, exit status 3", err)
	}
	if !contains(ce.LogTail, "exit after 2 requests") {
		t.Errorf("log tail: got %q", ce.LogTail)
	}
	if _, err := p.Do(ctx, &wire.Ping{}, time.Minute); err != nil {
		t.Fatalf("ping after restart: %v", err)
	}
}

func TestStderrFlood(t *testing.T) {
	cfg := helperConfig(t, "flood", "abort-on-token=666")
	cfg.LogBytesPerWorker, cfg.LogBytesTotal = 64<<10, 96<<10
	cfg.Workers = 2
	p := startPool(t, cfg) // a pool that did not drain would never see HELLO
	for _, w := range p.Health().Workers {
		got, total := p.Logs().Size(w.ID)
		if got > 64<<10 || total > 96<<10 {
			t.Errorf("ring %s: got %d bytes, total %d; want ≤ 64 KiB and ≤ 96 KiB", w.ID, got, total)
		}
	}
	ce := crashOnce(t, p, "ff", 666, time.Minute)
	if len(ce.LogTail) > crashTailBytes {
		t.Errorf("log tail: got %d bytes; want ≤ %d", len(ce.LogTail), crashTailBytes)
	}
	if !contains(ce.LogTail, "GGML_ASSERT(token 666)") || !contains(ce.LogTail, "flood done") {
		t.Errorf("log tail: got %q; want the flood's end and the abort", ce.LogTail)
	}
	lines := p.Logs().Lines(ce.WorkerID)
	if len(lines) == 0 || lines[len(lines)-1].Stream != "stderr" {
		t.Errorf("ring lines: got %d, last %+v; want stderr last", len(lines), lines[len(lines)-1])
	}
}

func TestShutdownClean(t *testing.T) {
	checkLeaks(t)
	cfg := helperConfig(t, "worker", "")
	p, err := NewPool(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	pid := p.Health().Workers[0].PID
	id := p.Health().Workers[0].ID
	if err := bounded(t, "Close", p.Close); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !contains(p.LogTail(id, 1<<10), "helper: shutdown") {
		t.Errorf("worker output: got %q; want it to have seen SHUTDOWN", p.LogTail(id, 1<<10))
	}
	checkGone(t, pid)
	checkNoSockets(t, cfg.RuntimeDir)
	if _, err := p.Do(context.Background(), &wire.Ping{}, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close: got %v; want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestShutdownIgnored(t *testing.T) {
	checkLeaks(t)
	cfg := helperConfig(t, "worker", "")
	cfg.Env = append(cfg.Env, "SUPERVISE_STICKY=1")
	cfg.ShutdownTimeout = 200 * time.Millisecond
	p, err := NewPool(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	pid := p.Health().Workers[0].PID
	if err := bounded(t, "Close", p.Close); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkGone(t, pid)
	checkNoSockets(t, cfg.RuntimeDir)
}

func TestCloseWithRequestInFlight(t *testing.T) {
	checkLeaks(t)
	cfg := helperConfig(t, "worker", "hang-on-token=13")
	cfg.ShutdownTimeout = 200 * time.Millisecond
	p, err := NewPool(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := p.Load(context.Background(), testLoad("gg"))
	if err != nil {
		t.Fatal(err)
	}
	pid := p.Health().Workers[0].PID
	errc := doHanging(t, p, context.Background(), loaded.ModelRef)
	if err := bounded(t, "Close", p.Close); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := bounded(t, "Do", func() error { return <-errc }); !errors.Is(err, ErrClosed) {
		t.Errorf("in-flight Do: got %v; want ErrClosed", err)
	}
	checkGone(t, pid)
	checkNoSockets(t, cfg.RuntimeDir)
}

func TestQuarantine(t *testing.T) {
	tests := []struct {
		name        string
		between     time.Duration // clock advance between crashes
		served      bool          // a request succeeds between the crashes
		quarantined bool
	}{
		{"within window", time.Minute, false, true},
		{"outside window", 11 * time.Minute, false, false},
		{"served in between", time.Minute, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			cfg := helperConfig(t, "worker", "abort-on-token=666")
			cfg.QuarantineCrashes, cfg.QuarantineWindow, cfg.Now = 2, 10*time.Minute, clock.Now
			p := startPool(t, cfg)
			first := crashOnce(t, p, "hh", 666, time.Minute)
			clock.Advance(tt.between)
			if tt.served {
				if _, err := p.Do(context.Background(), embed("helper:sha256:hh", []int32{1}), time.Minute); err != nil {
					t.Fatalf("Do between crashes: %v", err)
				}
			}
			crashOnce(t, p, "hh", 666, time.Minute)
			key := first.Model
			h := waitHealth(t, p, func(h Health) bool { return h.Workers[0].State == StateReady })
			if got := len(h.Quarantined) == 1; got != tt.quarantined {
				t.Fatalf("quarantined: got %v; want %v", h.Quarantined, tt.quarantined)
			}
			if !tt.quarantined {
				return
			}
			restarts := h.Workers[0].Restarts
			_, err := p.Do(context.Background(), embed("helper:sha256:hh", []int32{1}), time.Minute)
			var qe *QuarantinedError
			if !errors.As(err, &qe) || qe.Model != key || qe.Code() != "quarantined" || qe.Crashes != 2 {
				t.Fatalf("Do on quarantined model: got %v; want *QuarantinedError for %v after 2 crashes", err, key)
			}
			if _, err := p.Load(context.Background(), testLoad("hh")); !errors.As(err, &qe) {
				t.Errorf("Load of quarantined model: got %v; want *QuarantinedError", err)
			}
			h = waitHealth(t, p, func(h Health) bool { return h.Workers[0].State == StateReady })
			if h.Workers[0].Restarts != restarts {
				t.Errorf("restarts: got %d; want %d (a quarantined call costs no worker)", h.Workers[0].Restarts, restarts)
			}
			if err := p.Reprobe(context.Background(), key); err != nil {
				t.Fatalf("Reprobe: %v", err)
			}
			if _, err := p.Do(context.Background(), embed("helper:sha256:hh", []int32{1}), time.Minute); err != nil {
				t.Errorf("Do after Reprobe: %v", err)
			}
			if q := p.Health().Quarantined; len(q) != 0 {
				t.Errorf("quarantined after Reprobe: got %v; want none", q)
			}
		})
	}
}

func TestDegraded(t *testing.T) {
	clock := newFakeClock()
	cfg := helperConfig(t, "worker", "abort-on-token=666")
	cfg.DegradedCrashes, cfg.DegradedWindow, cfg.Now = 2, 10*time.Minute, clock.Now
	p := startPool(t, cfg)
	crashOnce(t, p, "m1", 666, time.Minute)
	if h := p.Health(); h.Degraded || h.CrashesInWindow != 1 {
		t.Fatalf("after one crash: got degraded %v, %d crashes; want false, 1", h.Degraded, h.CrashesInWindow)
	}
	crashOnce(t, p, "m2", 666, time.Minute) // another model: the pool's budget, not the model's
	if h := p.Health(); !h.Degraded || h.CrashesInWindow != 2 || len(h.Quarantined) != 0 {
		t.Fatalf("after two crashes: got degraded %v, %d crashes, quarantined %v; want true, 2, none", h.Degraded, h.CrashesInWindow, h.Quarantined)
	}
	clock.Advance(10 * time.Minute)
	if h := p.Health(); h.Degraded || h.CrashesInWindow != 0 {
		t.Errorf("after the window: got degraded %v, %d crashes; want false, 0", h.Degraded, h.CrashesInWindow)
	}
}

func TestGiveUpAfterStartFailures(t *testing.T) {
	cfg := helperConfig(t, "once", "exit-after=1")
	cfg.MaxStartFailures = 2
	p := startPool(t, cfg)
	ctx := context.Background()
	if _, err := p.Do(ctx, &wire.Ping{}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Do(ctx, &wire.Ping{}, time.Minute); !errors.As(err, new(*CrashError)) {
		t.Fatalf("second ping: got %v; want a crash", err)
	}
	h := waitHealth(t, p, func(h Health) bool { return h.Workers[0].State == StateFailed })
	if h.Workers[0].LastError == "" {
		t.Errorf("failed worker: got no LastError")
	}
	err := bounded(t, "Do", func() error { _, err := p.Do(ctx, &wire.Ping{}, time.Minute); return err })
	var se *StartError
	if !errors.Is(err, ErrNoWorkers) || !errors.As(err, &se) {
		t.Errorf("Do with no worker: got %v; want ErrNoWorkers with the *StartError", err)
	}
}

func TestConcurrentDo(t *testing.T) {
	cfg := helperConfig(t, "worker", "abort-on-token=666")
	cfg.Workers = 2
	cfg.QuarantineCrashes = 100
	p := startPool(t, cfg)
	loaded, err := p.Load(context.Background(), testLoad("cd"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				id := int32(g*100 + i)
				if g == 0 && i%5 == 4 {
					id = 666 // a poisoned batch now and then
				}
				resp, err := p.Do(context.Background(), embed(loaded.ModelRef, []int32{id, 1}), time.Minute)
				var ce *CrashError
				switch {
				case id == 666 && !errors.As(err, &ce):
					errs <- err
				case id != 666 && err != nil:
					errs <- err
				case id != 666 && resp.(*wire.Vectors).Data[1] != float32(id+1):
					errs <- errors.New("wrong vector")
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Do: %v", err)
	}
	if h := p.Health(); h.CrashesInWindow != 3 {
		t.Errorf("crashes: got %d; want 3", h.CrashesInWindow)
	}
}

// TestHealthPingLoop: the PING loop refreshes Health with each PONG (rss,
// models, time) while the pool runs. Health is read between rounds, never
// after Close: a round in flight when Close is called may end in a crash that
// rightly clears the slot's rss and models (the worker is gone).
func TestHealthPingLoop(t *testing.T) {
	cfg := helperConfig(t, "worker", "")
	cfg.PingInterval = 5 * time.Millisecond
	p := startPool(t, cfg)
	pinged := make(chan struct{}, 1)
	p.mu.Lock()
	p.onPing = func() {
		select {
		case pinged <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
	loaded, err := p.Load(context.Background(), testLoad("pp"))
	if err != nil {
		t.Fatal(err)
	}
	// Rounds that ran before or during Load found the worker busy; wait for
	// one that reached it.
	first := bounded(t, "a PONG after Load", func() WorkerHealth {
		for {
			<-pinged
			if w := p.Health().Workers[0]; len(w.ModelsLoaded) > 0 {
				return w
			}
		}
	})
	if first.LastPong.IsZero() || first.RSSMB != 7 || !slices.Equal(first.ModelsLoaded, []string{loaded.ModelRef}) {
		t.Errorf("health after a PING round: got %+v; want a PONG with rss 7 and model %s", first, loaded.ModelRef)
	}
	next := bounded(t, "a later PONG", func() WorkerHealth {
		for {
			<-pinged
			if w := p.Health().Workers[0]; w.LastPong.After(first.LastPong) {
				return w
			}
		}
	})
	if next.RSSMB != 7 || next.State != StateReady && next.State != StateBusy {
		t.Errorf("health after a later round: got %+v; want rss 7, ready or busy", next)
	}
}

func TestHealthSendsNothing(t *testing.T) {
	p := startPool(t, helperConfig(t, "worker", "exit-after=1"))
	for range 100 {
		p.Health()
	}
	if _, err := p.Do(context.Background(), &wire.Ping{}, time.Minute); err != nil {
		t.Fatalf("first request after 100 Health calls: %v (Health sent requests)", err)
	}
}

func TestPingSkipsBusyWorker(t *testing.T) {
	p := startPool(t, helperConfig(t, "worker", "hang-on-token=13"))
	loaded, err := p.Load(context.Background(), testLoad("bz"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := doHanging(t, p, ctx, loaded.ModelRef)
	if err := bounded(t, "Refresh", func() error { return p.Refresh(context.Background()) }); err != nil {
		t.Errorf("Refresh: %v", err)
	}
	if w := p.Health().Workers[0]; !w.LastPong.IsZero() || w.State != StateBusy {
		t.Errorf("busy worker after Refresh: got %+v; want not pinged, still busy", w)
	}
	cancel()
	<-errc
}

func TestMaxFrameNegotiated(t *testing.T) {
	p := startPool(t, helperConfig(t, "worker", ""))
	p.mu.Lock()
	got := p.slots[0].w.conn.MaxFrame()
	p.mu.Unlock()
	if got != 1<<20 {
		t.Fatalf("max frame: got %d; want the helper's 1 MiB", got)
	}
	ids := make([]int32, 300_000) // 1.2 MB raw frame
	_, err := p.Do(context.Background(), embed("x", ids), time.Minute)
	var fe *wire.FrameTooLargeError
	if !errors.As(err, &fe) || errors.As(err, new(*CrashError)) {
		t.Fatalf("oversized request: got %v; want *wire.FrameTooLargeError, no crash", err)
	}
	if _, err := p.Do(context.Background(), &wire.Ping{}, time.Minute); err != nil {
		t.Errorf("ping after refused request: %v", err)
	}
	if h := p.Health(); h.Workers[0].Restarts != 0 {
		t.Errorf("restarts: got %d; want 0", h.Workers[0].Restarts)
	}
}

func TestRemoveStale(t *testing.T) {
	dir := shortDir(t)
	tests := []struct {
		name    string
		setup   func(path string) func()
		wantErr bool
		kept    bool
	}{
		{"missing", func(string) func() { return func() {} }, false, false},
		{"stale socket", func(path string) func() {
			ln, err := listen(path)
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			ln.Close() // the file stays, nobody listens: a dead module's socket
			return func() {}
		}, false, false},
		{"live socket", func(path string) func() {
			ln, err := listen(path)
			if err != nil {
				t.Fatal(err)
			}
			return func() { ln.Close() }
		}, true, true},
		{"regular file", func(path string) func() {
			os.WriteFile(path, []byte("x"), 0o600)
			return func() {}
		}, true, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, string(rune('a'+i))+".sock")
			done := tt.setup(path)
			defer done()
			err := removeStale(path)
			if (err != nil) != tt.wantErr {
				t.Errorf("removeStale: got %v; want error %v", err, tt.wantErr)
			}
			if _, err := os.Lstat(path); (err == nil) != tt.kept {
				t.Errorf("file kept: got %v; want %v", err == nil, tt.kept)
			}
		})
	}
}

func TestWorkersDirPrivate(t *testing.T) {
	root := shortDir(t)
	os.MkdirAll(filepath.Join(root, "synapse", "workers"), 0o755)
	os.Chmod(filepath.Join(root, "synapse"), 0o755)
	dir, err := workersDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: got mode %v (%v); want 0700", d, fi.Mode().Perm(), err)
		}
	}
}

// TestReleaseReapsKilledWorker: a call whose context fired just as its
// answer arrived returns a good answer from a worker that is being killed.
// Releasing the slot reaps that worker, so that Close, which then finds the
// slot closed, still returns only after every process is gone.
func TestReleaseReapsKilledWorker(t *testing.T) {
	p := startPool(t, helperConfig(t, "worker", ""))
	s := p.slots[0]
	w := p.tryAcquire(s)
	if w == nil {
		t.Fatal("the idle worker could not be acquired")
	}
	w.kill() // as the call's context.AfterFunc does when the context ends
	p.release(s, w)
	select {
	case <-w.exited:
	default:
		t.Errorf("worker %d: not reaped when its slot was released", w.pid)
	}
	if h := p.Health().Workers[0]; h.PID == w.pid {
		t.Errorf("health after the release: got pid %d; want the killed worker gone from the slot", h.PID)
	}
}
