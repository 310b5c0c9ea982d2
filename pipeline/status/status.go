// Package status serves a running job's health (/healthz) and Prometheus
// metrics (/metrics) over HTTP, for synapse's --status-addr.
//
// Nothing it serves sends a request to a worker: health is the supervisor's
// cached view (crashes, restarts, quarantines, the memory of the last
// PONG), and the counters are the job's own. The job feeds it through
// [Server.Request] and [Server.ErrorRecord] (job.Observer) and tells it
// when it has started ([Server.Attach]) and ended ([Server.Finish]).
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/supervise"
)

// Run is what the server reports of a started job. Every field is read
// at each request and must not block.
type Run struct {
	Kind  string // "embed", "rerank", "generate"
	Model string // the model's name
	// Health is the pool's cached health (supervise.Pool.Health).
	Health func() supervise.Health
	// Estimate is the size of what the job reads (the shard's share for a
	// sharded run), for the progress ratio.
	Estimate corpus.Estimate
}

// Phases of a job in /healthz.
const (
	PhaseStarting = "starting" // options checked; the workers are starting or loading the model
	PhaseRunning  = "running"
	PhaseFinished = "finished"
	PhaseFailed   = "failed"
)

// Server serves /healthz and /metrics for one job. Its methods are safe
// for concurrent use.
type Server struct {
	ln     net.Listener
	http   *http.Server
	stats  *pipeline.Stats
	reg    *prometheus.Registry
	events *events
	served chan struct{} // closed when the serving goroutine returns

	mu    sync.Mutex
	run   Run
	phase string
	cause string // why the job failed
}

// Listen binds addr (HOST:PORT; port 0 picks a free one). The job checks
// this with its options, so that a bad or busy address fails before any
// work; nothing is served before Start.
func Listen(addr string) (*Server, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("status: address %q: want HOST:PORT: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	return &Server{ln: ln, phase: PhaseStarting, served: make(chan struct{})}, nil
}

// Addr is the address the server listens on (with the port picked for port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Start serves the job whose counters are stats until Close.
func (s *Server) Start(stats *pipeline.Stats) {
	s.stats = stats
	s.reg = prometheus.NewRegistry() // private: nothing of the process's global default
	s.events = newEvents()
	s.reg.MustRegister(s.events.latency, s.events.errors, &collector{s: s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.http.Serve(s.ln) // ErrServerClosed after Close; other errors end serving, not the job
	}()
}

// Attach tells the server that the job has started: health and progress
// come from r from now on.
func (s *Server) Attach(r Run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.run, s.phase = r, PhaseRunning
}

// Finish records the job's end; err is its error (nil: it finished).
func (s *Server) Finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase = PhaseFinished
	if err != nil {
		s.phase, s.cause = PhaseFailed, err.Error()
	}
}

// Close stops serving, waits for the requests in progress (until ctx
// ends) and for the serving goroutine, and closes the listener. A Server
// that was never started only closes its listener.
func (s *Server) Close(ctx context.Context) error {
	if s.http == nil {
		return s.ln.Close()
	}
	err := s.http.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.http.Close())
	}
	<-s.served
	return err
}

// Request records one request to a worker (job.Observer).
func (s *Server) Request(d time.Duration, err error) { s.events.request(d, err) }

// ErrorRecord records one record of the errors file (job.Observer).
func (s *Server) ErrorRecord(reason string) { s.events.errors.WithLabelValues(reason).Inc() }

// state is a snapshot of what the server knows of the job.
func (s *Server) state() (Run, string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run, s.phase, s.cause
}

// Health is the body of /healthz.
type Health struct {
	Status string `json:"status"` // StatusHealthy, StatusStarting, StatusDegraded, StatusQuarantined or StatusFailed
	Reason string `json:"reason,omitempty"`
	Phase  string `json:"phase"` // PhaseStarting, PhaseRunning, PhaseFinished or PhaseFailed
	// Error is why the job failed (phase failed).
	Error           string         `json:"error,omitempty"`
	Workers         []WorkerHealth `json:"workers,omitempty"`
	Restarts        int            `json:"restarts"`
	CrashesInWindow int            `json:"crashes_in_window"`
	Quarantined     []string       `json:"quarantined,omitempty"`
}

// WorkerHealth is one worker in /healthz.
type WorkerHealth struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	PID       int    `json:"pid,omitempty"`
	Restarts  int    `json:"restarts"`
	RSSMB     int    `json:"rss_mb"`
	LastCrash string `json:"last_crash,omitempty"` // "stage: reason"
}

// Statuses of /healthz: healthy and starting answer 200, the others 503.
const (
	StatusHealthy     = "healthy"
	StatusStarting    = "starting"
	StatusDegraded    = "degraded"    // many crashes within the supervisor's window
	StatusQuarantined = "quarantined" // the model kept crashing workers; no request of it is sent
	StatusFailed      = "failed"      // every worker was given up, or the job failed before its workers ran
)

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	h := s.health()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if h.Status != StatusHealthy && h.Status != StatusStarting {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(h)
}

// health builds /healthz from the supervisor's cached health.
func (s *Server) health() Health {
	run, phase, cause := s.state()
	h := Health{Status: StatusStarting, Phase: phase, Error: cause, Reason: "the workers are starting"}
	switch {
	case run.Health == nil && phase == PhaseFailed:
		h.Status, h.Reason = StatusFailed, "the job failed before its workers ran"
		return h
	case run.Health == nil:
		return h
	}
	ph := run.Health()
	return fromPool(h, ph)
}

// fromPool fills h from the pool's health.
func fromPool(h Health, ph supervise.Health) Health {
	h.Status, h.Reason, h.CrashesInWindow = StatusHealthy, "", ph.CrashesInWindow
	failed := 0
	for _, w := range ph.Workers {
		wh := WorkerHealth{ID: w.ID, State: string(w.State), PID: w.PID, Restarts: w.Restarts, RSSMB: w.RSSMB}
		if c := w.LastCrash; c != nil {
			wh.LastCrash = c.Stage + ": " + c.Reason
		}
		if w.State == supervise.StateFailed {
			failed++
		}
		h.Restarts += w.Restarts
		h.Workers = append(h.Workers, wh)
	}
	for _, q := range ph.Quarantined {
		h.Quarantined = append(h.Quarantined, q.Model.String())
	}
	switch {
	case len(ph.Quarantined) > 0:
		h.Status = StatusQuarantined
		h.Reason = fmt.Sprintf("%d model(s) quarantined after %d crashes in a row", len(ph.Quarantined), ph.Quarantined[0].Crashes)
	case len(ph.Workers) > 0 && failed == len(ph.Workers):
		h.Status, h.Reason = StatusFailed, "every worker failed to start"
	case ph.Degraded:
		h.Status = StatusDegraded
		h.Reason = fmt.Sprintf("%d worker crashes within the supervisor's window", ph.CrashesInWindow)
	}
	return h
}
