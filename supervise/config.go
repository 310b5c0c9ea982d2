package supervise

import (
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// Config configures a Pool. Zero fields take the defaults documented here.
type Config struct {
	// Command is the worker command: the executable and any leading
	// arguments ("synapse", "worker"); the pool appends
	// --socket PATH --nonce N. Required.
	Command []string
	// Env is added to BaseEnv for every worker; SYNAPSE_WORKER_ID is set
	// by the pool.
	Env []string
	// BaseEnv is the environment workers start from (nil: the module's own).
	BaseEnv []string
	// Workers is the number of worker processes (default 1).
	Workers int
	// RuntimeDir holds synapse/workers/<worker_id>.sock (default
	// $XDG_RUNTIME_DIR, else a private temporary directory removed by Close).
	RuntimeDir string

	// StartTimeout bounds spawn, connect and HELLO (default 30s).
	StartTimeout time.Duration
	// ShutdownTimeout bounds Close: in-flight requests finishing, then
	// SHUTDOWN and exit, before SIGKILL (default 5s).
	ShutdownTimeout time.Duration
	// LoadTimeout bounds each LOAD a restarted worker replays (default 5m).
	LoadTimeout time.Duration
	// MaxFrame is the largest frame this side accepts; the handshake uses
	// the smaller of it and the worker's (default wire.DefaultMaxFrame).
	MaxFrame uint32

	// RestartBackoff is the wait before the first restart of a crashed
	// worker; it doubles after each failed start up to RestartBackoffMax
	// (defaults 100ms, 5s; a negative RestartBackoff restarts at once).
	RestartBackoff, RestartBackoffMax time.Duration
	// MaxStartFailures is how many restarts in a row may fail before a
	// worker is given up (default 5).
	MaxStartFailures int

	// QuarantineCrashes crashes of one (model, config) within
	// QuarantineWindow, with no request of it served in between,
	// quarantine it (defaults 3, 10m).
	QuarantineCrashes int
	QuarantineWindow  time.Duration
	// DegradedCrashes crashes across all work within DegradedWindow mark
	// the pool degraded (defaults 10, 10m).
	DegradedCrashes int
	DegradedWindow  time.Duration

	// PingInterval is how often idle workers are PINGed to refresh Health
	// (default 10s; negative disables). PingTimeout bounds one PING
	// (default 10s).
	PingInterval, PingTimeout time.Duration

	// LogBytesPerWorker and LogBytesTotal cap the ring of worker output
	// (defaults 256 KiB and 4 MiB).
	LogBytesPerWorker, LogBytesTotal int

	// Logger receives lifecycle events and, at debug level, worker output
	// (default: discard).
	Logger *slog.Logger
	// Now is the clock for crash windows and timestamps (default time.Now).
	Now func() time.Time
	// Launcher starts processes (default ExecLauncher).
	Launcher Launcher
}

// withDefaults fills zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if len(c.Command) == 0 || c.Command[0] == "" {
		return c, errors.New("supervise: Config.Command is empty")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defInt := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt(&c.Workers, 1)
	def(&c.StartTimeout, 30*time.Second)
	def(&c.ShutdownTimeout, 5*time.Second)
	def(&c.LoadTimeout, 5*time.Minute)
	def(&c.RestartBackoff, 100*time.Millisecond)
	def(&c.RestartBackoffMax, 5*time.Second)
	defInt(&c.MaxStartFailures, 5)
	defInt(&c.QuarantineCrashes, 3)
	def(&c.QuarantineWindow, 10*time.Minute)
	defInt(&c.DegradedCrashes, 10)
	def(&c.DegradedWindow, 10*time.Minute)
	def(&c.PingInterval, 10*time.Second)
	def(&c.PingTimeout, 10*time.Second)
	defInt(&c.LogBytesPerWorker, 256<<10)
	defInt(&c.LogBytesTotal, 4<<20)
	if c.MaxFrame == 0 {
		c.MaxFrame = wire.DefaultMaxFrame
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Launcher == nil {
		c.Launcher = ExecLauncher{}
	}
	return c, nil
}
