package corpus

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/synapse-embed/synapse/io/files"
)

// RunOptions configure re-ranking a first-stage run (the BEIR/TREC layout):
// the run names the candidates of each query; the queries and corpus files
// (JSONL or Parquet: _id, text; corpus title optional) hold their texts.
type RunOptions struct {
	Run     string   // TREC "qid Q0 docid rank score tag", or TSV "query-id corpus-id score"
	Queries []string // queries files
	Corpus  []string // corpus files
	// Depth keeps the first Depth candidates of each query, by the run's
	// score (ties: the TREC rank, then file order); 0 = DefaultDepth.
	Depth int
	// SpoolDir holds the temporary file of the documents the run names
	// (default: the system's temporary directory).
	SpoolDir string
	// Read holds the reader's settings for the queries and corpus files
	// (Context, line limits); its StartIndex, Shard and Shards select
	// queries of the run.
	Read ReadOptions
}

// DefaultDepth is RunOptions.Depth's default.
const DefaultDepth = 100

// RunReader yields the queries of a run with their candidates' texts.
//
// Memory: it holds the run's kept entries (query and document ids, about
// 100 bytes each: Depth × queries of them), the ids of the documents they
// name, and the queries' texts; never the corpus. Opening it reads the
// corpus once and copies the texts of the documents the run names into a
// temporary spool file, read back one query at a time.
type RunReader struct {
	opts    RunOptions
	recs    []runRecord // queries and bad lines, in run order (Index order)
	pos     int
	spool   *os.File
	docs    map[string]spooled
	queries map[string]queryText
	Skipped int64 // run lines beyond Depth
}

// runRecord is one record of the run: a query's kept entries, or a line
// that could not be read.
type runRecord struct {
	index, group int64
	qid          string
	line         int
	entries      []runEntry
	err          *RowError
}

type runEntry struct {
	doc   string
	score float64
	rank  int // TREC rank; 0 in TSV
	line  int
}

// spooled is where a document's text is in the spool, or why it has none.
type spooled struct {
	off, n int64
	err    *RowError
}

type queryText struct {
	text string
	err  *RowError
}

// OpenRun reads the run, the queries it names and, in one pass, the corpus
// documents it names.
func OpenRun(o RunOptions) (*RunReader, error) {
	if o.Depth <= 0 {
		o.Depth = DefaultDepth
	}
	if o.Read.Context == nil {
		o.Read.Context = context.Background()
	}
	rr := &RunReader{opts: o, docs: map[string]spooled{}, queries: map[string]queryText{}}
	if err := rr.readRun(); err != nil {
		return nil, err
	}
	if err := rr.readQueries(); err != nil {
		return nil, err
	}
	if err := rr.readCorpus(); err != nil {
		rr.Close()
		return nil, err
	}
	return rr, nil
}

// readRun parses the run file into records, keeping Depth entries a query.
func (rr *RunReader) readRun() error {
	f, err := files.OpenReader(rr.opts.Read.Context, rr.opts.Run)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer f.Close()
	byQuery := map[string]int{} // query id → its record in rr.recs
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || (line == 1 && strings.HasPrefix(text, "query-id")) { // the BEIR TSV header
			continue
		}
		qid, e, err := parseRunLine(text, line)
		if err != nil {
			d := Doc{Source: rr.opts.Run, Line: line, Index: int64(line - 1)}
			rr.recs = append(rr.recs, runRecord{index: d.Index, line: line, err: d.Error(ReasonMalformedLine, err.Error())})
			continue
		}
		k, ok := byQuery[qid]
		if !ok {
			k = len(rr.recs)
			rr.recs = append(rr.recs, runRecord{index: int64(line - 1), qid: qid, line: line})
			byQuery[qid] = k
		}
		r := &rr.recs[k]
		r.entries = append(r.entries, e)
		if len(r.entries) >= 2*rr.opts.Depth {
			rr.prune(r)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("run %s: %w", rr.opts.Run, err)
	}
	for i := range rr.recs {
		rr.prune(&rr.recs[i])
		rr.recs[i].group = rr.recs[i-i%GroupRecords].index
	}
	return nil
}

// prune keeps a query's best Depth entries, best first.
func (rr *RunReader) prune(r *runRecord) {
	slices.SortStableFunc(r.entries, func(a, b runEntry) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		return cmp.Compare(a.line, b.line)
	})
	if len(r.entries) > rr.opts.Depth {
		rr.Skipped += int64(len(r.entries) - rr.opts.Depth)
		r.entries = slices.Clip(r.entries[:rr.opts.Depth])
	}
}

// parseRunLine reads "qid Q0 docid rank score tag" or "query-id corpus-id score".
func parseRunLine(text string, line int) (string, runEntry, error) {
	f := strings.Fields(text)
	e := runEntry{line: line}
	var err error
	switch len(f) {
	case 6:
		if e.rank, err = strconv.Atoi(f[3]); err != nil {
			return "", e, fmt.Errorf("rank %q is not an integer", f[3])
		}
		e.doc = f[2]
		if e.score, err = strconv.ParseFloat(f[4], 64); err != nil {
			return "", e, fmt.Errorf("score %q is not a number", f[4])
		}
	case 3:
		e.doc = f[1]
		if e.score, err = strconv.ParseFloat(f[2], 64); err != nil {
			return "", e, fmt.Errorf("score %q is not a number", f[2])
		}
	default:
		return "", e, fmt.Errorf("%d fields: want a TREC run line (qid Q0 docid rank score tag) or query-id corpus-id score", len(f))
	}
	return f[0], e, nil
}

// readQueries reads the texts of the queries the run names.
func (rr *RunReader) readQueries() error {
	want := map[string]bool{}
	for _, r := range rr.recs {
		if r.err == nil {
			want[r.qid] = true
		}
	}
	return rr.scan(rr.opts.Queries, []string{"_id", "text"}, func(d Doc) error {
		id, ok := rr.idOf(d)
		if !ok || !want[id] {
			return nil
		}
		if _, seen := rr.queries[id]; seen {
			return duplicateRow("queries", d, id)
		}
		text, err := requiredText(d, d.Fields, "text")
		rr.queries[id] = queryText{text: text, err: err}
		return nil
	})
}

// readCorpus copies the texts of the documents the run names to the spool.
func (rr *RunReader) readCorpus() error {
	want := map[string]bool{}
	for _, r := range rr.recs {
		for _, e := range r.entries {
			want[e.doc] = true
		}
	}
	spool, err := os.CreateTemp(rr.opts.SpoolDir, "synapse-rerank-docs-*")
	if err != nil {
		return fmt.Errorf("run: spool: %w", err)
	}
	os.Remove(spool.Name()) // gone when closed
	rr.spool = spool
	w := bufio.NewWriterSize(spool, 1<<20)
	var off int64
	err = rr.scan(rr.opts.Corpus, []string{"_id", "title", "text"}, func(d Doc) error {
		id, ok := rr.idOf(d)
		if !ok || !want[id] {
			return nil
		}
		if _, seen := rr.docs[id]; seen {
			return duplicateRow("corpus", d, id)
		}
		text, rerr := (&QueryReader{}).docText(d, d.Fields)
		if rerr != nil {
			rr.docs[id] = spooled{err: rerr}
			return nil
		}
		n, err := w.WriteString(text)
		rr.docs[id] = spooled{off: off, n: int64(n)}
		off += int64(n)
		return err
	})
	if err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("run: spool: %w", err)
	}
	return nil
}

// scan calls fn for every row of files read raw with fields; rows and files
// that cannot be read are skipped (a run only needs the rows it names).
func (rr *RunReader) scan(files []string, fields []string, fn func(Doc) error) error {
	ro := rr.opts.Read
	ro.Raw, ro.StartIndex, ro.Shard, ro.Shards = fields, 0, 0, 0
	r, err := Open(files, ro)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		d, err := r.Next()
		var re *RowError
		var fe *FileError
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.As(err, &fe):
			return fmt.Errorf("run: %w", fe)
		case errors.As(err, &re):
			continue
		case err != nil:
			return err
		}
		if err := ro.Context.Err(); err != nil {
			return err
		}
		if err := fn(d); err != nil {
			return err
		}
	}
}

// ErrDuplicateRow: a queries or corpus file holds an _id the run names
// twice, so which text to score is not known.
var ErrDuplicateRow = errors.New("an _id the run names is in two rows")

func duplicateRow(what string, d Doc, id string) error {
	at := fmt.Sprintf("%s:%d", d.Source, d.Line)
	if d.Line == 0 {
		at = fmt.Sprintf("%s row %d", d.Source, d.Row)
	}
	return fmt.Errorf("%w: %s %s: _id %q is in an earlier row too; each id the run names must be in one row", ErrDuplicateRow, what, at, id)
}

// idOf is a queries or corpus row's _id.
func (rr *RunReader) idOf(d Doc) (string, bool) {
	raw, ok := d.Fields["_id"]
	if !ok {
		return "", false
	}
	id, err := idValue(d, "_id", raw)
	return id, err == nil
}

// Next returns the next query of the run, a *RowError or io.EOF. A range
// shard takes whole packing groups: group g of G goes to shard ⌊g·N/G⌋.
func (rr *RunReader) Next() (Query, error) {
	sh := rr.opts.Read
	groups := (len(rr.recs) + GroupRecords - 1) / GroupRecords
	for rr.pos < len(rr.recs) {
		r := &rr.recs[rr.pos]
		g := rr.pos / GroupRecords
		rr.pos++
		if r.index < sh.StartIndex || (sh.Shards > 0 && g*sh.Shards/groups != sh.Shard) {
			continue
		}
		if r.err != nil {
			r.err.Group = r.group
			return Query{}, r.err
		}
		return rr.query(r)
	}
	return Query{}, io.EOF
}

// query builds a run record's Query, reading its documents from the spool.
func (rr *RunReader) query(r *runRecord) (Query, error) {
	run := rr.opts.Run
	q := Query{Doc: Doc{Source: run, Line: r.line, Index: r.index, Group: r.group, ID: r.qid}}
	qt, ok := rr.queries[r.qid]
	switch {
	case !ok:
		q.Err = q.Error(ReasonMissingQuery, fmt.Sprintf("query %q is not in %s", r.qid, strings.Join(rr.opts.Queries, ", ")))
	case qt.err != nil:
		q.Err = q.Error(qt.err.Reason, fmt.Sprintf("query %q: %s", r.qid, qt.err.Detail))
	default:
		q.Text = qt.text
	}
	for k, e := range r.entries {
		score := float32(e.score)
		q.Cands = append(q.Cands, Candidate{ID: e.doc, Score: &score, Source: run, Line: e.line, Index: int64(e.line - 1)})
		d, ok := rr.docs[e.doc]
		switch {
		case !ok:
			q.Cands[k].Err = q.CandidateError(k, ReasonMissingDocument, fmt.Sprintf("document %q is not in the corpus", e.doc))
		case d.err != nil:
			q.Cands[k].Err = q.CandidateError(k, d.err.Reason, fmt.Sprintf("corpus row of %q: %s", e.doc, d.err.Detail))
		default:
			buf := make([]byte, d.n)
			if _, err := rr.spool.ReadAt(buf, d.off); err != nil {
				return Query{}, fmt.Errorf("run: spool: %w", err)
			}
			q.Cands[k].Text = string(buf)
		}
	}
	markDuplicateCandidates(&q)
	return q, nil
}

// Close removes the spool.
func (rr *RunReader) Close() error {
	if rr.spool == nil {
		return nil
	}
	return rr.spool.Close()
}
