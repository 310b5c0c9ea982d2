package supervise

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// QUANTIZE (extension) goes through the same request path as EMBED_BATCH:
// its answer gets the caller's req_id back, an old worker's unknown_type
// leaves the worker serving, and a crash or a hang costs the worker (killed,
// restarted), not the caller.
func TestQuantizeRequest(t *testing.T) {
	p := startPool(t, helperConfig(t, "worker", ""))
	ctx := context.Background()
	q := func(ftype string) *wire.Quantize {
		return &wire.Quantize{ReqID: 41, ArtifactPath: "/m/a.gguf", ArtifactDigest: "sha256:aa", OutPath: "/m/out.gguf", FType: ftype, Threads: 1}
	}

	resp, err := p.Do(ctx, q("q8_0"), time.Minute)
	if err != nil {
		t.Fatalf("QUANTIZE: %v", err)
	}
	got, ok := resp.(*wire.Quantized)
	if !ok || got.ReqID != 41 || got.OutDigest != "sha256:q8_0" || got.OutSize != int64(len("/m/out.gguf")) {
		t.Fatalf("QUANTIZE: got %#v; want QUANTIZED req_id 41, out_digest sha256:q8_0", resp)
	}

	_, err = p.Do(ctx, q("old"), time.Minute)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeUnknownType {
		t.Fatalf("QUANTIZE to an old worker: got %v; want ERR unknown_type", err)
	}
	if _, err := p.Do(ctx, &wire.Ping{}, time.Minute); err != nil {
		t.Fatalf("PING after unknown_type: %v", err)
	}
	if r := p.Health().Workers[0].Restarts; r != 0 {
		t.Errorf("restarts after unknown_type: got %d; want 0", r)
	}

	tests := []struct {
		ftype   string
		timeout time.Duration
		stage   string
		signal  string
	}{
		{"abort", time.Minute, "recv", "SIGABRT"},
		{"hang", 200 * time.Millisecond, "timeout", "SIGKILL"},
	}
	for i, tt := range tests {
		t.Run(tt.ftype, func(t *testing.T) {
			err := bounded(t, "Do", func() error { _, err := p.Do(ctx, q(tt.ftype), tt.timeout); return err })
			var ce *CrashError
			if !errors.As(err, &ce) || ce.Stage != tt.stage || ce.Signal != tt.signal || ce.Request != "QUANTIZE" {
				t.Fatalf("QUANTIZE %s: got %v; want engine_crashed %s %s during QUANTIZE", tt.ftype, err, tt.stage, tt.signal)
			}
			checkGone(t, ce.PID)
			waitHealth(t, p, func(h Health) bool { return h.Workers[0].State == StateReady && h.Workers[0].Restarts == i+1 })
			if _, err := p.Do(ctx, q("q8_0"), time.Minute); err != nil {
				t.Errorf("QUANTIZE after the restart: %v", err)
			}
		})
	}
}
