package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/io/record"
)

// progressSource is a sliceSource whose records are 100 JSONL bytes and
// one Parquet row each, as corpus.Reader's Progress counts them.
type progressSource struct{ sliceSource }

func (s *progressSource) Progress() record.Progress {
	return record.Progress{Records: int64(s.i), ParquetRows: int64(s.i), JSONLBytes: 100 * int64(s.i)}
}

// aheadSink holds the first record until the reader is 20 records ahead of
// it (polling, with a deadline: the reader has no event to wait on), and checks at each Put that the work done is the input up to the
// records the sink had before.
type aheadSink struct {
	t     *testing.T
	st    *Stats
	n     int
	ahead int64 // DoneBytes when the reader was 20 records ahead
}

func (s *aheadSink) Put(r result) error {
	if s.n == 0 {
		deadline := time.Now().Add(10 * time.Second)
		for s.st.InputBytes.Load() < 2000 {
			if time.Now().After(deadline) {
				return fmt.Errorf("the reader read %d bytes in ten seconds; want 2000 (20 records) ahead of the sink", s.st.InputBytes.Load())
			}
			time.Sleep(time.Millisecond)
		}
		s.ahead = s.st.DoneBytes.Load()
	}
	if got, want := s.st.DoneBytes.Load(), 100*r.Index; got != want {
		s.t.Errorf("record %d put with DoneBytes %d; want %d (the records written before it)", r.Index, got, want)
	}
	if got, want := s.st.DoneRows.Load(), r.Index; got != want {
		s.t.Errorf("record %d put with DoneRows %d; want %d", r.Index, got, want)
	}
	s.n++
	return nil
}

// TestRunDoneIsWritten: DoneBytes and DoneRows, the progress line's share
// and ETA, count the input up to the last record the sink has, never the
// records the reader has read ahead (issue 42: 70 % at 0 rows).
func TestRunDoneIsWritten(t *testing.T) {
	k := &testKind{window: 4, group: 16, call: newPoison().call}
	st := &Stats{}
	cfg := Config{BatchTokens: 40, Window: 16, MaxGroup: 16, Workers: 2, Preparers: 3, InFlight: 40, Classify: classifyTest, Stats: st}
	sink := &aheadSink{t: t, st: st}
	if err := Run(context.Background(), cfg, Kind[record.Doc, item, []float32](k), &progressSource{sliceSource{items: corpus(100, nil)}}, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if sink.ahead != 0 {
		t.Errorf("DoneBytes %d with the reader 20 records ahead and nothing written; want 0", sink.ahead)
	}
	if st.DoneBytes.Load() != 10000 || st.DoneRows.Load() != 100 || sink.n != 100 {
		t.Errorf("after the run: DoneBytes %d, DoneRows %d, %d records put; want 10000, 100, 100", st.DoneBytes.Load(), st.DoneRows.Load(), sink.n)
	}
}
