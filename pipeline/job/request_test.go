package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/supervise"
	"github.com/synapse-embed/synapse/wire"
)

func TestClassifyPoolError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want pipeline.Fault
	}{
		{"crash", &supervise.CrashError{Stage: "recv"}, pipeline.FaultRetry},
		{"timeout", &supervise.CrashError{Stage: "timeout"}, pipeline.FaultRetry},
		{"quarantined", fmt.Errorf("x: %w", &supervise.QuarantinedError{}), pipeline.FaultFatal},
		{"no workers", supervise.ErrNoWorkers, pipeline.FaultFatal},
		{"model unavailable", fmt.Errorf("supervise: EMBED_BATCH: %w", supervise.ErrModelUnavailable), pipeline.FaultFatal},
		{"cancelled", context.Canceled, pipeline.FaultFatal},
		{"bad request", wire.Errorf(wire.CodeBadRequest, "too long"), pipeline.FaultReject},
		{"oom", wire.Errorf(wire.CodeOOM, "no memory"), pipeline.FaultRetry},
		{"model not loaded", wire.Errorf(wire.CodeModelNotLoaded, "x"), pipeline.FaultFatal},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("%s: got %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestTimeoutNeverOverflows(t *testing.T) {
	huge := &requester{deadline: time.Duration(1 << 62), perToken: time.Duration(1 << 62)}
	if got := huge.timeoutFor(1 << 20); got <= 0 || got > 2*maxTimeout {
		t.Errorf("Timeout with huge settings = %v; want positive and at most %v", got, 2*maxTimeout)
	}
	b := &requester{deadline: time.Second, perToken: time.Millisecond}
	if got, want := b.timeoutFor(100), 1100*time.Millisecond; got != want {
		t.Errorf("Timeout(100) = %v; want %v", got, want)
	}
}

// TestPatience: a timeout raises the factor to at least twice the one it
// ran at, even when a fast request lowered it in the meantime; a fast
// request halves it only from the factor it ran at.
func TestPatience(t *testing.T) {
	var seen []int
	p := &requester{onPatience: func(f int, _ error) { seen = append(seen, f) }}
	cause := errors.New("timeout")
	steps := []struct {
		timeout bool  // a timeout asking for at least `to`, or a fast request at `from`
		from    int64 // the factor the request ran at
		want    int64
	}{
		{true, 1, 2},  // first timeout
		{true, 1, 2},  // a second request that also ran at 1×: already stretched
		{true, 2, 4},  // its retry timed out too
		{false, 2, 4}, // stale: a request at 2× finished fast after the factor moved on
		{false, 4, 2}, // fast again
		{true, 4, 8},  // a long request started at 4× timed out although the factor is 2 now
		{false, 8, 4},
		{false, 4, 2},
		{false, 2, 1},
		{false, 1, 1}, // nothing below 1
	}
	for i, s := range steps {
		if s.timeout {
			p.stretch(2*s.from, cause)
		} else {
			p.relax(s.from)
		}
		if got := p.factor(); got != s.want {
			t.Fatalf("step %d (%+v): factor %d; want %d", i, s, got, s.want)
		}
	}
	if want := []int{2, 4, 2, 8, 4, 2, 1}; !slices.Equal(seen, want) {
		t.Errorf("onPatience saw %v; want %v", seen, want)
	}
}

func TestStretchedTimeout(t *testing.T) {
	for _, tc := range []struct {
		base time.Duration
		f    int64
		want time.Duration
	}{
		{time.Minute, 1, time.Minute},
		{time.Minute, 8, 8 * time.Minute},
		{10 * time.Hour, 8, maxTimeout},
		{30 * time.Hour, 1, 30 * time.Hour}, // above the cap already: never shortened
		{30 * time.Hour, 2, 30 * time.Hour},
		{time.Hour, 1 << 40, maxTimeout}, // no overflow
	} {
		if got := stretched(tc.base, tc.f); got != tc.want {
			t.Errorf("timeout(%v, %d) = %v; want %v", tc.base, tc.f, got, tc.want)
		}
	}
}
