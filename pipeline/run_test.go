package pipeline

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/io/record"
)

func runCorpus(t *testing.T, workers int, items []any) ([]result, *Stats) {
	t.Helper()
	k := &testKind{window: 4, group: 16, call: newPoison().call}
	cfg := Config{BatchTokens: 40, Window: 16, MaxGroup: 16, Workers: workers, Preparers: 3, InFlight: 40,
		Classify: classifyTest, Stats: &Stats{}}
	sink := &sliceSink{}
	if err := Run(context.Background(), cfg, Kind[record.Doc, item, []float32](k), &sliceSource{items: items}, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sink.got, cfg.Stats
}

// TestRunOrderAndAccounting: every record reaches the sink once, in input
// order, with its items in order; failures stay with their records and the
// counters add up.
func TestRunOrderAndAccounting(t *testing.T) {
	bad := map[int]string{17: "POISON", 200: "REJECT", 201: "NAN", 202: "MISSING", 203: "w w w w w w w w POISON"}
	items := corpus(300, bad)
	items = append(items, record.Doc{Source: "c.jsonl", Line: 301, Index: 300, Text: "BADROW"})
	rowErr := &record.RowError{Source: "c.jsonl", Line: 302, Index: 301, Reason: record.ReasonMalformedJSON}
	items = append(items, rowErr)
	items = append(items, &record.FileError{Source: "bad.parquet", RowGroup: -1, Index: 302, Err: errors.New("no footer")})
	got, st := runCorpus(t, 1, items)
	if len(got) != len(items) {
		t.Fatalf("sink got %d records; want %d", len(got), len(items))
	}
	for i, r := range got[:302] {
		if r.Index != int64(i) {
			t.Fatalf("record %d has index %d; want input order", i, r.Index)
		}
		_, isBad := bad[i]
		if wantErr := isBad || i >= 300; r.OK() == wantErr {
			t.Errorf("record %d: OK() = %v (done %d, failed %v, row error %v); want %v", i, r.OK(), len(r.Done), r.Failed, r.RowErr, !wantErr)
		}
		for j, d := range r.Done {
			if j > 0 && d.Ord <= r.Done[j-1].Ord {
				t.Errorf("record %d: items out of order", i)
			}
		}
	}
	// A poisoned item fails alone: the other items of record 203 are answered.
	if r := got[203]; len(r.Failed) != 1 || r.Failed[0].Ord != 5 || len(r.Done) != 5 || !errors.Is(r.Failed[0].Err, errCrash) {
		t.Errorf("record 203: done %d, failed %+v; want items 0 to 4 answered, item 5 failed with the crash", len(r.Done), r.Failed)
	}
	if r := got[202]; len(r.Failed) != 1 || !errors.Is(r.Failed[0].Err, errGone) {
		t.Errorf("record 202: failed %+v; want its refused item, with the refusal", r.Failed)
	}
	if got[300].RowErr == nil || got[300].RowErr.Reason != "bad_row" || got[301].RowErr != rowErr || got[302].File == nil {
		t.Errorf("refused record and reader errors not passed through in order: %+v %+v %+v", got[300], got[301], got[302])
	}
	c := st.Snapshot()
	if c.Read != 302 || c.OK+c.Failed != c.Read || c.Failed != 7 || c.FileErrors != 1 || c.ItemFailures != 5 {
		t.Errorf("counters %+v; want read = ok + failed = 302, 7 failed, 5 item failures, 1 file error", c)
	}
	for _, w := range []int{2, 3} {
		other, _ := runCorpus(t, w, items)
		if !reflect.DeepEqual(answers(other), answers(got)) {
			t.Errorf("%d workers: answers differ from 1 worker", w)
		}
	}
}

func TestRunStopsOnFatal(t *testing.T) {
	be := &poisonBackend{poison: map[int32]error{9999: errQuar}}
	k := &testKind{window: 4, call: be.call}
	cfg := Config{BatchTokens: 40, Workers: 2, Classify: classifyTest}
	err := Run(context.Background(), cfg, Kind[record.Doc, item, []float32](k), &sliceSource{items: corpus(100, map[int]string{50: "POISON"})}, &sliceSink{})
	if !errors.Is(err, errQuar) {
		t.Fatalf("Run = %v; want the fatal error", err)
	}
}

// TestRunMaxItems: a kind whose request holds one item gets one per call.
func TestRunMaxItems(t *testing.T) {
	var most atomic.Int64
	k := &testKind{window: 2, call: func(ctx context.Context, items []item) ([][]float32, error) {
		for n := int64(len(items)); n > most.Load(); {
			most.CompareAndSwap(most.Load(), n)
		}
		return placeCall(ctx, items)
	}}
	cfg := Config{BatchTokens: 1000, MaxItems: 1, Workers: 2, Classify: classifyTest}
	sink := &sliceSink{}
	if err := Run(context.Background(), cfg, Kind[record.Doc, item, []float32](k), &sliceSource{items: corpus(50, nil)}, sink); err != nil {
		t.Fatal(err)
	}
	if most.Load() != 1 || len(sink.got) != 50 {
		t.Errorf("largest request %d items, %d records; want 1 and 50", most.Load(), len(sink.got))
	}
}

// TestRunReplayGivesTheSameBatches resumes runs at various points: from the
// group start of `next` with Replay = next, every record from next on gets
// the batch places of an uninterrupted run, and the ones before are neither
// counted nor put.
func TestRunReplayGivesTheSameBatches(t *testing.T) {
	items := corpus(700, nil)
	run := func(start, replay int64) ([]result, *Stats) {
		k := &testKind{window: 6, group: 32, call: placeCall}
		cfg := Config{BatchTokens: 40, Window: 32, MaxGroup: 32, Replay: replay, Workers: 2, Classify: classifyTest, Stats: &Stats{}}
		sink := &sliceSink{}
		if err := Run(context.Background(), cfg, Kind[record.Doc, item, []float32](k), indexSource(items, start), sink); err != nil {
			t.Fatalf("Run: %v", err)
		}
		return sink.got, cfg.Stats
	}
	full, _ := run(0, 0)
	for _, next := range []int64{1, 31, 32, 100, 333, 699} {
		got, st := run(next-next%32, next)
		if len(got) != 700-int(next) || got[0].Index != next {
			t.Fatalf("resume at %d: %d records from index %d; want %d from %d", next, len(got), got[0].Index, 700-next, next)
		}
		if !reflect.DeepEqual(answers(got), answers(full[next:])) {
			t.Errorf("resume at %d: batch places differ from an uninterrupted run", next)
		}
		if r := st.Read.Load(); r != 700-next {
			t.Errorf("resume at %d: %d records counted; want %d", next, r, 700-next)
		}
		if next%32 != 0 { // without replay the batches differ: the test can fail
			noReplay, _ := run(next, 0)
			if reflect.DeepEqual(answers(noReplay), answers(full[next:])) {
				t.Errorf("resume at %d without replay gives the same batches; the test does not tell", next)
			}
		}
	}
}

// TestStatsRestore: a resumed run's counters start from the interrupted
// run's, and Restored tells this run's own work apart.
func TestStatsRestore(t *testing.T) {
	st := &Stats{}
	st.Restore(Counters{Read: 10, OK: 8, Failed: 2, Items: 30, Tokens: 900, ItemFailures: 2})
	k := &testKind{window: 4, call: placeCall}
	cfg := Config{BatchTokens: 40, Classify: classifyTest, Stats: st}
	if err := Run(context.Background(), cfg, Kind[record.Doc, item, []float32](k), &sliceSource{items: corpus(5, nil)}, &sliceSink{}); err != nil {
		t.Fatal(err)
	}
	c := st.Snapshot()
	if c.Read != 15 || c.OK != 13 || c.Failed != 2 {
		t.Errorf("counters %+v; want read 15 = 13 ok + 2 failed", c)
	}
	if own := c.Minus(st.Restored()); own.Read != 5 || own.Failed != 0 {
		t.Errorf("this run's own counters %+v; want 5 read, none failed", own)
	}
}

// meterSource and meterSink track the text bytes between reader and sink.
type meterSource struct {
	*sliceSource
	now, peak *atomic.Int64
}

func (s meterSource) Next() (record.Doc, error) {
	d, err := s.sliceSource.Next()
	if err == nil {
		n := s.now.Add(int64(len(d.Text)))
		for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
		}
	}
	return d, err
}

type meterSink struct {
	sliceSink
	now *atomic.Int64
}

func (s *meterSink) Put(r result) error {
	s.now.Add(-int64(len(r.Rec.Text)))
	return s.sliceSink.Put(r)
}

// slowCall is placeCall taking its time, so that the reader runs ahead.
func slowCall(ctx context.Context, items []item) ([][]float32, error) {
	time.Sleep(100 * time.Microsecond)
	return placeCall(ctx, items)
}

// sizedCorpus has documents of the given text lengths (in bytes, even).
func sizedCorpus(sizes []int) []any {
	items := make([]any, len(sizes))
	for i, n := range sizes {
		items[i] = record.Doc{Source: "s.jsonl", Line: i + 1, Index: int64(i), ID: fmt.Sprint(i), Text: strings.Repeat("w ", n/2)}
	}
	return items
}

// TestRunBoundsInFlightBytes: the text between reader and sink stays within
// InFlightBytes (plus the one record the reader holds while it waits), the
// batches stay independent of the worker count and of a resume, and
// records longer than the bound pass without stalling the run.
func TestRunBoundsInFlightBytes(t *testing.T) {
	const bound = 2000
	sizes := make([]int, 400)
	for i := range sizes {
		sizes[i] = 40 + (i*97)%(bound/2-40) // up to half the bound
	}
	items := sizedCorpus(sizes)
	run := func(workers int, start, replay, bytes int64) ([]result, int64) {
		t.Helper()
		var now, peak atomic.Int64
		k := &testKind{window: 30, group: 32, call: slowCall}
		cfg := Config{BatchTokens: 64, Window: 32, MaxGroup: 32, Replay: replay, Workers: workers, InFlightBytes: bytes, Classify: classifyTest}
		sink := &meterSink{now: &now}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := Run(ctx, cfg, Kind[record.Doc, item, []float32](k), meterSource{indexSource(items, start), &now, &peak}, sink); err != nil {
			t.Fatalf("Run (%d workers, bound %d): %v", workers, bytes, err)
		}
		return sink.got, peak.Load()
	}
	unbounded, peak := run(2, 0, 0, 1<<40)
	if peak <= 2*bound {
		t.Fatalf("without a byte bound the peak is %d bytes: the corpus does not test the bound", peak)
	}
	one, peak := run(1, 0, 0, bound)
	if peak > bound+bound/2 {
		t.Errorf("1 worker: peak %d text bytes in flight; want at most %d", peak, bound+bound/2)
	}
	if len(one) != len(items) || len(answers(one)) != len(answers(unbounded)) {
		t.Fatalf("bounded run: %d records, %d items; want %d, %d", len(one), len(answers(one)), len(items), len(answers(unbounded)))
	}
	for i, r := range one {
		if r.Index != int64(i) {
			t.Fatalf("record %d has index %d; want input order", i, r.Index)
		}
	}
	three, peak := run(3, 0, 0, bound)
	if peak > bound+bound/2 {
		t.Errorf("3 workers: peak %d text bytes in flight; want at most %d", peak, bound+bound/2)
	}
	if !reflect.DeepEqual(answers(three), answers(one)) {
		t.Errorf("3 workers: batch places differ from 1 worker under the byte bound")
	}
	for _, next := range []int64{45, 200} {
		got, _ := run(2, next-next%32, next, bound)
		if !reflect.DeepEqual(answers(got), answers(one[next:])) {
			t.Errorf("resume at %d: batch places differ from an uninterrupted run under the byte bound", next)
		}
	}

	huge := sizedCorpus([]int{100, 5 * bound, 300, 3 * bound, 3 * bound, 50, 7 * bound, 20})
	var now, peak2 atomic.Int64
	k := &testKind{window: 30, call: slowCall}
	cfg := Config{BatchTokens: 64, Workers: 2, InFlightBytes: bound, Classify: classifyTest}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sink := &meterSink{now: &now}
	if err := Run(ctx, cfg, Kind[record.Doc, item, []float32](k), meterSource{&sliceSource{items: huge}, &now, &peak2}, sink); err != nil {
		t.Fatalf("records longer than the bound: Run = %v", err)
	}
	if len(sink.got) != len(huge) {
		t.Errorf("records longer than the bound: %d records reached the sink; want %d", len(sink.got), len(huge))
	}
}

// TestRunDrain closes Config.Drain during the k-th request: the run stops
// sending, lets the requests in flight finish, writes a contiguous prefix of
// the records (their answers those of an uninterrupted run) and returns
// ErrDrained; a resumed run from there (replaying the last group, its
// replayed-only batches skipped) completes the answers of an uninterrupted
// run, and the work done twice is exactly the answers dropped after the
// gap plus the replayed items that were sent.
func TestRunDrain(t *testing.T) {
	items := corpus(700, nil)
	run := func(start, replay int64, drainAt int64) ([]result, *Stats, error) {
		drain := make(chan struct{})
		var calls atomic.Int64
		k := &testKind{window: 6, group: 32, call: func(ctx context.Context, its []item) ([][]float32, error) {
			if calls.Add(1) == drainAt {
				close(drain)
			}
			return placeCall(ctx, its)
		}}
		cfg := Config{BatchTokens: 40, Window: 32, MaxGroup: 32, Replay: replay, Workers: 3, Classify: classifyTest,
			Stats: &Stats{}, Drain: drain, SkipReplayed: true}
		sink := &sliceSink{}
		err := Run(context.Background(), cfg, Kind[record.Doc, item, []float32](k), indexSource(items, start), sink)
		return sink.got, cfg.Stats, err
	}
	full, fst, err := run(0, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{1, 2, 17, 40, 90} {
		t.Run(fmt.Sprint("drain at request ", at), func(t *testing.T) {
			got, st, err := run(0, 0, at)
			if !errors.Is(err, ErrDrained) {
				t.Fatalf("Run = %v; want ErrDrained", err)
			}
			for i, r := range got {
				if r.Index != int64(i) {
					t.Fatalf("record %d of the drained run has index %d; want a contiguous prefix", i, r.Index)
				}
			}
			n := int64(len(got))
			if !reflect.DeepEqual(answers(got), answers(full[:n])) {
				t.Errorf("drained run's %d records: answers differ from an uninterrupted run's", n)
			}
			rest, rst, err := run(n-n%32, n, -1)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(append(answers(got), answers(rest)...), answers(full)) {
				t.Errorf("drained at record %d and resumed: answers differ from an uninterrupted run's", n)
			}
			twice := st.RequestItems.Load() + rst.RequestItems.Load() - fst.RequestItems.Load()
			sentReplay := rst.ReplayItems.Load() - rst.SkippedReplay.Load()
			if want := st.DroppedItems.Load() + sentReplay; twice != want {
				t.Errorf("items done twice %d; want %d dropped after the gap + %d replayed and sent", twice, st.DroppedItems.Load(), sentReplay)
			}
			if sentReplay > 32*6 { // at most one packing window: Window items
				t.Errorf("%d replayed items sent; want at most one window's", sentReplay)
			}
			t.Logf("kept %d records; %d requests finished in the drain; %d items dropped, %d replayed (%d of them sent)",
				n, st.DrainFinished.Load(), st.DroppedItems.Load(), rst.ReplayItems.Load(), sentReplay)
		})
	}
}
