package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/dataio/record"
	"github.com/synapse-embed/synapse/tokenize"
)

// wordTokenizer gives each space-separated word the id of its length plus 1000,
// and the word "POISON" the id 9999.
type wordTokenizer struct{}

func (wordTokenizer) Vocab() *tokenize.Vocab { return &tokenize.Vocab{} }

func (wordTokenizer) Affixes() (prefix, suffix []int32) { return []int32{1}, []int32{2} }

func (wordTokenizer) Tokenize(text string, _ tokenize.Options) tokenize.Result {
	var toks []tokenize.Token
	off := 0
	for _, w := range strings.Split(text, " ") {
		if w != "" {
			id := int32(1000 + len(w))
			if w == "POISON" {
				id = 9999
			}
			toks = append(toks, tokenize.Token{ID: id, Start: int32(off), End: int32(off + len(w))})
		}
		off += len(w) + 1
	}
	return tokenize.Result{Tokens: toks, Text: text}
}

type sliceSource struct {
	items []any // record.Doc or error
	i     int
}

func (s *sliceSource) Next() (record.Doc, error) {
	if s.i == len(s.items) {
		return record.Doc{}, io.EOF
	}
	it := s.items[s.i]
	s.i++
	if err, ok := it.(error); ok {
		return record.Doc{}, err
	}
	return it.(record.Doc), nil
}

type sliceSink struct{ got []DocResult }

func (s *sliceSink) Put(r DocResult) error { s.got = append(s.got, r); return nil }

func corpus(n int, poison map[int]bool) []any {
	var items []any
	for i := 0; i < n; i++ {
		words := strings.Repeat("w ", i%13+1) + strings.Repeat("longer ", i%5)
		if poison[i] {
			words += "POISON"
		}
		items = append(items, record.Doc{Source: "c.jsonl", Line: i + 1, Index: int64(i), ID: fmt.Sprint(i), Text: words})
	}
	return items
}

// sumBackend returns, per chunk, the sum of its ids; it crashes on id 9999.
type sumBackend struct{ poisonBackend }

func (s *sumBackend) Embed(ctx context.Context, b Batch) ([][]float32, error) {
	if _, err := s.poisonBackend.Embed(ctx, b); err != nil {
		return nil, err
	}
	out := make([][]float32, len(b.Chunks))
	for i, c := range b.Chunks {
		var sum float32
		for _, id := range c.IDs {
			sum += float32(id)
		}
		out[i] = []float32{sum, float32(len(c.IDs))}
	}
	return out, nil
}

func runCorpus(t *testing.T, workers int, items []any) ([]DocResult, *Stats) {
	t.Helper()
	cfg := Config{
		Tokenizer: wordTokenizer{}, Chunking: Chunking{Window: 6, Overlap: 2, Prefix: []int32{1}, Suffix: []int32{2}},
		BatchTokens: 40, GroupWindow: 16, Workers: workers, Tokenizers: 3, InFlight: 40,
		Backend:  &sumBackend{poisonBackend{poison: map[int32]error{9999: errCrash}}},
		Classify: classifyTest, Stats: &Stats{},
	}
	sink := &sliceSink{}
	if err := Run(context.Background(), cfg, &sliceSource{items: items}, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sink.got, cfg.Stats
}

func TestRunOrderAndAccounting(t *testing.T) {
	items := corpus(300, map[int]bool{17: true, 200: true})
	rowErr := &record.RowError{Source: "c.jsonl", Line: 301, Index: 300, Reason: record.ReasonMalformedJSON}
	items = append(items, rowErr)
	items = append(items, &record.FileError{Source: "bad.parquet", RowGroup: -1, Err: errors.New("no footer")})
	got1, st := runCorpus(t, 1, items)
	if len(got1) != len(items) {
		t.Fatalf("sink got %d records; want %d", len(got1), len(items))
	}
	for i, r := range got1[:301] { // 300: the reader's RowError, in its place
		if r.Doc.Index != int64(i) {
			t.Fatalf("record %d has index %d; want input order", i, r.Doc.Index)
		}
		wantErr := i == 17 || i == 200 || i == 300
		if (len(r.Errors) > 0) != wantErr {
			t.Errorf("doc %d: errors %v; want errors=%v", i, r.Errors, wantErr)
		}
		for j, c := range r.Chunks {
			if j > 0 && c.Chunk.Index <= r.Chunks[j-1].Chunk.Index {
				t.Errorf("doc %d: chunks out of order", i)
			}
		}
	}
	if got1[300].Errors[0] != rowErr || got1[301].File == nil {
		t.Errorf("reader errors not passed through in order: %+v %+v", got1[300], got1[301])
	}
	if st.Read.Load() != 301 || st.Embedded.Load()+st.Failed.Load() != st.Read.Load() || st.FileErrors.Load() != 1 {
		t.Errorf("stats read %d embedded %d failed %d files %d; want read = embedded + failed = 301, 1 file error",
			st.Read.Load(), st.Embedded.Load(), st.Failed.Load(), st.FileErrors.Load())
	}
	for _, w := range []int{2, 3} {
		got, _ := runCorpus(t, w, items)
		if !reflect.DeepEqual(vectors(got), vectors(got1)) {
			t.Errorf("%d workers: results differ from 1 worker", w)
		}
	}
}

func vectors(rs []DocResult) [][]float32 {
	var out [][]float32
	for _, r := range rs {
		for _, c := range r.Chunks {
			out = append(out, c.Vector)
		}
	}
	return out
}

func TestRunStopsOnFatal(t *testing.T) {
	cfg := Config{
		Tokenizer: wordTokenizer{}, Chunking: Chunking{Window: 6}, BatchTokens: 40, Workers: 2,
		Backend:  &sumBackend{poisonBackend{poison: map[int32]error{9999: errQuar}}},
		Classify: classifyTest,
	}
	err := Run(context.Background(), cfg, &sliceSource{items: corpus(100, map[int]bool{50: true})}, &sliceSink{})
	if !errors.Is(err, errQuar) {
		t.Fatalf("Run = %v; want the fatal error", err)
	}
}

// placeBackend's vector is a chunk's place in its batch and the batch's
// length in chunks and tokens: it tells batch compositions apart, as
// llama.cpp's rounding does.
type placeBackend struct{}

func (placeBackend) Embed(_ context.Context, b Batch) ([][]float32, error) {
	out := make([][]float32, len(b.Chunks))
	for i := range b.Chunks {
		out[i] = []float32{float32(i), float32(len(b.Chunks)), float32(b.Tokens)}
	}
	return out, nil
}

// indexSource is a sliceSource that starts at the first record with an
// Index of at least start, like dataio's ReadOptions.StartIndex.
func indexSource(items []any, start int64) *sliceSource {
	for i, it := range items {
		if d, ok := it.(record.Doc); ok && d.Index >= start {
			return &sliceSource{items: items[i:]}
		}
	}
	return &sliceSource{}
}

// TestRunReplayGivesTheSameBatches resumes runs at various points: from
// GroupStart(next) with Replay = next, every record from next on gets the
// batch places of an uninterrupted run, and the ones before are neither
// counted nor put.
func TestRunReplayGivesTheSameBatches(t *testing.T) {
	items := corpus(700, nil)
	run := func(start, replay int64) ([]DocResult, *Stats) {
		cfg := Config{Tokenizer: wordTokenizer{}, Chunking: Chunking{Window: 6, Prefix: []int32{1}, Suffix: []int32{2}},
			BatchTokens: 40, GroupWindow: 32, Replay: replay, Workers: 2, Backend: placeBackend{}, Classify: classifyTest,
			Stats: &Stats{}}
		sink := &sliceSink{}
		if err := Run(context.Background(), cfg, indexSource(items, start), sink); err != nil {
			t.Fatalf("Run: %v", err)
		}
		return sink.got, cfg.Stats
	}
	full, _ := run(0, 0)
	for _, next := range []int64{1, 31, 32, 100, 333, 699} {
		got, st := run(GroupStart(next, 32), next)
		if len(got) != 700-int(next) || got[0].Doc.Index != next {
			t.Fatalf("resume at %d: %d records from index %d; want %d from %d", next, len(got), got[0].Doc.Index, 700-next, next)
		}
		if !reflect.DeepEqual(vectors(got), vectors(full[next:])) {
			t.Errorf("resume at %d: batch places differ from an uninterrupted run", next)
		}
		if r := st.Read.Load(); r != 700-next {
			t.Errorf("resume at %d: %d records counted; want %d", next, r, 700-next)
		}
		if next%32 != 0 { // without replay the batches differ: the test can fail
			noReplay, _ := run(next, 0)
			if reflect.DeepEqual(vectors(noReplay), vectors(full[next:])) {
				t.Errorf("resume at %d without replay gives the same batches; the test does not tell", next)
			}
		}
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

func (s *meterSink) Put(r DocResult) error {
	s.now.Add(-int64(len(r.Doc.Text)))
	return s.sliceSink.Put(r)
}

// slowBackend is placeBackend taking its time, so that the reader runs ahead.
type slowBackend struct{ placeBackend }

func (s slowBackend) Embed(ctx context.Context, b Batch) ([][]float32, error) {
	time.Sleep(100 * time.Microsecond)
	return s.placeBackend.Embed(ctx, b)
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
// InFlightBytes (plus the one document the reader holds while it waits), the
// batches stay independent of the worker count and of a resume, and
// documents longer than the bound pass without stalling the run.
func TestRunBoundsInFlightBytes(t *testing.T) {
	const bound = 2000
	sizes := make([]int, 400)
	for i := range sizes {
		sizes[i] = 40 + (i*97)%(bound/2-40) // up to half the bound
	}
	items := sizedCorpus(sizes)
	run := func(workers int, start, replay, bytes int64) ([]DocResult, int64) {
		t.Helper()
		var now, peak atomic.Int64
		cfg := Config{Tokenizer: wordTokenizer{}, Chunking: Chunking{Window: 30, Prefix: []int32{1}, Suffix: []int32{2}},
			BatchTokens: 64, GroupWindow: 32, Replay: replay, Workers: workers, InFlightBytes: bytes,
			Backend: slowBackend{}, Classify: classifyTest}
		sink := &meterSink{now: &now}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := Run(ctx, cfg, meterSource{indexSource(items, start), &now, &peak}, sink); err != nil {
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
	if len(one) != len(items) || len(vectors(one)) != len(vectors(unbounded)) {
		t.Fatalf("bounded run: %d records, %d chunks; want %d, %d", len(one), len(vectors(one)), len(items), len(vectors(unbounded)))
	}
	for i, r := range one {
		if r.Doc.Index != int64(i) {
			t.Fatalf("record %d has index %d; want input order", i, r.Doc.Index)
		}
	}
	three, peak := run(3, 0, 0, bound)
	if peak > bound+bound/2 {
		t.Errorf("3 workers: peak %d text bytes in flight; want at most %d", peak, bound+bound/2)
	}
	if !reflect.DeepEqual(vectors(three), vectors(one)) {
		t.Errorf("3 workers: batch places differ from 1 worker under the byte bound")
	}
	for _, next := range []int64{45, 200} {
		got, _ := run(2, GroupStart(next, 32), next, bound)
		if !reflect.DeepEqual(vectors(got), vectors(one[next:])) {
			t.Errorf("resume at %d: batch places differ from an uninterrupted run under the byte bound", next)
		}
	}

	huge := sizedCorpus([]int{100, 5 * bound, 300, 3 * bound, 3 * bound, 50, 7 * bound, 20})
	var now, peak2 atomic.Int64
	cfg := Config{Tokenizer: wordTokenizer{}, Chunking: Chunking{Window: 30}, BatchTokens: 64, Workers: 2,
		InFlightBytes: bound, Backend: slowBackend{}, Classify: classifyTest}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sink := &meterSink{now: &now}
	if err := Run(ctx, cfg, meterSource{&sliceSource{items: huge}, &now, &peak2}, sink); err != nil {
		t.Fatalf("documents longer than the bound: Run = %v", err)
	}
	if len(sink.got) != len(huge) {
		t.Errorf("documents longer than the bound: %d records reached the sink; want %d", len(sink.got), len(huge))
	}
}
