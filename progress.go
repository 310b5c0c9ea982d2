package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/synapse-embed/synapse/pipeline"
)

// progress shows a job's progress: a bar on a terminal, a log line every
// few seconds elsewhere, nothing when quiet.
type progress struct {
	w     io.Writer
	st    *pipeline.Stats
	quiet bool
	tty   bool

	mu      sync.Mutex
	info    pipeline.JobInfo
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
func (p *progress) start(info pipeline.JobInfo) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.info, p.started = info, time.Now()
	if info.Resumed {
		fmt.Fprintf(p.w, "resuming %s: documents before #%d were done by an earlier run\n", info.Out, info.ResumeFrom)
	}
	fmt.Fprintf(p.w, "embedding with %d workers × %d threads, chunks of %d tokens, %d dims\n",
		info.Workers, info.Threads, info.Chunking.Window, info.Dims)
	if p.tty {
		total, desc := int64(-1), "docs"
		if info.Estimate.JSONLBytes == 0 && info.Estimate.ParquetRows > 0 {
			total = info.Estimate.ParquetRows
		}
		p.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("docs"),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
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
	line := fmt.Sprintf("%d chunks, %.0f tok/s, %d retries, %d failed", chunks, rate, p.st.Retries.Load(), p.st.Failed.Load())
	if p.bar != nil {
		p.bar.Describe(line)
		p.bar.Set64(docs)
		return
	}
	fmt.Fprintf(p.w, "progress: %d docs, %s\n", docs, line)
}

// stop ends the display; it is safe when start was never called.
func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
	if p.bar != nil {
		p.bar.Finish()
	}
}
