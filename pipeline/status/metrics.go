package status

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/supervise"
)

// The metrics. Counters of rows, items and tokens cover the whole job: a
// resumed run starts from the interrupted run's counts. docs/observability.md
// lists them; keep the two in step (TestDocsListEveryMetric).
var (
	descRowsRead     = desc("synapse_rows_read_total", "Input records that reached the output or the errors file (done + failed).")
	descRowsDone     = desc("synapse_rows_done_total", "Input records with every item answered.")
	descRowsFailed   = desc("synapse_rows_failed_total", "Input records with at least one record in the errors file.")
	descFileErrors   = desc("synapse_file_errors_total", "Input files that failed as a whole.")
	descItems        = desc("synapse_items_total", "Items answered: chunks (embed), query-document pairs (rerank), generations (generate).")
	descItemFailures = desc("synapse_item_failures_total", "Items that failed alone.")
	descTokens       = desc("synapse_tokens_total", "Tokens of the items answered.")
	descRestarts     = desc("synapse_worker_restarts_total", "Worker processes restarted after a crash.")
	descCrashes      = desc("synapse_worker_crashes_total", "Worker crashes by stage: send, recv, timeout, protocol, load (replaying LOAD after a restart), start (a restart that failed).", "stage")
	descRSS          = desc("synapse_worker_rss_bytes", "Resident memory of a worker process, from its last PONG.", "worker")
	descWorkers      = desc("synapse_workers", "Worker slots by state: starting, ready, busy, restarting, failed, closed.", "state")
	descQuarantined  = desc("synapse_quarantined_models", "Models the supervisor quarantined after repeated crashes.")
	descDegraded     = desc("synapse_degraded", "1 when the supervisor counts many crashes within its window, else 0.")
	descProgress     = desc("synapse_progress_ratio", "Share of the input done: read and its rows written (of a sharded run: of the shard's part), from 0 to 1; absent when the size is unknown (stdin).")
	descDeadline     = desc("synapse_deadline_factor", "How far request deadlines are stretched after timeouts (1: not).")
	descInfo         = desc("synapse_job_info", "The running job: its kind and model (value 1).", "kind", "model")
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// events are the metrics the job pushes as things happen.
type events struct {
	latency *prometheus.HistogramVec
	errors  *prometheus.CounterVec
}

func newEvents() *events {
	return &events{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "synapse_request_duration_seconds",
			Help: "Time from sending a request to a worker to its answer (outcome ok) or failure (outcome error).",
			// 5 ms to about 3 minutes: a small embedding batch to a long generation.
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}, []string{"outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "synapse_error_records_total",
			Help: "Records written to the errors file in this run, by reason (the errors file's reason codes).",
		}, []string{"reason"}),
	}
}

func (e *events) request(d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	e.latency.WithLabelValues(outcome).Observe(d.Seconds())
}

// collector reads the job's counters and the pool's cached health at each
// scrape.
type collector struct{ s *Server }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRowsRead, descRowsDone, descRowsFailed, descFileErrors, descItems,
		descItemFailures, descTokens, descRestarts, descCrashes, descRSS, descWorkers, descQuarantined, descDegraded,
		descProgress, descDeadline, descInfo} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	run, _, _ := c.s.state()
	st := c.s.stats
	n := st.Snapshot()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(descRowsRead, n.Read)
	counter(descRowsDone, n.OK)
	counter(descRowsFailed, n.Failed)
	counter(descFileErrors, n.FileErrors)
	counter(descItems, n.Items)
	counter(descItemFailures, n.ItemFailures)
	counter(descTokens, n.Tokens)
	ch <- prometheus.MustNewConstMetric(descDeadline, prometheus.GaugeValue, float64(max(st.DeadlineStretch.Load(), 1)))
	if p, ok := progress(st, run); ok {
		ch <- prometheus.MustNewConstMetric(descProgress, prometheus.GaugeValue, p)
	}
	if run.Health == nil { // not started: no workers yet
		return
	}
	ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, run.Kind, run.Model)
	collectHealth(ch, run.Health())
}

// collectHealth reports the pool's cached health.
func collectHealth(ch chan<- prometheus.Metric, h supervise.Health) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	restarts := 0
	states := map[string]int{}
	for _, w := range h.Workers {
		restarts += w.Restarts
		states[string(w.State)]++
		gauge(descRSS, float64(w.RSSMB)*(1<<20), w.ID)
	}
	for _, s := range []supervise.WorkerState{supervise.StateStarting, supervise.StateReady, supervise.StateBusy,
		supervise.StateRestarting, supervise.StateFailed, supervise.StateClosed} {
		gauge(descWorkers, float64(states[string(s)]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(restarts))
	stages := make([]string, 0, len(h.Crashes))
	for s := range h.Crashes {
		stages = append(stages, s)
	}
	sort.Strings(stages)
	for _, s := range stages {
		ch <- prometheus.MustNewConstMetric(descCrashes, prometheus.CounterValue, float64(h.Crashes[s]), s)
	}
	gauge(descQuarantined, float64(len(h.Quarantined)))
	degraded := 0.0
	if h.Degraded {
		degraded = 1
	}
	gauge(descDegraded, degraded)
}

// progress is the share of the input read: JSON Lines bytes when JSON
// Lines files are among the inputs (as the progress bar counts), else
// Parquet rows. ok is false when the size is unknown.
func progress(st *pipeline.Stats, run Run) (float64, bool) {
	est := run.Estimate
	var done, total int64
	switch {
	case run.Health == nil:
		return 0, false // not started: no estimate yet
	case est.JSONLBytes < 0:
		return 0, false // stdin or a pipe
	case est.JSONLBytes > 0:
		done, total = st.DoneBytes.Load(), est.JSONLBytes
	case est.ParquetRows > 0:
		done, total = st.DoneRows.Load(), est.ParquetRows
	default:
		return 1, true // nothing to read
	}
	return min(max(float64(done)/float64(total), 0), 1), true
}
