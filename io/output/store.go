package output

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/synapse-embed/synapse/io/files"
)

// Store is an output a database holds (io/pgstore): it keeps the run's
// checkpoint itself, committed with the rows of each batch, so the two
// always agree, and shows the rows only when the run publishes them.
type Store interface {
	// Checkpoint is the interrupted run's checkpoint and the rows it
	// committed; nil when there is none.
	Checkpoint() ([]byte, int64, error)
	// Start discards an interrupted run and begins one at checkpoint cp.
	Start(cp []byte) error
	// Write adds a batch, durable with the next Save.
	Write(rec arrow.RecordBatch) error
	// Keep records a document the store holds unchanged (a sync's), durable with the next Save.
	Keep(id string)
	// Save commits what was written and kept since the last Save with cp.
	Save(cp []byte) error
	// Publish makes the run's rows visible, all at once, and ends the run.
	Publish() error
	// Close ends the session, keeping the run for a resume.
	Close()
	// Holds reports, for a sync, whether the store holds the document id
	// and with this doc_hash; Syncing reports a sync.
	Holds(id string, hash [DocHashSize]byte) (known, same bool)
	Syncing() bool
	// Known is the documents a sync's store held when the run began.
	Known() int
}

// storeCheckpoint is the resumer of a Writer made by OpenStore: the
// checkpoint is in the store, the errors in ERRORS.partial beside the
// errors file.
type storeCheckpoint struct {
	st      Store
	errPart string
}

// OpenStore starts a run writing to a store, or (resume) resumes the
// interrupted one the store holds; name is the output as messages show it.
// A resume whose rows, options or schema differ from the checkpoint's is
// refused (ErrResumeMismatch, ErrCheckpointCorrupt).
func OpenStore(st Store, name string, resume bool, opts WriterOptions) (*Writer, ResumeState, error) {
	opts.Format = FormatArrow // the batches' form; the store decides its own
	w, err := newWriter(name, opts)
	if err != nil {
		return nil, ResumeState{}, err
	}
	// The columns, then each metadata key on its own (as a file's resume
	// compares them), so that a refusal names the key that changed.
	guard := map[string]string{"schema": arrow.NewSchema(w.schema.Fields(), nil).String()}
	md := w.schema.Metadata()
	for i, k := range md.Keys() {
		guard[k] = md.Values()[i]
	}
	for k, v := range opts.ResumeGuard {
		guard[k] = v
	}
	w.opts.ResumeGuard = guard
	c := &storeCheckpoint{st: st, errPart: w.errPath + ".partial"}
	w.ckpt, w.sink = c, storeSink{st}
	var rs ResumeState
	if resume {
		rs, err = c.resume(w)
	}
	if err == nil && !rs.Resumed {
		err = c.start(w)
	}
	if err != nil {
		if w.errs != nil {
			w.errs.abort()
		}
		w.bld.Release()
		return nil, ResumeState{}, err
	}
	if _, err := files.RemoveStaleTemps(w.errPath); err != nil {
		w.Abort()
		return nil, ResumeState{}, err
	}
	return w, rs, nil
}

func (c *storeCheckpoint) start(w *Writer) error {
	ef, err := openLocked(c.errPart)
	if err != nil {
		return err
	}
	w.errs = &errorLog{f: ef, bw: bufio.NewWriter(ef)}
	if err := ef.Truncate(0); err != nil {
		return err
	}
	cp, err := c.checkpoint(w)
	if err != nil {
		return err
	}
	return c.st.Start(cp)
}

// resume positions w after the store's checkpoint; without one, the run
// starts afresh (Resumed false).
func (c *storeCheckpoint) resume(w *Writer) (ResumeState, error) {
	b, rows, err := c.st.Checkpoint()
	if err != nil || b == nil {
		return ResumeState{}, err
	}
	var cp checkpointFile
	if err := json.Unmarshal(b, &cp); err != nil || cp.Version != checkpointVersion {
		return ResumeState{}, fmt.Errorf("%w: %s: the checkpoint in the database does not read (version %d): %v", ErrCheckpointCorrupt, w.out, cp.Version, err)
	}
	if cp.BatchRows != w.opts.BatchRows {
		return ResumeState{}, fmt.Errorf("%w: batch rows %d; the interrupted run had %d", ErrResumeMismatch, w.opts.BatchRows, cp.BatchRows)
	}
	if err := compareGuard(cp.Guard, w.opts.ResumeGuard); err != nil {
		return ResumeState{}, err
	}
	if rows != cp.Rows {
		return ResumeState{}, fmt.Errorf("%w: %s: the staging table has %d rows; the checkpoint says %d", ErrCheckpointCorrupt, w.out, rows, cp.Rows)
	}
	if _, err := os.Lstat(c.errPart); errors.Is(err, fs.ErrNotExist) {
		return ResumeState{}, fmt.Errorf("%w: %v (the errors of the interrupted run)", ErrCheckpointCorrupt, err)
	}
	ef, err := openLocked(c.errPart)
	if err != nil {
		return ResumeState{}, err
	}
	w.errs = &errorLog{f: ef, bw: bufio.NewWriter(ef), bytes: cp.ErrorsBytes, records: cp.ErrorRecords}
	if err := cutTo(ef, cp.ErrorsBytes); err != nil {
		return ResumeState{}, err
	}
	w.last, w.group, w.rows, w.batches = cp.NextIndex-1, cp.ReplayFrom, cp.Rows, cp.Batches
	return ResumeState{Resumed: true, NextIndex: cp.NextIndex, ReplayFrom: cp.ReplayFrom, Rows: cp.Rows,
		ErrorRecords: cp.ErrorRecords, State: cp.State}, nil
}

func (c *storeCheckpoint) checkpoint(w *Writer) ([]byte, error) {
	cp := checkpointFile{Version: checkpointVersion, NextIndex: w.last + 1, ReplayFrom: w.group, Rows: w.rows,
		Batches: w.batches, BatchRows: w.opts.BatchRows, ErrorRecords: w.errs.records,
		ErrorsBytes: w.errs.bytes, Guard: w.opts.ResumeGuard}
	if w.opts.State != nil {
		state, err := json.Marshal(w.opts.State())
		if err != nil {
			return nil, fmt.Errorf("checkpoint state: %w", err)
		}
		cp.State = state
	}
	return json.Marshal(cp)
}

// save syncs the errors first: the checkpoint never counts bytes the file lacks.
func (c *storeCheckpoint) save(w *Writer) error {
	if err := w.errs.sync(); err != nil {
		return err
	}
	cp, err := c.checkpoint(w)
	if err != nil {
		return err
	}
	return c.st.Save(cp)
}

// commit writes the errors file, then publishes the rows.
func (c *storeCheckpoint) commit(w *Writer) error {
	w.errs.abort() // synced by the last save
	defer c.st.Close()
	if err := files.CopyOut(w.opts.Context, c.errPart, w.errPath, w.errs.bytes); err != nil {
		return err
	}
	if err := c.st.Publish(); err != nil {
		return err
	}
	if err := os.Remove(c.errPart); err != nil {
		return fmt.Errorf("remove resume files: %w", err)
	}
	return nil
}

func (c *storeCheckpoint) abort() { c.st.Close() }

// storeSink hands the batches to the store.
type storeSink struct{ st Store }

func (s storeSink) write(rec arrow.RecordBatch) error { return s.st.Write(rec) }
func (s storeSink) finish() error                     { return nil }
func (s storeSink) abort()                            {}

// Holds reports, for a writer of a store that is syncing, whether the store
// holds the document id, and with this doc_hash (sync false otherwise).
func (w *Writer) Holds(id string, hash [DocHashSize]byte) (known, same, sync bool) {
	c, ok := w.ckpt.(*storeCheckpoint)
	if !ok || !c.st.Syncing() {
		return false, false, false
	}
	known, same = c.st.Holds(id, hash)
	return known, same, true
}

// KnownDocs is the documents a syncing store held when the run began (0 otherwise).
func (w *Writer) KnownDocs() int {
	if c, ok := w.ckpt.(*storeCheckpoint); ok && c.st.Syncing() {
		return c.st.Known()
	}
	return 0
}

// PutKept records the document of a sync that the store holds unchanged,
// in its place among the records (see Put).
func (w *Writer) PutKept(index, group int64, id string) error {
	c, ok := w.ckpt.(*storeCheckpoint)
	if !ok {
		return fmt.Errorf("output: PutKept on an output that is not a store")
	}
	c.st.Keep(id)
	return w.Put(index, group, nil, nil)
}
