package job

import (
	"fmt"
	"math"
	"slices"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/previous"
	"github.com/synapse-embed/synapse/io/record"
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/pipeline"
)

// embedSink turns results into output rows.
type embedSink struct {
	w      *output.Writer
	dims   int
	renorm bool
	q      *vector.Quantizer // the output's dtype
	inc    *Incremental
	window *window[seen]   // --dedup: the rows of the last distinct texts
	stats  *pipeline.Stats // a duplicate of a failed document fails too: the sink recounts it
	// withText: rows carry their chunks' text (--with-text)
	withText bool
}

func (s *embedSink) Put(r pipeline.Result[doc, Chunk, []float32]) error {
	return putRows(s, r, s.setDense)
}

// Replay takes a record the interrupted run wrote, replayed by a resumed
// run: its text joins the dedup window, as in the uninterrupted run.
func (s *embedSink) Replay(r pipeline.Result[doc, Chunk, []float32]) {
	replayRows(s, r, s.setDense)
}

// setDense puts a chunk's vector in its row, truncated and in the dtype.
func (s *embedSink) setDense(row *output.EmbedRow, out []float32) {
	if v := s.vector(out); s.q == nil || s.q.Dtype == vector.Float32 {
		row.Embedding = v
	} else {
		row.Vector = s.q.Append(make([]byte, 0, s.q.Dtype.Width(s.dims)), v)
	}
}

// putRows writes a result's rows, whatever the vectors are: set puts an
// answer in its row.
func putRows[O any](s *embedSink, r pipeline.Result[doc, Chunk, O], set func(*output.EmbedRow, O)) error {
	if r.File != nil {
		return s.w.PutFileError(r.File)
	}
	if r.RowErr != nil {
		return s.w.Put(r.Index, r.Group, nil, []*record.RowError{r.RowErr})
	}
	d := r.Rec
	if s.window != nil {
		s.window.enter(d.Group)
	}
	rows, errs, tokens := docRows(s, r, set)
	switch d.status {
	case previous.New:
		s.inc.New += b2i(d.prev)
	case previous.Changed:
		s.inc.Changed++
	case previous.Unchanged:
		s.inc.Unchanged++
	}
	switch {
	case d.kept:
		s.inc.Reused++
		return s.w.PutKept(r.Index, r.Group, d.ID)
	case d.reuse != nil:
		s.inc.Reused++
		s.inc.TokensSaved += d.tokens
	case d.dup:
		s.inc.Deduped++
		s.inc.TokensSaved += tokens
	default:
		s.inc.Embedded++
	}
	cut := cutDoc(s, r)
	s.inc.Truncated += b2i(cut)
	s.inc.NotFinite += b2i(d.badPrev)
	if s.window != nil {
		if _, ok := s.window.get(d.hash); !ok {
			s.window.add(d.hash, seen{id: d.ID, rows: rows, failed: errs, cut: cut})
		}
	}
	return s.w.Put(r.Index, r.Group, rows, errs)
}

// cutDoc tells whether --truncate left tokens of a written document out:
// of its chunk, or of the identical text a duplicate copies.
func cutDoc[O any](s *embedSink, r pipeline.Result[doc, Chunk, O]) bool {
	if r.Rec.dup {
		orig, ok := s.window.get(r.Rec.hash)
		return ok && orig.cut
	}
	return slices.ContainsFunc(r.Done, func(dn pipeline.Done[Chunk, O]) bool { return dn.Item.Cut })
}

// replayRows is Replay's work for any vectors.
func replayRows[O any](s *embedSink, r pipeline.Result[doc, Chunk, O], set func(*output.EmbedRow, O)) {
	if s.window == nil || r.File != nil || r.RowErr != nil || r.Rec.dup || r.Rec.kept {
		return
	}
	d := r.Rec
	s.window.enter(d.Group)
	if _, ok := s.window.get(d.hash); !ok {
		rows, errs, _ := docRows(s, r, set)
		s.window.add(d.hash, seen{id: d.ID, rows: rows, failed: errs, cut: cutDoc(s, r)})
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// rows are a document's output rows and error records: copied from the
// previous output, from an identical text, or embedded; and their tokens.
func docRows[O any](s *embedSink, r pipeline.Result[doc, Chunk, O], set func(*output.EmbedRow, O)) (output.EmbedRows, []*record.RowError, int64) {
	d := r.Rec
	if d.reuse != nil {
		return d.reuse, nil, d.tokens
	}
	if d.dup {
		return s.copyOf(d)
	}
	var hash [output.DocHashSize]byte // zeros: a document with a failed chunk is never reused
	if len(r.Failed) == 0 {
		hash = d.hash
	}
	rows := make(output.EmbedRows, len(r.Done))
	var tokens int64
	for i, dn := range r.Done {
		c := dn.Item
		rows[i] = output.EmbedRow{ID: d.ID, Chunk: c.Index, TokenStart: c.TokenStart, TokenEnd: c.TokenEnd,
			ByteStart: c.ByteStart, ByteEnd: c.ByteEnd, NTokens: int32(len(c.IDs)), DocHash: hash}
		set(&rows[i], dn.Out)
		tokens += int64(len(c.IDs))
	}
	if err := output.FillSpans(d.Text, rows, s.withText); err != nil { // the tokenizer's spans index d.Text
		return nil, []*record.RowError{d.Error(ReasonEngineError, "internal: "+err.Error())}, 0
	}
	return rows, itemErrors(r.Failed, func(f pipeline.Failed[Chunk]) *record.RowError {
		reason, detail, log := describe(f.Err)
		return d.ChunkError(int(f.Item.Index), reason, detail, log)
	}), tokens
}

// copyOf is a duplicate's rows: those of the identical text in the window,
// under its own id; or, when that document failed, the same failures.
func (s *embedSink) copyOf(d doc) (output.EmbedRows, []*record.RowError, int64) {
	orig, ok := s.window.get(d.hash)
	if !ok { // the source and the sink update their windows alike: a bug
		return nil, []*record.RowError{d.Error(ReasonEngineError, "internal: --dedup lost the identical text")}, 0
	}
	rows := slices.Clone(orig.rows)
	var tokens int64
	for i := range rows {
		rows[i].ID = d.ID
		tokens += int64(rows[i].NTokens)
	}
	var errs []*record.RowError
	for _, e := range orig.failed {
		detail := fmt.Sprintf("identical text to document %s, which failed: %s", orig.id, e.Detail)
		if e.Chunk == nil {
			errs = append(errs, d.Error(e.Reason, detail))
		} else {
			errs = append(errs, d.ChunkError(*e.Chunk, e.Reason, detail, e.WorkerLog))
		}
	}
	if len(errs) > 0 { // the pipeline counted the duplicate, which had no items, as done
		s.stats.OK.Add(-1)
		s.stats.Failed.Add(1)
		s.stats.ItemFailures.Add(int64(len(errs)))
		if rows.Len() > 0 {
			s.stats.Partial.Add(1)
		}
	}
	return rows, errs, tokens
}

// vector truncates v to the output width, re-normalizing when asked.
func (s *embedSink) vector(v []float32) []float32 {
	v = v[:s.dims]
	if !s.renorm {
		return v
	}
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return v
	}
	out := make([]float32, len(v))
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}
