package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"

	"github.com/synapse-embed/synapse/io/record"
)

// The test kind: a record is a record.Doc whose text holds words; an item is
// a window of at most `window` words, each word's id its length plus 1000
// ("POISON" is 9999, "REJECT" 8888, "NAN" 7777; "MISSING" makes the item
// fail before it is sent), wrapped in 1 … 2.

var (
	errCrash  = errors.New("worker crashed")
	errReject = errors.New("bad request")
	errQuar   = errors.New("quarantined")
	errGone   = errors.New("missing candidate")
)

type item struct {
	doc int64
	ids []int32
}

type testKind struct {
	window int // words per item
	group  int // records per packing group (Place); 0: all in one group
	call   func(ctx context.Context, items []item) ([][]float32, error)
}

func (k *testKind) Place(d record.Doc) (int64, int64) {
	if k.group <= 0 {
		return d.Index, 0
	}
	return d.Index, d.Index - d.Index%int64(k.group)
}

func (k *testKind) Weight(d record.Doc) int64 { return int64(len(d.Text)) }

func (k *testKind) Items(d record.Doc) ([]Work[item], error) {
	if strings.HasPrefix(d.Text, "BADROW") {
		return nil, d.Error("bad_row", "refused whole")
	}
	words := strings.Fields(d.Text)
	var out []Work[item]
	for start := 0; start == 0 || start < len(words); start += k.window {
		it := item{doc: d.Index, ids: []int32{1}}
		var err error
		for _, w := range words[start:min(start+k.window, len(words))] {
			id := int32(1000 + len(w))
			switch w {
			case "POISON":
				id = 9999
			case "REJECT":
				id = 8888
			case "NAN":
				id = 7777
			case "MISSING":
				err = errGone
			}
			it.ids = append(it.ids, id)
		}
		it.ids = append(it.ids, 2)
		out = append(out, Work[item]{Item: it, Err: err})
	}
	return out, nil
}

func (k *testKind) Tokens(it item) int { return len(it.ids) }

func (k *testKind) Call(ctx context.Context, items []item) ([][]float32, error) {
	return k.call(ctx, items)
}

func (k *testKind) Check(_ item, v []float32) error {
	if math.IsNaN(float64(v[0])) {
		return errors.New("NaN")
	}
	return nil
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

// poisonBackend fails any batch holding a poison id and counts calls; its
// answer for an item is the sum of its ids (NaN for 7777).
type poisonBackend struct {
	mu     sync.Mutex
	poison map[int32]error
	calls  int
	flaky  int // the first flaky calls crash whatever they hold
	streak int // failed calls in a row
	// longest is the longest streak of failed calls.
	longest int
}

func newPoison() *poisonBackend {
	return &poisonBackend{poison: map[int32]error{9999: errCrash, 8888: errReject}}
}

func (p *poisonBackend) call(_ context.Context, items []item) ([][]float32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	out, err := p.answer(items)
	if err != nil {
		p.streak++
		p.longest = max(p.longest, p.streak)
	} else {
		p.streak = 0
	}
	return out, err
}

func (p *poisonBackend) answer(items []item) ([][]float32, error) {
	if p.flaky > 0 {
		p.flaky--
		return nil, errCrash
	}
	out := make([][]float32, len(items))
	for i, it := range items {
		var sum float32
		for _, id := range it.ids {
			if err, ok := p.poison[id]; ok {
				return nil, err
			}
			if id == 7777 {
				sum = float32(math.NaN())
				break
			}
			sum += float32(id)
		}
		out[i] = []float32{sum, float32(len(it.ids))}
	}
	return out, nil
}

// placeCall's answer is an item's place in its batch and the batch's length
// in items and tokens: it tells batch compositions apart, as llama.cpp's
// rounding does.
func placeCall(_ context.Context, items []item) ([][]float32, error) {
	tokens := 0
	for _, it := range items {
		tokens += len(it.ids)
	}
	out := make([][]float32, len(items))
	for i := range items {
		out[i] = []float32{float32(i), float32(len(items)), float32(tokens)}
	}
	return out, nil
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

// indexSource is a sliceSource that starts at the first record with an
// Index of at least start, like corpus.ReadOptions.StartIndex.
func indexSource(items []any, start int64) *sliceSource {
	for i, it := range items {
		if d, ok := it.(record.Doc); ok && d.Index >= start {
			return &sliceSource{items: items[i:]}
		}
	}
	return &sliceSource{}
}

type result = Result[record.Doc, item, []float32]

type sliceSink struct{ got []result }

func (s *sliceSink) Put(r result) error { s.got = append(s.got, r); return nil }

func corpus(n int, poison map[int]string) []any {
	var items []any
	for i := 0; i < n; i++ {
		words := strings.Repeat("w ", i%13+1) + strings.Repeat("longer ", i%5)
		if p, ok := poison[i]; ok {
			words += p
		}
		items = append(items, record.Doc{Source: "c.jsonl", Line: i + 1, Index: int64(i), ID: fmt.Sprint(i), Text: words})
	}
	return items
}

// answers lists every answer of a run in order.
func answers(rs []result) [][]float32 {
	var out [][]float32
	for _, r := range rs {
		for _, d := range r.Done {
			out = append(out, d.Out)
		}
	}
	return out
}
