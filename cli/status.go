package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/pipeline/job"
	"github.com/synapse-embed/synapse/pipeline/status"
)

// Health, metrics and logs of a job command: --status-addr serves
// /healthz and /metrics (package status) while the job runs, --log-format
// json turns warnings, progress and the summary into JSON log records.

// defaultProgressEvery is how often progress is logged off a terminal.
const defaultProgressEvery = 30 * time.Second

// statusFlags are the health, metrics and log flags of every job command.
func statusFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "status-addr", Usage: "serve /healthz (200 healthy, 503 degraded or quarantined, JSON) and /metrics (Prometheus) on `HOST:PORT` while the job runs, e.g. 127.0.0.1:9090 or :9090 (all interfaces); see docs/observability.md"},
		&cli.DurationFlag{Name: "status-linger", Usage: "with --status-addr: keep serving for `DURATION` after the job ends, so that a scraper sees the final values (Ctrl-C ends it early)"},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "`FORMAT` of stderr: text or json; json writes warnings, errors, progress and the summary to stderr as JSON lines (log/slog: time, level, msg and fields) for log shippers"},
		&cli.DurationFlag{Name: "progress-every", Value: defaultProgressEvery, Usage: "log progress (work done, total, rate, ETA) every `DURATION` instead of drawing the progress line when stderr is not a terminal (or with --log-format json)"},
	}
}

// checkStatusFlags checks the status and log flags.
func checkStatusFlags(c *cli.Context, name string) error {
	switch f := c.String("log-format"); f {
	case "text", "json":
	default:
		return usagef("%s: --log-format %q: want text or json", name, f)
	}
	switch {
	case c.Duration("progress-every") <= 0:
		return usagef("%s: --progress-every must be positive", name)
	case c.Duration("status-linger") < 0:
		return usagef("%s: --status-linger must not be negative", name)
	case c.IsSet("status-linger") && c.String("status-addr") == "":
		return usagef("%s: --status-linger needs --status-addr", name)
	}
	return nil
}

// listenStatus binds --status-addr, the last step before a job's work, so
// that a bad or busy address is a usage error before any worker starts;
// the server becomes the job's observer. Without --status-addr it returns
// nil.
func listenStatus(c *cli.Context, name string) (*status.Server, error) {
	addr := c.String("status-addr")
	if addr == "" {
		return nil, nil
	}
	srv, err := status.Listen(addr)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: --status-addr: %w", name, err)}
	}
	return srv, nil
}

// jobLog is a job's logger and how it talks to the user.
type jobLog struct {
	*slog.Logger
	json bool
	w    io.Writer
}

func newJobLog(w io.Writer, format string) jobLog {
	w = scrubWriter{w} // a logged error may carry a secret from anywhere
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if format == "json" {
		return jobLog{slog.New(slog.NewJSONHandler(w, opts)), true, w}
	}
	return jobLog{slog.New(slog.NewTextHandler(w, opts)), false, w}
}

// note tells the user msg: "synapse: msg" on stderr, or a log record
// with the fields args in JSON.
func (l jobLog) note(level slog.Level, msg string, args ...any) {
	if l.json {
		l.Log(context.Background(), level, msg, args...)
		return
	}
	fmt.Fprintf(l.w, "synapse: %s\n", msg)
}

// loggedError is an error the job has already told the user.
type loggedError struct{ err error }

func (e loggedError) Error() string { return e.err.Error() }
func (e loggedError) Unwrap() error { return e.err }

// isLogged reports an error the job has already told the user (run does
// not print it again).
func isLogged(err error) bool {
	var le loggedError
	return errors.As(err, &le)
}

// summary logs the summary as one record (JSON logs).
func (l jobLog) summary(s job.Summary) {
	j := s.Job
	l.Info("summary", "kind", s.Kind, "rows_read", j.Read, "rows_done", j.OK, "rows_failed", j.Failed,
		"file_errors", j.FileErrors, "items", j.Items, "tokens", j.Tokens, "run_rows_read", s.Run.Read,
		"elapsed_seconds", s.Elapsed.Seconds(), "restarts", s.Restarts, "quarantined", s.Quarantined,
		"deadline_stretch", max(s.DeadlineStretch, 1), "output", s.Out, "errors", s.Errors, "chaos", s.Chaos,
		"resumed_rows", s.ResumedRows, "requests", s.Requests, "request_items", s.RequestItems, "replayed_items", s.ReplayItems,
		"replayed_items_sent", s.ReplayItems-s.SkippedReplay, "dropped_items", s.DroppedItems)
}

// jobStatus is a job's status server, if --status-addr was given.
type jobStatus struct {
	srv    *status.Server
	linger time.Duration
}

// start serves until end; the server learns of the job when it starts.
func (s jobStatus) start(o *job.Options, log jobLog) {
	if s.srv == nil {
		return
	}
	s.srv.Start(o.Stats)
	log.Info("serving health and metrics", "addr", s.srv.Addr(), "healthz", "http://"+s.srv.Addr()+"/healthz",
		"metrics", "http://"+s.srv.Addr()+"/metrics")
	started := o.Started
	o.Started = func(info job.Info) {
		if started != nil {
			started(info)
		}
		s.srv.Attach(status.Run{Kind: info.Kind, Model: info.Model.Name, Health: info.Health, Estimate: info.Estimate})
	}
}

// finish records the job's outcome (err as runJob returns it) for /healthz.
func (s jobStatus) finish(err error) {
	if s.srv == nil {
		return
	}
	var pe partialError
	if errors.As(err, &pe) {
		s.srv.Finish(nil) // the job finished, with rows in the errors file (the metrics count them)
	} else {
		s.srv.Finish(err)
	}
}

// end serves on for --status-linger (until ctx ends: Ctrl-C) and closes
// the server. An error the user should see now rather than after the
// linger is told first.
func (s jobStatus) end(ctx context.Context, err error, log jobLog) error {
	if s.srv == nil {
		return err
	}
	if s.linger > 0 {
		if err != nil && !isLogged(err) && exitCode(ctx, err) != exitInterrupted {
			log.note(slog.LevelError, err.Error())
			err = loggedError{err}
		}
		log.Info("the job has ended; serving health and metrics a while longer (--status-linger)", "addr", s.srv.Addr(), "linger", s.linger.String())
		t := time.NewTimer(s.linger)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if cerr := s.srv.Close(shut); cerr != nil {
		log.Warn("closing the status server", "err", cerr)
	}
	return err
}
