package pipeline

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

var (
	errCrash  = errors.New("worker crashed")
	errReject = errors.New("bad request")
	errQuar   = errors.New("quarantined")
)

// poisonBackend crashes on any batch holding a poison id and counts calls.
type poisonBackend struct {
	mu     sync.Mutex
	poison map[int32]error
	calls  int
	flaky  int // the first flaky calls crash whatever they hold
}

func (p *poisonBackend) Embed(_ context.Context, b Batch) ([][]float32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.flaky > 0 {
		p.flaky--
		return nil, errCrash
	}
	out := make([][]float32, len(b.Chunks))
	for i, c := range b.Chunks {
		for _, id := range c.IDs {
			if err, ok := p.poison[id]; ok {
				return nil, err
			}
		}
		out[i] = []float32{float32(c.Doc)}
	}
	return out, nil
}

func classifyTest(err error) Fault {
	switch {
	case errors.Is(err, errQuar):
		return FaultFatal
	case errors.Is(err, errReject):
		return FaultReject
	}
	return FaultRetry
}

func docsBatch(n int, poisonDocs map[int]int32) Batch {
	var cs []Chunk
	for i := 0; i < n; i++ {
		id := int32(i)
		if p, ok := poisonDocs[i]; ok {
			id = p
		}
		cs = append(cs, Chunk{Doc: int64(i), IDs: []int32{101, id, 102}})
	}
	return batchOf(cs)
}

func TestIsolatorFindsPoison(t *testing.T) {
	tests := []struct {
		name   string
		poison map[int]int32
		err    error
	}{
		{"one crash", map[int]int32{5: 9999}, errCrash},
		{"two crashes", map[int]int32{0: 9999, 13: 9999}, errCrash},
		{"reject", map[int]int32{7: 8888}, errReject},
		{"none", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := &poisonBackend{poison: map[int32]error{9999: errCrash, 8888: errReject}}
			iso := &isolator{backend: be, classify: classifyTest, retries: 1}
			done, failed, err := iso.run(context.Background(), docsBatch(16, tt.poison))
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			var failedDocs []int
			for _, f := range failed {
				failedDocs = append(failedDocs, int(f.Chunk.Doc))
				if !errors.Is(f.Err, tt.err) {
					t.Errorf("doc %d failed with %v; want %v", f.Chunk.Doc, f.Err, tt.err)
				}
			}
			var want []int
			for d := range tt.poison {
				want = append(want, d)
			}
			slices.Sort(want)
			slices.Sort(failedDocs)
			if !slices.Equal(failedDocs, want) {
				t.Errorf("failed docs %v; want %v", failedDocs, want)
			}
			if len(done)+len(failed) != 16 {
				t.Errorf("%d embedded + %d failed; want 16 in all", len(done), len(failed))
			}
		})
	}
}

func TestIsolatorRetriesTransientCrash(t *testing.T) {
	be := &poisonBackend{flaky: 1}
	retried := 0
	iso := &isolator{backend: be, classify: classifyTest, retries: 1, onRetry: func(Batch, error) { retried++ }}
	done, failed, err := iso.run(context.Background(), docsBatch(8, nil))
	if err != nil || len(failed) != 0 || len(done) != 8 {
		t.Fatalf("got %d done, %d failed, err %v; want 8, 0, nil", len(done), len(failed), err)
	}
	if be.calls != 2 || retried != 1 {
		t.Errorf("calls %d, retries %d; want 2 and 1 (one crash, one retry of the whole batch)", be.calls, retried)
	}
}

func TestIsolatorFatalStops(t *testing.T) {
	be := &poisonBackend{poison: map[int32]error{9999: errQuar}}
	iso := &isolator{backend: be, classify: classifyTest, retries: 1}
	_, _, err := iso.run(context.Background(), docsBatch(8, map[int]int32{3: 9999}))
	if !errors.Is(err, errQuar) {
		t.Fatalf("err = %v; want the quarantine error", err)
	}
	if be.calls != 1 {
		t.Errorf("calls = %d; want 1 (a fatal fault is not retried)", be.calls)
	}
}

// streakBackend records the longest run of failed calls in a row.
type streakBackend struct {
	poisonBackend
	streak, longest int
}

func (s *streakBackend) Embed(ctx context.Context, b Batch) ([][]float32, error) {
	v, err := s.poisonBackend.Embed(ctx, b)
	if err != nil {
		s.streak++
		s.longest = max(s.longest, s.streak)
	} else {
		s.streak = 0
	}
	return v, err
}

func TestIsolatorInterleavesSuccesses(t *testing.T) {
	for poison := 0; poison < 32; poison++ {
		be := &streakBackend{poisonBackend: poisonBackend{poison: map[int32]error{9999: errCrash}}}
		iso := &isolator{backend: be, classify: classifyTest, retries: 1}
		_, failed, err := iso.run(context.Background(), docsBatch(32, map[int]int32{poison: 9999}))
		if err != nil || len(failed) != 1 {
			t.Fatalf("poison %d: %d failed, err %v; want 1, nil", poison, len(failed), err)
		}
		// batch, its retry, and at most one half before a healthy half succeeds.
		if be.longest > 3 {
			t.Errorf("poison %d: %d failed calls in a row; want at most 3", poison, be.longest)
		}
	}
}
