package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/supervise"
	"github.com/synapse-embed/synapse/wire"
)

func TestClassifyPoolError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Fault
	}{
		{"crash", &supervise.CrashError{Stage: "recv"}, FaultRetry},
		{"timeout", &supervise.CrashError{Stage: "timeout"}, FaultRetry},
		{"quarantined", fmt.Errorf("x: %w", &supervise.QuarantinedError{}), FaultFatal},
		{"no workers", supervise.ErrNoWorkers, FaultFatal},
		{"model unavailable", fmt.Errorf("supervise: EMBED_BATCH: %w", supervise.ErrModelUnavailable), FaultFatal},
		{"cancelled", context.Canceled, FaultFatal},
		{"bad request", wire.Errorf(wire.CodeBadRequest, "too long"), FaultReject},
		{"oom", wire.Errorf(wire.CodeOOM, "no memory"), FaultRetry},
		{"model not loaded", wire.Errorf(wire.CodeModelNotLoaded, "x"), FaultFatal},
	}
	for _, tt := range tests {
		if got := ClassifyPoolError(tt.err); got != tt.want {
			t.Errorf("%s: got %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestTimeoutNeverOverflows(t *testing.T) {
	huge := &PoolBackend{Deadline: time.Duration(1 << 62), PerToken: time.Duration(1 << 62)}
	if got := huge.Timeout(1 << 20); got <= 0 || got > 2*maxTimeout {
		t.Errorf("Timeout with huge settings = %v; want positive and at most %v", got, 2*maxTimeout)
	}
	b := &PoolBackend{Deadline: time.Second, PerToken: time.Millisecond}
	if got, want := b.Timeout(100), 1100*time.Millisecond; got != want {
		t.Errorf("Timeout(100) = %v; want %v", got, want)
	}
}

// TestPatienceAdjust: a change is made by the first request that saw the
// old factor; a request that used a stale factor changes nothing.
func TestPatienceAdjust(t *testing.T) {
	var seen []int
	p := &PoolBackend{OnPatience: func(f int, _ error) { seen = append(seen, f) }}
	cause := errors.New("timeout")
	steps := []struct{ from, to, want int64 }{
		{1, 2, 2}, // first timeout
		{1, 2, 2}, // a second request that also ran at 1×: already stretched
		{2, 4, 4},
		{2, 1, 4}, // stale: a request at 2× finished fast after the factor moved on
		{4, 2, 2}, // fast again
		{2, 1, 1},
		{1, 2, 2},
	}
	for i, s := range steps {
		var c error
		if s.to > s.from {
			c = cause
		}
		p.adjust(s.from, s.to, c)
		if got := p.factor(); got != s.want {
			t.Fatalf("step %d (%d→%d): factor %d; want %d", i, s.from, s.to, got, s.want)
		}
	}
	if want := []int{2, 4, 2, 1, 2}; !slices.Equal(seen, want) {
		t.Errorf("OnPatience saw %v; want %v", seen, want)
	}
}
