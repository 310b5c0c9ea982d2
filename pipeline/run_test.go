package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

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
			toks = append(toks, tokenize.Token{ID: id, Start: off, End: off + len(w)})
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
