package job

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/previous"
	"github.com/synapse-embed/synapse/io/record"
	"github.com/synapse-embed/synapse/io/vector"
)

// Dedup's rule (--dedup): a document whose text is that of an earlier
// document of its packing group (record.Doc.Group: at most
// corpus.GroupRecords records, starting at every unit a shard can take) gets
// that document's rows instead of being embedded. The decision depends on
// the group alone, never on where a run starts, so a resumed run (which
// replays from its last group's start) and the shards of a sharded run pack
// the single run's batches and write its vectors bit for bit. The sink holds
// the rows of one group's documents: that bounds the memory dedup costs.

// Incremental counts what an embedding run reused, embedded and copied.
// It is kept in the checkpoint, so that a resumed run reports the whole job.
type Incremental struct {
	Reused      int64 `json:"reused"`       // unchanged documents whose rows were copied from the previous output
	Embedded    int64 `json:"embedded"`     // documents sent to the engine
	New         int64 `json:"new"`          // documents whose id the previous output does not hold
	Changed     int64 `json:"changed"`      // documents whose id it holds with another doc_hash
	Unchanged   int64 `json:"unchanged"`    // documents whose id and doc_hash it holds (Reused, unless the settings differ)
	Deduped     int64 `json:"deduped"`      // documents given the vectors of an identical text earlier in the run
	TokensSaved int64 `json:"tokens_saved"` // tokens of the chunks reused or copied
	Deleted     int64 `json:"deleted"`      // previous documents not in the input (-1: not known, for a shard)
	NotFinite   int64 `json:"not_finite"`   // unchanged documents whose previous rows hold NaN or Inf: embedded again
	// Truncated are the documents written (embedded, or copied from an
	// identical text) whose tokens --truncate cut after the first window.
	Truncated int64 `json:"truncated,omitempty"`
	// LateChunks are the chunks a late-chunked run pooled from the windows
	// answered (the pipeline's items are the windows).
	LateChunks int64 `json:"late_chunks,omitempty"`
}

// doc is a document on its way through an embedding run.
type doc struct {
	record.Doc
	hash   [output.DocHashSize]byte
	status previous.Status
	prev   bool             // looked up in a previous output
	kept   bool             // a sync's: the table holds it unchanged, so it is neither embedded nor written
	reuse  output.EmbedRows // rows copied from the previous output: not embedded
	tokens int64            // the reused rows' tokens
	dup    bool             // a text of the dedup window: the sink copies its rows
	// badPrev: the previous output's rows of this unchanged document hold
	// a NaN or infinite value, so it is embedded again.
	badPrev bool
}

// finiteRows reports whether every value of the rows' vectors is finite:
// reused rows are checked as the engine's answers are (embedKind.Check).
func finiteRows(rows output.EmbedRows) bool {
	for _, r := range rows {
		if vector.NonFinite(r.Embedding) >= 0 || vector.NonFinite(r.SparseValues) >= 0 || nonFiniteTokens(r.TokenEmbeddings) {
			return false
		}
	}
	return true
}

// incSource reads the documents and decides, in input order, which are
// copied from the previous output and which are duplicates.
type incSource struct {
	src    *corpus.Reader
	prev   *previous.Set
	reuse  bool // the settings match: unchanged documents are copied
	window *window[struct{}]
	// held, for a sync, looks the document up in the output's table
	// (output.Writer.Holds).
	held func(id string, hash [output.DocHashSize]byte) (known, same, sync bool)
	// withText: the copied rows carry their chunks' text (--with-text)
	withText bool
}

func (s *incSource) Spans() []corpus.Span      { return s.src.Spans() }
func (s *incSource) Progress() record.Progress { return s.src.Progress() }

func (s *incSource) Next() (doc, error) {
	d, err := s.src.Next()
	if err != nil {
		return doc{}, err
	}
	x := doc{Doc: d, hash: sha256.Sum256([]byte(d.Text))}
	if s.prev != nil {
		m, err := s.prev.Find(d.ID, x.hash)
		if err != nil {
			return doc{}, fmt.Errorf("job: --previous: %w", err)
		}
		x.prev, x.status = true, m.Status
		if m.Status == previous.Unchanged && s.reuse {
			if x.reuse, x.tokens, err = s.prev.Copy(m.Start, m.End); err != nil {
				return doc{}, fmt.Errorf("job: --previous: %w", err)
			}
			for i := range x.reuse {
				x.reuse[i].ID = d.ID
			}
			// code point offsets and text from this text, identical to the
			// previous run's (same doc_hash), which may not have written them
			if err := output.FillSpans(d.Text, x.reuse, s.withText); err != nil {
				return doc{}, fmt.Errorf("job: --previous: %w: %w", previous.ErrInvalid, err)
			}
			if !finiteRows(x.reuse) { // no run writes such a vector: embed the document again
				x.reuse, x.tokens, x.badPrev = nil, 0, true
			}
		}
	}
	if s.held != nil {
		known, same, _ := s.held(d.ID, x.hash)
		x.prev, x.kept = true, same
		switch {
		case same:
			x.status = previous.Unchanged
		case known:
			x.status = previous.Changed
		default:
			x.status = previous.New
		}
	}
	if s.window != nil {
		s.window.enter(d.Group)
		if _, ok := s.window.get(x.hash); ok {
			x.dup = x.reuse == nil && !x.kept
		} else {
			s.window.add(x.hash, struct{}{})
		}
	}
	return x, nil
}

// window holds the texts seen in the current packing group. The source
// and the sink keep one each and update them with the same documents in the
// same order, so that what the source calls a duplicate the sink holds.
type window[V any] struct {
	group int64
	held  map[[output.DocHashSize]byte]V
}

func newWindow[V any]() *window[V] {
	return &window[V]{group: -1, held: map[[output.DocHashSize]byte]V{}}
}

// enter forgets the texts of the previous group when group starts.
func (w *window[V]) enter(group int64) {
	if group != w.group {
		clear(w.held)
		w.group = group
	}
}

func (w *window[V]) get(h [output.DocHashSize]byte) (V, bool) { v, ok := w.held[h]; return v, ok }

func (w *window[V]) add(h [output.DocHashSize]byte, v V) { w.held[h] = v }

// seen is what the sink's dedup window holds of a document.
type seen struct {
	id     string
	rows   output.EmbedRows
	failed []*record.RowError // the document failed: its duplicates fail alike
	cut    bool               // --truncate left tokens of it out
}

// openPrevious opens and checks the previous outputs before anything
// starts; the index, if needed, goes beside the output.
func (o *EmbedOptions) openPrevious() (*previous.Set, error) {
	if len(o.Previous) == 0 {
		return nil, nil
	}
	prev, err := previous.Open(o.Previous, o.dest().tempDir())
	if err != nil {
		return nil, &ConfigError{fmt.Errorf("--previous: %w", err)}
	}
	return prev, nil
}

// checkPrevious compares the previous output's settings with this run's:
// another digest is refused, naming the first difference, unless
// PreviousAny, which embeds everything (and says so).
func (o *EmbedOptions) checkPrevious(prev *previous.Set, cur vector.Settings) (reuse bool, note string, err error) {
	ps, err := vector.SettingsFromMetadata(prev.Metadata().GetValue)
	if err != nil {
		return false, "", configErrorf("--previous %s: %w", o.Previous[0], err)
	}
	diff := cur.Diff(ps)
	switch {
	case diff == "":
		return true, "", nil
	case o.PreviousAny:
		return false, "settings differ (" + diff + "), --previous-any: every document embedded", nil
	}
	return false, "", configErrorf("--previous %s was made with other settings: %s (its vectors cannot be reused; --previous-any embeds everything)",
		o.Previous[0], diff)
}

// catchUp looks up the documents a resumed run does not read again (those
// before its replay point), so that the previous documents they match are
// not reported deleted and the lookup goes on where the interrupted run was.
func (r *runner) catchUp(ctx context.Context, prev *previous.Set, until int64) error {
	if until <= 0 {
		return nil
	}
	ro := r.o.Read
	ro.Context = ctx
	ro.UniqueIDs = true // as the run reads them: a duplicate looks nothing up
	src, err := corpus.Open(r.o.Inputs, ro)
	if err != nil {
		return err
	}
	defer src.Close()
	for {
		d, err := src.Next()
		var re *record.RowError
		var fe *record.FileError
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.As(err, &re), errors.As(err, &fe):
			continue
		case err != nil:
			return err
		case d.Index >= until:
			return nil
		}
		if _, err := prev.Find(d.ID, sha256.Sum256([]byte(d.Text))); err != nil {
			return fmt.Errorf("job: --previous: %w", err)
		}
	}
}

// writeDeleted writes the ids of the previous documents not found, one a
// line, to path (written aside and renamed), and counts them.
func writeDeleted(ctx context.Context, prev *previous.Set, path string) (int64, error) {
	if path == "" {
		return prev.Deleted(func(string) error { return nil })
	}
	f, err := files.CreateOutput(ctx, path)
	if err != nil {
		return 0, fmt.Errorf("job: --deleted: %w", err)
	}
	n, err := prev.Deleted(func(id string) error {
		if strings.ContainsAny(id, "\n\r") {
			id = strconv.Quote(id) // one id a line, whatever it holds
		}
		_, err := io.WriteString(f, id+"\n")
		return err
	})
	if err == nil {
		err = f.Commit()
	}
	if err != nil {
		f.Abort()
		return n, fmt.Errorf("job: --deleted %s: %w", path, err)
	}
	return n, nil
}

// summaryLines are the incremental lines of the summary.
func (c *Incremental) summaryLines(prevs []string, note string, dedup bool) []SummaryLine {
	var out []SummaryLine
	if len(prevs) > 0 {
		del := strconv.FormatInt(c.Deleted, 10) + " deleted"
		if c.Deleted < 0 {
			del = "deleted: not known to a shard"
		}
		out = append(out, SummaryLine{"previous", fmt.Sprintf("%s: %d unchanged, %d changed, %d new, %s",
			strings.Join(prevs, ", "), c.Unchanged, c.Changed, c.New, del)})
		if note != "" {
			out = append(out, SummaryLine{"", note})
		}
	}
	line := fmt.Sprintf("%d embedded", c.Embedded)
	if len(prevs) > 0 {
		line = fmt.Sprintf("%d reused from the previous output, %s", c.Reused, line)
	}
	if dedup {
		line += fmt.Sprintf(", %d copied from an identical text in this run (--dedup)", c.Deduped)
	}
	out = append(out, SummaryLine{"documents", line})
	if c.NotFinite > 0 {
		out = append(out, SummaryLine{"", fmt.Sprintf("%d unchanged documents embedded again: their rows in the previous output hold NaN or infinite values", c.NotFinite)})
	}
	if len(prevs) > 0 || c.TokensSaved > 0 {
		out = append(out, SummaryLine{"tokens saved", strconv.FormatInt(c.TokensSaved, 10)})
	}
	return out
}
