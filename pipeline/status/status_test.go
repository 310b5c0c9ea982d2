package status

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/pipeline/status/promtest"
	"github.com/synapse-embed/synapse/supervise"
)

// client does not keep connections, so that none outlives a test.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// started is a server on a free port of the loopback, closed after the test.
func started(t *testing.T, st *pipeline.Stats) *Server {
	t.Helper()
	s, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Start(st)
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// get fetches path and returns the status code and body.
func get(t *testing.T, s *Server, path string) (int, []byte) {
	t.Helper()
	resp, err := client.Get("http://" + s.Addr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// scrape parses /metrics with the Prometheus text parser.
func scrape(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, s, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: status %d; want 200", code)
	}
	return promtest.Parse(t, body)
}

func healthz(t *testing.T, s *Server) (int, Health) {
	t.Helper()
	code, body := get(t, s, "/healthz")
	var h Health
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("/healthz: %v\n%s", err, body)
	}
	return code, h
}

func TestListenErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, addr := range []string{"nonsense", "127.0.0.1:99999", busy.Addr().String(), "no-such-host.invalid:80"} {
		if s, err := Listen(addr); err == nil {
			s.Close(context.Background())
			t.Errorf("Listen(%q) succeeded; want an error", addr)
		}
	}
}

// TestMetrics checks every metric against the counters and health it reads.
func TestMetrics(t *testing.T) {
	st := &pipeline.Stats{}
	s := started(t, st)
	mf := scrape(t, s)
	if got := promtest.Value(t, mf, "synapse_rows_read_total"); got != 0 {
		t.Errorf("rows read before the start: got %v; want 0", got)
	}
	if mf["synapse_job_info"] != nil || mf["synapse_progress_ratio"] != nil {
		t.Errorf("job info or progress before the job started")
	}

	st.Read.Store(10)
	st.OK.Store(7)
	st.Failed.Store(3)
	st.Items.Store(25)
	st.Tokens.Store(1234)
	st.InputBytes.Store(900) // read ahead: not progress
	st.DoneBytes.Store(250)
	h := supervise.Health{
		Workers: []supervise.WorkerHealth{
			{ID: "w0", State: supervise.StateReady, Restarts: 2, RSSMB: 100},
			{ID: "w1", State: supervise.StateBusy, Restarts: 1, RSSMB: 50},
		},
		Crashes: map[string]int{"recv": 2, "timeout": 1},
	}
	s.Attach(Run{Kind: "embed", Model: "tiny", Health: func() supervise.Health { return h }, Estimate: corpus.Estimate{JSONLBytes: 1000}})
	s.Request(20*time.Millisecond, nil)
	s.Request(30*time.Millisecond, nil)
	s.Request(time.Second, errors.New("crash"))
	s.ErrorRecord("engine_crashed")
	s.ErrorRecord("engine_crashed")
	s.ErrorRecord("invalid_json")

	mf = scrape(t, s)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"synapse_rows_read_total", nil, 10},
		{"synapse_rows_done_total", nil, 7},
		{"synapse_rows_failed_total", nil, 3},
		{"synapse_items_total", nil, 25},
		{"synapse_tokens_total", nil, 1234},
		{"synapse_worker_restarts_total", nil, 3},
		{"synapse_worker_crashes_total", []string{"stage", "recv"}, 2},
		{"synapse_worker_crashes_total", []string{"stage", "timeout"}, 1},
		{"synapse_worker_rss_bytes", []string{"worker", "w0"}, 100 << 20},
		{"synapse_worker_rss_bytes", []string{"worker", "w1"}, 50 << 20},
		{"synapse_workers", []string{"state", "busy"}, 1},
		{"synapse_quarantined_models", nil, 0},
		{"synapse_degraded", nil, 0},
		{"synapse_progress_ratio", nil, 0.25},
		{"synapse_error_records_total", []string{"reason", "engine_crashed"}, 2},
		{"synapse_error_records_total", []string{"reason", "invalid_json"}, 1},
		{"synapse_request_duration_seconds", []string{"outcome", "ok"}, 2},
		{"synapse_request_duration_seconds", []string{"outcome", "error"}, 1},
		{"synapse_job_info", []string{"kind", "embed", "model", "tiny"}, 1},
	} {
		if got := promtest.Value(t, mf, tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%v = %v; want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if mf["process_resident_memory_bytes"] == nil {
		t.Errorf("no process metrics")
	}
}

func TestProgress(t *testing.T) {
	st := &pipeline.Stats{}
	st.InputRows.Store(90) // read ahead of what is written: not progress
	st.InputBytes.Store(9000)
	st.DoneRows.Store(30)
	st.DoneBytes.Store(5000)
	live := func() supervise.Health { return supervise.Health{} }
	for _, tc := range []struct {
		name string
		run  Run
		want float64
		ok   bool
	}{
		{"not started", Run{Estimate: corpus.Estimate{ParquetRows: 100}}, 0, false},
		{"parquet", Run{Health: live, Estimate: corpus.Estimate{ParquetRows: 120}}, 0.25, true},
		{"jsonl", Run{Health: live, Estimate: corpus.Estimate{JSONLBytes: 10000, ParquetRows: 120}}, 0.5, true},
		{"stdin", Run{Health: live, Estimate: corpus.Estimate{JSONLBytes: -1}}, 0, false},
		{"read past the end of a shard", Run{Health: live, Estimate: corpus.Estimate{JSONLBytes: 4000}}, 1, true},
		{"empty", Run{Health: live}, 1, true},
	} {
		got, ok := progress(st, tc.run)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: progress %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestHealthz(t *testing.T) {
	s := started(t, &pipeline.Stats{})
	code, h := healthz(t, s)
	if code != http.StatusOK || h.Status != StatusStarting || h.Phase != PhaseStarting {
		t.Errorf("before the start: %d %+v; want 200 starting", code, h)
	}
	early := started(t, &pipeline.Stats{})
	early.Finish(errors.New("no worker started"))
	if code, h := healthz(t, early); code != http.StatusServiceUnavailable || h.Status != StatusFailed || h.Error != "no worker started" {
		t.Errorf("a job that failed before it started: %d %+v; want 503 failed with the error", code, h)
	}
	q := supervise.Quarantine{Model: supervise.ModelKey{Artifact: "sha256:abc"}, Crashes: 6, Since: time.Now()}
	ready := []supervise.WorkerHealth{{ID: "w0", State: supervise.StateReady}}
	failed := []supervise.WorkerHealth{{ID: "w0", State: supervise.StateFailed}}
	for _, tc := range []struct {
		name   string
		health supervise.Health
		code   int
		status string
	}{
		{"healthy", supervise.Health{Workers: ready}, http.StatusOK, StatusHealthy},
		{"degraded", supervise.Health{Workers: ready, Degraded: true, CrashesInWindow: 10}, http.StatusServiceUnavailable, StatusDegraded},
		{"quarantined", supervise.Health{Workers: ready, Quarantined: []supervise.Quarantine{q}}, http.StatusServiceUnavailable, StatusQuarantined},
		{"failed", supervise.Health{Workers: failed}, http.StatusServiceUnavailable, StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Attach(Run{Health: func() supervise.Health { return tc.health }})
			code, h := healthz(t, s)
			if code != tc.code || h.Status != tc.status || h.Phase != PhaseRunning {
				t.Errorf("got %d %q (phase %q); want %d %q (running)", code, h.Status, h.Phase, tc.code, tc.status)
			}
			if tc.status != StatusHealthy && h.Reason == "" {
				t.Errorf("no reason for %s", tc.status)
			}
		})
	}
	s.Finish(errors.New("boom"))
	if _, h := healthz(t, s); h.Phase != PhaseFailed || h.Error != "boom" {
		t.Errorf("after a failure: phase %q error %q; want failed, boom", h.Phase, h.Error)
	}
}

// TestClose: after Close nothing listens and the serving goroutines are gone.
func TestClose(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Start(&pipeline.Stats{})
	scrape(t, s)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Close", s.Addr())
	}
	// Goroutines of finished connections exit on their own; wait for that
	// event with a deadline, yielding the processor meanwhile.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Close; %d before\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}

	// A server that was never started only closes its listener.
	s, err = Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Errorf("an unstarted server's %s still accepts connections after Close", s.Addr())
	}
}

// TestDocsListEveryMetric: the metrics table of docs/observability.md
// (moved there from the README) names every synapse_ metric the server
// exports, and no other.
func TestDocsListEveryMetric(t *testing.T) {
	readme, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	s := started(t, &pipeline.Stats{})
	h := supervise.Health{Workers: []supervise.WorkerHealth{{ID: "w0", State: supervise.StateReady}}, Crashes: map[string]int{"recv": 1}}
	s.Attach(Run{Kind: "embed", Model: "m", Health: func() supervise.Health { return h }, Estimate: corpus.Estimate{ParquetRows: 1}})
	s.Request(time.Millisecond, nil)
	s.ErrorRecord("r")
	exported := map[string]bool{}
	for name := range scrape(t, s) {
		if strings.HasPrefix(name, "synapse_") {
			exported[name] = true
			if !strings.Contains(string(readme), "| `"+name+"` |") {
				t.Errorf("docs/observability.md's metrics table does not list %s", name)
			}
		}
	}
	for _, m := range regexp.MustCompile("\\| `(synapse_[a-z_]+)` \\|").FindAllStringSubmatch(string(readme), -1) {
		if !exported[m[1]] {
			t.Errorf("docs/observability.md lists %s, which the server does not export", m[1])
		}
	}
}
