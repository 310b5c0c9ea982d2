package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/pipeline/job"
	"github.com/synapse-embed/synapse/pipeline/status"
	"github.com/synapse-embed/synapse/pipeline/status/promtest"
	"github.com/synapse-embed/synapse/supervise"
)

// End-to-end tests of --status-addr, --status-linger and --log-format json:
// the real binary and workers; /metrics parsed with the Prometheus text
// parser while the job runs and again after it, against its summary.

// logRecord is one line of --log-format json.
type logRecord map[string]any

func (r logRecord) msg() string { s, _ := r["msg"].(string); return s }

func (r logRecord) num(key string) float64 { f, _ := r[key].(float64); return f }

// jsonLogs starts cmd and turns its stderr into records on the returned
// channel (closed at EOF); a line that is not a JSON object with level and
// msg fails the test.
func jsonLogs(t *testing.T, cmd *exec.Cmd) <-chan logRecord {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan logRecord, 1024)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r logRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r["level"] == nil || r["msg"] == nil || r["time"] == nil {
				t.Errorf("stderr line is not a JSON log record with time, level and msg (%v): %s", err, sc.Text())
				continue
			}
			ch <- r
		}
	}()
	return ch
}

// waitLog returns the first record for which want is true, failing the
// test if none comes within two minutes or stderr ends first.
func waitLog(t *testing.T, logs <-chan logRecord, what string, want func(logRecord) bool) logRecord {
	t.Helper()
	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	for {
		select {
		case r, ok := <-logs:
			if !ok {
				t.Fatalf("stderr ended before %s", what)
			}
			if want(r) {
				return r
			}
		case <-deadline.C:
			t.Fatalf("no %s within two minutes", what)
		}
	}
}

// statusAddr waits for the record that says where health and metrics are served.
func statusAddr(t *testing.T, logs <-chan logRecord) string {
	t.Helper()
	r := waitLog(t, logs, "the status server's address", func(r logRecord) bool { return r.msg() == "serving health and metrics" })
	addr, _ := r["addr"].(string)
	return addr
}

var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}

func httpGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := httpClient.Get(url)
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

// scrapeMetrics fetches and parses /metrics.
func scrapeMetrics(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: status %d; want 200\n%s", code, body)
	}
	return promtest.Parse(t, body)
}

func getHealth(t *testing.T, addr string) (int, status.Health) {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/healthz")
	var h status.Health
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("/healthz: %v\n%s", err, body)
	}
	return code, h
}

// TestStatusMetricsDuringRun feeds a run through a pipe the test holds
// open, scrapes /metrics while the run waits for more input, then closes
// the pipe and checks the final scrape against the summary and the errors
// file. Every stderr line must be a JSON log record.
func TestStatusMetricsDuringRun(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "piped.arrow")
	cmd := synapseCmd(context.Background(), t, nil, "embed", "-", "-m", tinyModel(t), "-o", out, "--workers", "2", "--threads", "1",
		"--batch-tokens", "256", "--status-addr", "127.0.0.1:0", "--status-linger", "10m", "--log-format", "json", "--progress-every", "50ms")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	logs := jsonLogs(t, cmd)
	defer cmd.Process.Kill()
	addr := statusAddr(t, logs)

	docs := testCorpus(700)
	write := func(docs []map[string]any) {
		for _, d := range docs {
			line, _ := json.Marshal(d)
			if _, err := fmt.Fprintf(stdin, "%s\n", line); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(docs[:600]) // more than a packing window: batches go out while the pipe stays open
	waitLog(t, logs, "the started record", func(r logRecord) bool { return r.msg() == "started" })
	p := waitLog(t, logs, "progress with rows done", func(r logRecord) bool { return r.msg() == "progress" && r.num("rows") > 0 })

	// The pipe is open: the run cannot have ended.
	mf := scrapeMetrics(t, addr)
	read := promtest.Value(t, mf, "synapse_rows_read_total")
	if read < p.num("rows") || read > 600 {
		t.Errorf("during the run: rows read %v; want between the %v of the progress record and the 600 written", read, p.num("rows"))
	}
	if got := promtest.Value(t, mf, "synapse_job_info", "kind", "embed"); got != 1 {
		t.Errorf("synapse_job_info{kind=embed} = %v; want 1", got)
	}
	if promtest.Value(t, mf, "synapse_request_duration_seconds", "outcome", "ok") < 1 || promtest.Value(t, mf, "synapse_worker_rss_bytes") <= 0 {
		t.Errorf("during the run: no request latency or no worker memory")
	}
	if mf["synapse_progress_ratio"] != nil {
		t.Errorf("a progress ratio for stdin, whose size is unknown")
	}
	if code, h := getHealth(t, addr); code != http.StatusOK || h.Status != status.StatusHealthy || h.Phase != status.PhaseRunning {
		t.Errorf("/healthz during the run: %d %+v; want 200 healthy running", code, h)
	}

	write(docs[600:])
	if _, err := io.WriteString(stdin, "{broken\n{\"_id\": \"x\"}\n"); err != nil { // a line that is no JSON, a row without text
		t.Fatal(err)
	}
	stdin.Close()
	sum := waitLog(t, logs, "the summary record", func(r logRecord) bool { return r.msg() == "summary" })
	waitLog(t, logs, "the linger record", func(r logRecord) bool { return strings.Contains(r.msg(), "--status-linger") })

	mf = scrapeMetrics(t, addr)
	for name, key := range map[string]string{"synapse_rows_read_total": "rows_read", "synapse_rows_done_total": "rows_done",
		"synapse_rows_failed_total": "rows_failed", "synapse_items_total": "items", "synapse_tokens_total": "tokens",
		"synapse_worker_restarts_total": "restarts", "synapse_quarantined_models": "quarantined"} {
		if got, want := promtest.Value(t, mf, name), sum.num(key); got != want {
			t.Errorf("after the run: %s = %v; want the summary's %s %v", name, got, key, want)
		}
	}
	if sum.num("rows_read") != 702 || sum.num("rows_failed") != 2 {
		t.Errorf("summary: %v rows read, %v failed; want 702, 2", sum.num("rows_read"), sum.num("rows_failed"))
	}
	if mf["synapse_progress_ratio"] != nil {
		t.Errorf("a progress ratio for stdin after the run")
	}
	reasons := errorReasons(t, out+".errors.jsonl")
	for reason, n := range reasons {
		if got := promtest.Value(t, mf, "synapse_error_records_total", "reason", reason); got != float64(n) {
			t.Errorf("synapse_error_records_total{reason=%q} = %v; want the errors file's %d", reason, got, n)
		}
	}
	if got := promtest.Value(t, mf, "synapse_error_records_total"); got != 2 || len(reasons) == 0 {
		t.Errorf("error records %v (reasons %v); want 2", got, reasons)
	}
	if code, h := getHealth(t, addr); code != http.StatusOK || h.Phase != status.PhaseFinished {
		t.Errorf("/healthz after the run: %d %+v; want 200, phase finished", code, h)
	}

	// Ctrl-C ends the linger; the run's own outcome decides the exit code.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range logs { // drain to EOF, checking every line
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitPartial {
		t.Errorf("exit code %d; want %d (two rows in errors)", code, exitPartial)
	}
	if !strings.Contains(stdout.String(), "rows read      702 = 700 embedded + 2 in errors") {
		t.Errorf("stdout summary:\n%s", stdout.String())
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after the run", addr)
	}
}

// errorReasons counts the records of an errors file by reason.
func errorReasons(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct{ Reason string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("errors file line %q: %v", line, err)
		}
		n[e.Reason]++
	}
	return n
}

// TestStatusHealthzQuarantine: a chaos drill crashes every request until
// the model is quarantined; /healthz, served on after the failed run,
// answers 503 quarantined and /metrics counts the crashes.
func TestStatusHealthzQuarantine(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t)
	tok, err := tokenize.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	cls, _ := tok.Affixes() // in every chunk: every request crashes
	in := filepath.Join(dir, "in.jsonl")
	writeJSONL(t, in, testCorpus(20))
	cmd := synapseCmd(context.Background(), t, nil, "embed", in, "-m", model, "-o", filepath.Join(dir, "q.arrow"), "--workers", "1", "--threads", "1",
		"--status-addr", "127.0.0.1:0", "--status-linger", "10m", "--log-format", "json", "--chaos", fmt.Sprintf("abort-on-token=%d", cls[0]))
	logs := jsonLogs(t, cmd)
	defer cmd.Process.Kill()
	addr := statusAddr(t, logs)
	waitLog(t, logs, "the error record", func(r logRecord) bool {
		return r["level"] == "ERROR" && strings.Contains(r.msg(), "quarantined") && r.num("exit_code") == exitFatal
	})
	code, h := getHealth(t, addr)
	if code != http.StatusServiceUnavailable || h.Status != status.StatusQuarantined || len(h.Quarantined) != 1 || h.Phase != status.PhaseFailed {
		t.Errorf("/healthz: %d %+v; want 503 quarantined, one model, phase failed", code, h)
	}
	mf := scrapeMetrics(t, addr)
	if got := promtest.Value(t, mf, "synapse_quarantined_models"); got != 1 {
		t.Errorf("synapse_quarantined_models = %v; want 1", got)
	}
	if crashes, restarts := promtest.Value(t, mf, "synapse_worker_crashes_total"), promtest.Value(t, mf, "synapse_worker_restarts_total"); crashes < 3 || restarts < 1 {
		t.Errorf("crashes %v, restarts %v; want at least 3 crashes and a restart", crashes, restarts)
	}
	if got := promtest.Value(t, mf, "synapse_request_duration_seconds", "outcome", "error"); got < 3 {
		t.Errorf("failed requests in the latency histogram: %v; want at least 3", got)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range logs {
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitFatal {
		t.Errorf("exit code %d; want %d", code, exitFatal)
	}
}

// TestStatusFlagErrors: a bad or busy --status-addr and bad log flags are
// usage errors (exit 2) before any work: no worker starts, no output.
func TestStatusFlagErrors(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeJSONL(t, in, testCorpus(3))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	model := tinyModel(t)
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no port", []string{"--status-addr", "localhost"}, "--status-addr"},
		{"bad port", []string{"--status-addr", "127.0.0.1:99999"}, "--status-addr"},
		{"port in use", []string{"--status-addr", busy.Addr().String()}, "address already in use"},
		{"log format", []string{"--log-format", "xml"}, "--log-format"},
		{"linger alone", []string{"--status-linger", "1m"}, "--status-linger needs --status-addr"},
		{"progress every", []string{"--progress-every", "0s"}, "--progress-every"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".arrow")
			res := runSynapse(t, nil, append([]string{"embed", in, "-m", model, "-o", out}, tc.args...)...)
			res.wantCode(t, exitUsage)
			if !strings.Contains(res.stderr, tc.stderr) {
				t.Errorf("stderr does not say %q:\n%s", tc.stderr, res.stderr)
			}
			if strings.Contains(res.stdout, "rows read") {
				t.Errorf("a summary: the job ran\n%s", res.stdout)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was written", out)
			}
		})
	}
}

// TestStatusServerClosedAfterRun runs the job commands' wiring in this
// process around a stand-in job (no workers): the server answers while
// the job runs, and once serveJob returns its listener is closed and no
// goroutine of it, of the progress logger or of the linger is left.
func TestStatusServerClosedAfterRun(t *testing.T) {
	before := runtime.NumGoroutine()
	var stdout, stderr bytes.Buffer
	var addr string
	health := supervise.Health{Workers: []supervise.WorkerHealth{{ID: "w0", State: supervise.StateBusy, RSSMB: 12}}}
	app := &cli.App{Writer: &stdout, ErrWriter: &stderr, ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{{Name: "fake", Flags: jobFlags(""), Action: func(c *cli.Context) error {
			var o job.Options
			srv, err := listenStatus(c, "fake")
			if err != nil {
				return err
			}
			o.Observer = srv
			log := newJobLog(c.App.ErrWriter, c.String("log-format"))
			return serveJob(c, &o, words{verb: "faking", done: "faked", items: "items"}, log, func(ctx context.Context) (job.Summary, error) {
				o.Started(job.Info{Kind: "embed", Model: &artifact.Artifact{Name: "m"}, Workers: 1, Threads: 1,
					Health: func() supervise.Health { return health }, Restarts: func() int { return 0 }})
				o.Stats.Read.Add(5)
				o.Stats.OK.Add(5)
				addr = o.Observer.(*status.Server).Addr()
				mf := scrapeMetrics(t, addr)
				if got := promtest.Value(t, mf, "synapse_rows_read_total"); got != 5 {
					t.Errorf("rows read during the run: %v; want 5", got)
				}
				if got := promtest.Value(t, mf, "synapse_worker_rss_bytes", "worker", "w0"); got != 12<<20 {
					t.Errorf("worker memory: %v; want 12 MiB", got)
				}
				return job.Summary{Kind: "embed", Started: true, Job: o.Stats.Snapshot(), Run: o.Stats.Snapshot()}, nil
			})
		}}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // ends --status-linger at once, as Ctrl-C would
	err := app.RunContext(ctx, []string{"synapse", "fake", "--status-addr", "127.0.0.1:0", "--status-linger", "1h",
		"--log-format", "json", "--progress-every", "1ms"})
	if err != nil {
		t.Fatalf("serveJob: %v\n%s", err, stderr.String())
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after the run", addr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched() // connection goroutines end on their own: wait for that, with a deadline
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after the run; %d before\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
	for _, want := range []string{`"msg":"serving health and metrics"`, `"msg":"started"`, `"msg":"summary"`, `"rows_read":5`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr has no %s:\n%s", want, stderr.String())
		}
	}
}
