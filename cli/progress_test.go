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
// --progress-every, text or JSON, with the counts and the share read.
func TestProgressLogRecords(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			w := &lineWriter{wrote: make(chan struct{}, 1)}
			st := &pipeline.Stats{}
			// A resumed run: 4 records by the interrupted run, 3 by this
			// one; rows count the job, as read_percent does.
			st.Restore(pipeline.Counters{Read: 4, Items: 5})
			st.Read.Add(3)
			st.Items.Add(4)
			st.InputBytes.Store(250)
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
			for _, line := range strings.Split(strings.TrimSpace(w.String()), "\n") {
				if format == "json" {
					var r map[string]any
					if err := json.Unmarshal([]byte(line), &r); err != nil || r["level"] == nil || r["msg"] == nil {
						t.Errorf("not a JSON log record with level and msg (%v): %s", err, line)
					}
					if r["msg"] == "progress" && r["read_percent"] != 25.0 {
						t.Errorf("read_percent %v; want 25", r["read_percent"])
					}
					if _, isNumber := r["elapsed_seconds"].(float64); r["msg"] == "progress" && (!isNumber || r["elapsed"] != nil) {
						t.Errorf("progress elapsed_seconds %v (elapsed %v); want a number of seconds, as the summary's", r["elapsed_seconds"], r["elapsed"])
					}
				} else if strings.Contains(line, "msg=progress") && !strings.Contains(line, "read_percent=25") {
					t.Errorf("progress line without read_percent=25: %s", line)
				}
			}
		})
	}
}
