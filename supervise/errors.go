package supervise

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// CodeEngineCrashed is the stable code of a *CrashError.
const CodeEngineCrashed = "engine_crashed"

// CodeQuarantined is the stable code of a *QuarantinedError.
const CodeQuarantined = "quarantined"

// Sentinel causes, matched with errors.Is through *StartError and *CrashError.
var (
	// ErrClosed is returned by calls on a closed Pool, and by calls that
	// Close cut short.
	ErrClosed = errors.New("supervise: pool closed")
	// ErrStartTimeout means the worker did not connect and say HELLO within
	// Config.StartTimeout.
	ErrStartTimeout = errors.New("start deadline exceeded")
	// ErrNonce means HELLO carried a nonce other than the spawn nonce: a
	// stale worker or an impostor.
	ErrNonce = errors.New("nonce mismatch")
	// ErrVersion means HELLO carried a protocol version this module does not
	// speak.
	ErrVersion = errors.New("unsupported protocol version")
	// ErrProtocol marks a protocol violation by the worker.
	ErrProtocol = errors.New("protocol violation")
	// ErrExited means the worker process exited.
	ErrExited = errors.New("worker exited")
	// ErrNoWorkers means every worker failed to restart MaxStartFailures
	// times in a row; the pool cannot serve.
	ErrNoWorkers = errors.New("supervise: no worker can be started")
)

// StartError reports a worker that could not be started: spawn failed, it did
// not connect in time, or its handshake was refused. The child has been
// killed and reaped when the error is returned.
type StartError struct {
	WorkerID   string
	PID        int    // 0 if the process never started
	Stage      string // "listen", "spawn", "accept", "handshake"
	ExitStatus int    // exit code, -1 if killed by a signal or unknown
	Signal     string // e.g. "SIGKILL", "" if it exited by itself
	LogTail    string // last bytes of the worker's stdout/stderr
	Err        error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("supervise: start worker %s (pid %d): %s: %v", e.WorkerID, e.PID, e.Stage, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// CrashError is engine_crashed: the worker died, hung past its deadline, broke
// the protocol or closed its socket while serving a request. The worker has
// been killed and reaped and the pool restarts it; the request failed and may
// be retried by the caller.
type CrashError struct {
	WorkerID   string
	PID        int
	Stage      string    // "timeout", "send", "recv", "protocol", "load" (reload after restart), "ping"
	Request    string    // type of the request that was in flight
	Model      ModelKey  // the (model, config) the request was for; zero if none
	ExitStatus int       // exit code, -1 if killed by a signal or unknown
	Signal     string    // e.g. "SIGABRT", "SIGKILL"; "" if it exited by itself
	LogTail    string    // last 8 KiB of the worker's stdout/stderr
	Time       time.Time // when the crash was seen (Config.Now)
	Err        error     // the cause: io.EOF, context.DeadlineExceeded, *wire.ProtocolError, ...
}

// Code returns "engine_crashed".
func (e *CrashError) Code() string { return CodeEngineCrashed }

func (e *CrashError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "supervise: %s: worker %s (pid %d) %s", CodeEngineCrashed, e.WorkerID, e.PID, e.Stage)
	if e.Request != "" {
		fmt.Fprintf(&b, " %s", e.Request)
	}
	switch {
	case e.Signal != "":
		fmt.Fprintf(&b, ": killed by %s", e.Signal)
	case e.ExitStatus >= 0:
		fmt.Fprintf(&b, ": exit status %d", e.ExitStatus)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *CrashError) Unwrap() error { return e.Err }

// QuarantinedError is returned at once for a (model, config) that crashed
// Config.QuarantineCrashes times within Config.QuarantineWindow, until
// Pool.Reprobe lifts the quarantine.
type QuarantinedError struct {
	Model   ModelKey
	Crashes int       // crashes within the window when it was quarantined
	Since   time.Time // when it was quarantined
	Last    *CrashError
}

// Code returns "quarantined".
func (e *QuarantinedError) Code() string { return CodeQuarantined }

func (e *QuarantinedError) Error() string {
	return fmt.Sprintf("supervise: %s: %s after %d crashes (since %s)", CodeQuarantined, e.Model, e.Crashes, e.Since.Format(time.RFC3339))
}

// Unwrap returns the last crash that counted towards the quarantine.
func (e *QuarantinedError) Unwrap() error {
	if e.Last == nil {
		return nil
	}
	return e.Last
}
