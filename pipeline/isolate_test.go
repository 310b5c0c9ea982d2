package pipeline

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func testIsolator(be *poisonBackend, onRetry func([]unit[item], error)) *isolator[any, item, []float32] {
	return &isolator[any, item, []float32]{kind: kindOf(be), classify: classifyTest, retries: 1, onRetry: onRetry}
}

// kindOf is the test kind over a backend, as a Kind of any records.
func kindOf(be *poisonBackend) Kind[any, item, []float32] {
	return anyKind{&testKind{window: 4, call: be.call}}
}

type anyKind struct{ *testKind }

func (anyKind) Place(any) (int64, int64)           { return 0, 0 }
func (anyKind) Weight(any) int64                   { return 0 }
func (anyKind) Items(any) ([]Work[item], error)    { return nil, nil }
func (k anyKind) Tokens(it item) int               { return k.testKind.Tokens(it) }
func (k anyKind) Check(it item, v []float32) error { return k.testKind.Check(it, v) }
func (k anyKind) Call(ctx context.Context, its []item) ([][]float32, error) {
	return k.testKind.Call(ctx, its)
}

// batchOf is n units, one per record; poison[i] replaces unit i's id.
func batchOf(n int, poison map[int]int32) []unit[item] {
	var b []unit[item]
	for i := 0; i < n; i++ {
		id := int32(i)
		if p, ok := poison[i]; ok {
			id = p
		}
		b = append(b, unit[item]{seq: int64(i), item: item{doc: int64(i), ids: []int32{101, id, 102}}, tokens: 3})
	}
	return b
}

// split sorts a batch's outcome into answered and failed records.
func split(res batchResult[item, []float32]) (done []int, failed map[int]error) {
	failed = map[int]error{}
	for _, a := range res {
		if a.err != nil {
			failed[int(a.seq)] = a.err
		} else {
			done = append(done, int(a.seq))
		}
	}
	return done, failed
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
			res, err := testIsolator(newPoison(), nil).run(context.Background(), batchOf(16, tt.poison))
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			done, failed := split(res)
			var got, want []int
			for d, e := range failed {
				got = append(got, d)
				if !errors.Is(e, tt.err) {
					t.Errorf("record %d failed with %v; want %v", d, e, tt.err)
				}
			}
			for d := range tt.poison {
				want = append(want, d)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("failed records %v; want %v", got, want)
			}
			if len(done)+len(failed) != 16 {
				t.Errorf("%d answered + %d failed; want 16 in all", len(done), len(failed))
			}
		})
	}
}

func TestIsolatorRetriesTransientCrash(t *testing.T) {
	be := newPoison()
	be.flaky = 1
	retried := 0
	res, err := testIsolator(be, func([]unit[item], error) { retried++ }).run(context.Background(), batchOf(8, nil))
	done, failed := split(res)
	if err != nil || len(failed) != 0 || len(done) != 8 {
		t.Fatalf("got %d done, %d failed, err %v; want 8, 0, nil", len(done), len(failed), err)
	}
	if be.calls != 2 || retried != 1 {
		t.Errorf("calls %d, retries %d; want 2 and 1 (one crash, one retry of the whole batch)", be.calls, retried)
	}
}

func TestIsolatorFatalStops(t *testing.T) {
	be := &poisonBackend{poison: map[int32]error{9999: errQuar}}
	_, err := testIsolator(be, nil).run(context.Background(), batchOf(8, map[int]int32{3: 9999}))
	if !errors.Is(err, errQuar) {
		t.Fatalf("err = %v; want the quarantine error", err)
	}
	if be.calls != 1 {
		t.Errorf("calls = %d; want 1 (a fatal fault is not retried)", be.calls)
	}
}

// TestIsolatorInterleavesSuccesses: the batch, its retry, and at most one
// half fail before a healthy half succeeds (the supervisor quarantines a
// model after crashes in a row).
func TestIsolatorInterleavesSuccesses(t *testing.T) {
	for poison := 0; poison < 32; poison++ {
		be := newPoison()
		res, err := testIsolator(be, nil).run(context.Background(), batchOf(32, map[int]int32{poison: 9999}))
		_, failed := split(res)
		if err != nil || len(failed) != 1 {
			t.Fatalf("poison %d: %d failed, err %v; want 1, nil", poison, len(failed), err)
		}
		if be.longest > 3 {
			t.Errorf("poison %d: %d failed calls in a row; want at most 3", poison, be.longest)
		}
	}
}

// TestIsolatorChecksAnswers: an answer Check refuses fails its item alone,
// without a retry, and the rest of the batch is answered.
func TestIsolatorChecksAnswers(t *testing.T) {
	be := newPoison()
	res, err := testIsolator(be, nil).run(context.Background(), batchOf(8, map[int]int32{2: 7777}))
	done, failed := split(res)
	if err != nil || len(done) != 7 || len(failed) != 1 || failed[2] == nil {
		t.Fatalf("got done %v, failed %v, err %v; want record 2 failed alone", done, failed, err)
	}
	if be.calls != 1 {
		t.Errorf("calls = %d; want 1 (a refused answer is not retried)", be.calls)
	}
}
