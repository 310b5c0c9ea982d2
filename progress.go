package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/synapse-embed/synapse/job"
	"github.com/synapse-embed/synapse/pipeline"
)

// progress shows a job's progress: a bar on a terminal, a log line every
// few seconds elsewhere, nothing when quiet.
type progress struct {
	w     io.Writer
	st    *pipeline.Stats
	quiet bool
	tty   bool
	bytes bool // the bar counts JSONL bytes, not Parquet rows

	mu      sync.Mutex
	info    job.JobInfo
	bar     *progressbar.ProgressBar
	started time.Time
	done    chan struct{}
	wg      sync.WaitGroup
}

// logEvery is how often progress is logged when stderr is not a terminal.
const logEvery = 5 * time.Second

func newProgress(w io.Writer, st *pipeline.Stats, quiet bool) *progress {
	p := &progress{w: w, st: st, quiet: quiet, done: make(chan struct{})}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

// start is called once the job has begun.
func (p *progress) start(info job.JobInfo) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.info, p.started = info, time.Now()
	switch {
	case info.Resumed:
		fmt.Fprintf(p.w, "resuming %s: documents before #%d were done by an earlier run\n", info.Out, info.ResumeFrom)
	case info.ResumeAsked:
		fmt.Fprintf(p.w, "no interrupted run of %s to resume: starting from the beginning\n", info.Out)
	}
	fmt.Fprintf(p.w, "embedding with %s × %s, chunks of %d tokens, %d dims\n",
		plural(info.Workers, "worker"), plural(info.Threads, "thread"), info.Chunking.Window, info.Dims)
	if p.tty {
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
	every := logEvery
	if p.tty {
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
	docs, chunks, toks := p.st.Read.Load(), p.st.Chunks.Load(), p.st.Tokens.Load()
	rate := float64(toks) / max(time.Since(p.started).Seconds(), 1e-9)
	restarts := 0
	if p.info.Restarts != nil {
		restarts = p.info.Restarts()
	}
	line := fmt.Sprintf("%d docs, %d chunks, %.0f tok/s, %d restarts, %d failed", docs, chunks, rate, restarts, p.st.Failed.Load())
	if p.bar != nil {
		done := p.st.InputRows.Load()
		if p.bytes {
			done = p.st.InputBytes.Load()
		}
		if eta, ok := p.eta(done); ok {
			line += ", ETA " + eta.String()
		}
		p.bar.Describe(line)
		p.bar.Set64(done)
		return
	}
	fmt.Fprintf(p.w, "progress: %s\n", line)
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

// plural is "1 worker", "2 workers".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
