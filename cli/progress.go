package cli

import (
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/pipeline/job"
)

// progress shows a job's progress: one line redrawn on a terminal, a log
// record every few seconds elsewhere (or with JSON logs), nothing when
// quiet. Its share, rate and ETA count the work done: the input up to the
// last record written (pipeline.Stats.DoneBytes, DoneRows), never what the
// reader has read ahead.
type progress struct {
	w     io.Writer
	st    *pipeline.Stats
	words words
	quiet bool
	tty   *os.File      // stderr when it is a terminal: the line is drawn there
	log   jobLog        // JSON logs (log.json): the start is a record too, and there is never a line
	every time.Duration // how often progress is logged without a line
	// redraw is how often the line is drawn (and the rate sampled);
	// width is the terminal's width, asked at each redraw (a resize
	// applies at once).
	redraw time.Duration
	width  func() int

	// out orders the writes to w: the line's redraws and clearing, and
	// the records written through the progress (Write). line is whether
	// the line is drawn and not yet cleared.
	out  sync.Mutex
	line bool

	mu       sync.Mutex
	info     job.Info
	bytes    bool // the work done counts JSONL bytes, not Parquet rows
	total    int64
	meter    *meter
	started  time.Time
	lastLog  time.Time
	done     chan struct{}
	wg       sync.WaitGroup
	stopOnce sync.Once
}

func newProgress(w io.Writer, st *pipeline.Stats, words words, quiet bool) *progress {
	p := &progress{w: w, st: st, words: words, quiet: quiet, done: make(chan struct{}),
		log: newJobLog(w, "text"), every: defaultProgressEvery, redraw: 250 * time.Millisecond}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = f
		p.width = func() int {
			if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
				return w
			}
			return 80
		}
	}
	return p
}

// start is called once the job has begun.
func (p *progress) start(info job.Info) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.info, p.started = info, time.Now()
	p.lastLog = p.started
	// The work done is counted in JSONL bytes when JSONL is among the
	// inputs (total from the file sizes; -1, stdin: no total, no ETA),
	// else in Parquet rows (total from the footers).
	p.total = info.Estimate.ParquetRows
	if info.Estimate.JSONLBytes != 0 {
		p.total, p.bytes = info.Estimate.JSONLBytes, true
	}
	p.meter = newMeter(p.started, p.total, info.Resumed)
	if p.log.json {
		p.log.Info("started", "kind", info.Kind, "model", info.Model.Name, "converted", info.Model.Converted, "workers", info.Workers, "threads", info.Threads,
			"settings", info.Settings, "output", info.Out, "errors", info.Errors, "resumed", info.Resumed, "resume_from", info.ResumeFrom, "resumed_rows", info.ResumeRows, "chaos", info.Chaos)
		p.wg.Add(1)
		go p.loop()
		return
	}
	p.header(info)
	p.wg.Add(1)
	go p.loop()
}

// header writes the lines that open a job's text output.
func (p *progress) header(info job.Info) {
	switch {
	case info.Resumed:
		fmt.Fprintf(p.w, "resuming %s at record %d: %d rows kept from the interrupted run\n", info.Out, info.ResumeFrom, info.ResumeRows)
	case info.ResumeAsked:
		fmt.Fprintf(p.w, "no interrupted run of %s to resume: starting from the beginning\n", info.Out)
	}
	if info.Chaos != "" {
		fmt.Fprintf(p.w, "WARNING: chaos drills armed in every worker (%s): this is a drill, not a production run\n", info.Chaos)
	}
	if info.Model.Converted != "" {
		fmt.Fprintf(p.w, "model: %s\n", info.Model.Converted)
	}
	fmt.Fprintf(p.w, "%s with %s on %s × %s, %s\n", p.words.verb, info.Model.Name,
		plural(info.Workers, "worker"), plural(info.Threads, "thread"), info.Settings)
}

// drawing reports whether progress is a line on a terminal.
func (p *progress) drawing() bool { return p.tty != nil && !p.log.json }

// loop samples the work done (for the rate) at least every second, and
// draws the line or logs a record.
func (p *progress) loop() {
	defer p.wg.Done()
	tick := min(p.every, time.Second)
	if p.drawing() {
		tick = p.redraw
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case now := <-t.C:
			p.show(now)
		}
	}
}

// show samples the work done at now, then draws the line or, every
// --progress-every, logs it.
func (p *progress) show(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.meter.add(now, p.workDone())
	if !p.drawing() {
		if now.Sub(p.lastLog) >= p.every-p.every/50 { // the ticks' jitter
			p.lastLog = now
			p.logLine(now)
		}
		return
	}
	line := renderLine(p.state(now), p.width())
	p.out.Lock()
	defer p.out.Unlock()
	// \r to the line's start, the line (narrower than the terminal, so
	// it never wraps), then erase what a longer line left after it.
	fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	p.line = true
}

// Write writes b (a log record, a warning) to the progress's writer,
// clearing the line first when it is drawn: b starts at the left margin
// and the next redraw draws the line again below it.
func (p *progress) Write(b []byte) (int, error) {
	p.out.Lock()
	defer p.out.Unlock()
	p.clear()
	return p.w.Write(b)
}

// clear erases the drawn line (p.out held).
func (p *progress) clear() {
	if p.line {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.line = false
	}
}

// logThrough is log writing through the progress, in log's format.
func (p *progress) logThrough(log jobLog) jobLog {
	if log.json {
		return newJobLog(p, "json")
	}
	return newJobLog(p, "text")
}

// workDone is the input written so far, in the unit of the total.
func (p *progress) workDone() int64 {
	if p.bytes {
		return p.st.DoneBytes.Load()
	}
	return p.st.DoneRows.Load()
}

// state gathers what the line shows. Counts are the job's (an interrupted
// run's records too), as the share done is; the rates are this run's.
func (p *progress) state(now time.Time) lineState {
	jobC := p.st.Snapshot()
	run := jobC.Minus(p.st.Restored())
	el := now.Sub(p.started)
	s := lineState{done: p.workDone(), total: p.total, bytes: p.bytes, rate: p.meter.rate(),
		rows: jobC.Read, items: jobC.Items, itemsWord: p.words.items, failed: jobC.Failed, elapsed: el,
		tokens: float64(run.Tokens) / max(el.Seconds(), 1e-9)}
	s.eta, s.etaOK = p.meter.eta()
	if p.info.Restarts != nil {
		s.restarts = p.info.Restarts()
	}
	return s
}

// logLine logs progress as one record: the job's counts (items: chunks,
// pairs or generations; after --resume the interrupted run's too), this
// run's rates and seconds, the work done (input bytes or rows written),
// its total and share when the input's size is known, and the ETA.
func (p *progress) logLine(now time.Time) {
	s := p.state(now)
	unit := "rows"
	if s.bytes {
		unit = "bytes"
	}
	args := []any{"rows", s.rows, "items", s.items, "tokens_per_second", int64(s.tokens), "restarts", s.restarts,
		"failed", s.failed, "elapsed_seconds", math.Round(s.elapsed.Seconds()*10) / 10, "done_" + unit, s.done}
	if s.total > 0 {
		args = append(args, "total_"+unit, s.total, "done_percent", percent(s.done, s.total))
	}
	args = append(args, unit+"_per_second", int64(math.Round(s.rate)))
	if s.etaOK {
		args = append(args, "eta_seconds", int64(s.eta.Round(time.Second)/time.Second))
	}
	p.log.Info("progress", args...)
}

// percent is done of total in percent, one decimal, at most 100.
func percent(done, total int64) float64 {
	return math.Round(min(float64(done)/float64(total), 1)*1000) / 10
}

// stop ends the display, clearing the line; it is safe when start was
// never called.
func (p *progress) stop() {
	p.stopOnce.Do(func() { close(p.done) })
	p.wg.Wait()
	p.out.Lock()
	defer p.out.Unlock()
	p.clear()
}

// plural is "1 thread", "2 threads".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
