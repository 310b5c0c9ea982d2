package cli

import (
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/pipeline/job"
)

// progress shows a job's progress: a bar on a terminal, a log line every
// few seconds elsewhere (or with JSON logs), nothing when quiet.
type progress struct {
	w     io.Writer
	st    *pipeline.Stats
	words words
	quiet bool
	tty   bool
	bytes bool          // the bar counts JSONL bytes, not Parquet rows
	log   jobLog        // JSON logs (log.json): the start is a record too, and there is never a bar
	every time.Duration // how often progress is logged without a bar

	mu      sync.Mutex
	info    job.Info
	bar     *progressbar.ProgressBar
	started time.Time
	done    chan struct{}
	wg      sync.WaitGroup
}

func newProgress(w io.Writer, st *pipeline.Stats, words words, quiet bool) *progress {
	p := &progress{w: w, st: st, words: words, quiet: quiet, done: make(chan struct{}),
		log: newJobLog(w, "text"), every: defaultProgressEvery}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
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
	if p.log.json {
		p.log.Info("started", "kind", info.Kind, "model", info.Model.Name, "converted", info.Model.Converted, "workers", info.Workers, "threads", info.Threads,
			"settings", info.Settings, "output", info.Out, "errors", info.Errors, "resumed", info.Resumed, "resume_from", info.ResumeFrom, "resumed_rows", info.ResumeRows, "chaos", info.Chaos)
		p.wg.Add(1)
		go p.loop()
		return
	}
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
	if p.tty && !p.log.json {
		// The bar counts Parquet rows (total from the footers) or, when JSONL
		// is among the inputs, bytes read (total from the file sizes).
		total := info.Estimate.ParquetRows
		if info.Estimate.JSONLBytes != 0 {
			total = info.Estimate.JSONLBytes // -1 (stdin): no total, no ETA
			p.bytes = true
		}
		opts := []progressbar.Option{progressbar.OptionSetWriter(p.w), progressbar.OptionSetPredictTime(false), progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(200 * time.Millisecond), progressbar.OptionClearOnFinish(), progressbar.OptionShowCount()}
		if p.bytes {
			opts = append(opts, progressbar.OptionShowBytes(true))
		}
		p.bar = progressbar.NewOptions64(total, opts...)
	}
	p.wg.Add(1)
	go p.loop()
}

func (p *progress) loop() {
	defer p.wg.Done()
	every := p.every
	if p.bar != nil {
		every = 250 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			p.show()
		}
	}
}

func (p *progress) show() {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Counts are the job's (an interrupted run's records too), as the
	// share of the input read is; the rate is this run's.
	jobC := p.st.Snapshot()
	run := jobC.Minus(p.st.Restored())
	rate := float64(run.Tokens) / max(time.Since(p.started).Seconds(), 1e-9)
	restarts := 0
	if p.info.Restarts != nil {
		restarts = p.info.Restarts()
	}
	if p.bar == nil {
		p.logLine(jobC, rate, restarts)
		return
	}
	line := fmt.Sprintf("%d rows, %d %s, %.0f tok/s, %d restarts, %d failed", jobC.Read, jobC.Items, p.words.items, rate, restarts, jobC.Failed)
	done := p.st.InputRows.Load()
	if p.bytes {
		done = p.st.InputBytes.Load()
	}
	if eta, ok := p.eta(done); ok {
		line += ", ETA " + eta.String()
	}
	p.bar.Describe(line)
	p.bar.Set64(done)
}

// logLine logs progress as one record: the job's counts (items: chunks,
// pairs or generations; after --resume the interrupted run's too, the base
// of read_percent), this run's rate and seconds, and how far the input is
// read when its size is known.
func (p *progress) logLine(c pipeline.Counters, rate float64, restarts int) {
	args := []any{"rows", c.Read, "items", c.Items, "tokens_per_second", int64(rate), "restarts", restarts,
		"failed", c.Failed, "elapsed_seconds", math.Round(time.Since(p.started).Seconds()*10) / 10}
	est := p.info.Estimate
	switch {
	case est.JSONLBytes > 0:
		args = append(args, "read_percent", percent(p.st.InputBytes.Load(), est.JSONLBytes))
	case est.JSONLBytes == 0 && est.ParquetRows > 0:
		args = append(args, "read_percent", percent(p.st.InputRows.Load(), est.ParquetRows))
	}
	p.log.Info("progress", args...)
}

// percent is done of total in percent, one decimal, at most 100.
func percent(done, total int64) float64 {
	return math.Round(min(float64(done)/float64(total), 1)*1000) / 10
}

// eta extrapolates the time left from the share of the input read so far.
func (p *progress) eta(done int64) (time.Duration, bool) {
	total := p.bar.GetMax64()
	if total <= 0 || done <= 0 {
		return 0, false
	}
	el := time.Since(p.started)
	left := time.Duration(float64(el) * float64(total-done) / float64(done))
	return left.Round(time.Second), true
}

// stop ends the display; it is safe when start was never called.
func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
	if p.bar != nil {
		p.bar.Finish()
	}
}

// plural is "1 thread", "2 threads".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
