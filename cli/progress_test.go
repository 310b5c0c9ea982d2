package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/pipeline/job"
)

// lineWriter collects what is written and signals each write.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitFor waits until the output holds s, failing after ten seconds.
func (w *lineWriter) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for !strings.Contains(w.String(), s) {
		select {
		case <-w.wrote:
		case <-deadline.C:
			t.Fatalf("no %q within ten seconds:\n%s", s, w.String())
		}
	}
}

// TestProgressLogRecords: off a terminal, progress is a log record every
// --progress-every, text or JSON, with the counts, the work done (input
// written, not read ahead), its total and share, the rate and the ETA.
func TestProgressLogRecords(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			w := &lineWriter{wrote: make(chan struct{}, 1)}
			st := &pipeline.Stats{}
			// A resumed run: 4 records by the interrupted run, 3 by this
			// one; rows count the job, as done_percent does.
			st.Restore(pipeline.Counters{Read: 4, Items: 5})
			st.Read.Add(3)
			st.Items.Add(4)
			st.InputBytes.Store(900) // read ahead: not work done
			st.DoneBytes.Store(250)
			p := newProgress(w, st, words{verb: "embedding", items: "chunks"}, false)
			p.log, p.every = newJobLog(w, format), time.Millisecond
			p.start(job.Info{Kind: "embed", Model: &artifact.Artifact{Name: "m"}, Workers: 1, Threads: 1,
				Estimate: corpus.Estimate{JSONLBytes: 1000}})
			want := "msg=progress rows=7 items=9"
			if format == "json" {
				want = `"msg":"progress","rows":7,"items":9`
			}
			w.waitFor(t, want)
			p.stop()
			n := 0
			for _, line := range strings.Split(strings.TrimSpace(w.String()), "\n") {
				if format == "json" {
					var r map[string]any
					if err := json.Unmarshal([]byte(line), &r); err != nil || r["level"] == nil || r["msg"] == nil {
						t.Errorf("not a JSON log record with level and msg (%v): %s", err, line)
					}
					if r["msg"] != "progress" {
						continue
					}
					n++
					if r["done_percent"] != 25.0 || r["done_bytes"] != 250.0 || r["total_bytes"] != 1000.0 {
						t.Errorf("done_percent %v, done_bytes %v, total_bytes %v; want 25, 250, 1000", r["done_percent"], r["done_bytes"], r["total_bytes"])
					}
					if _, ok := r["bytes_per_second"].(float64); !ok {
						t.Errorf("bytes_per_second %v; want a number", r["bytes_per_second"])
					}
					if _, ok := r["eta_seconds"].(float64); !ok {
						t.Errorf("eta_seconds %v; want a number (the total is known)", r["eta_seconds"])
					}
					if _, isNumber := r["elapsed_seconds"].(float64); !isNumber || r["elapsed"] != nil {
						t.Errorf("progress elapsed_seconds %v (elapsed %v); want a number of seconds, as the summary's", r["elapsed_seconds"], r["elapsed"])
					}
				} else if strings.Contains(line, "msg=progress") {
					n++
					for _, f := range []string{"done_bytes=250 ", "total_bytes=1000 ", "done_percent=25 ", "bytes_per_second=", "eta_seconds="} {
						if !strings.Contains(line, f) {
							t.Errorf("progress line without %s: %s", f, line)
						}
					}
				}
			}
			if n == 0 {
				t.Errorf("no progress record:\n%s", w.String())
			}
		})
	}
}

// TestProgressLogStdin: with no total (stdin), the record has the work
// done and the rate, and neither a share nor an ETA.
func TestProgressLogStdin(t *testing.T) {
	w := &lineWriter{wrote: make(chan struct{}, 1)}
	st := &pipeline.Stats{}
	st.DoneBytes.Store(4096)
	p := newProgress(w, st, words{verb: "embedding", items: "chunks"}, false)
	p.every = time.Millisecond
	p.start(job.Info{Kind: "embed", Model: &artifact.Artifact{Name: "m"}, Workers: 1, Threads: 1,
		Estimate: corpus.Estimate{JSONLBytes: -1}})
	w.waitFor(t, "msg=progress")
	p.stop()
	for _, line := range strings.Split(w.String(), "\n") {
		if !strings.Contains(line, "msg=progress") {
			continue
		}
		if !strings.Contains(line, "done_bytes=4096 ") || !strings.Contains(line, "bytes_per_second=") {
			t.Errorf("stdin progress without done_bytes=4096 and bytes_per_second: %s", line)
		}
		if strings.Contains(line, "total_bytes") || strings.Contains(line, "done_percent") || strings.Contains(line, "eta_seconds") {
			t.Errorf("stdin progress with a total, share or ETA: %s", line)
		}
	}
}
