package job

import "time"

// Observer is told of a running job's events as they happen, for metrics
// (package status implements it for --status-addr). The counters and the
// workers' health are not events: an observer reads them from
// Options.Stats and Info.Health. Methods are called from several
// goroutines at once and must not block.
type Observer interface {
	// Request: one request to a worker took d and ended with err (nil: answered).
	Request(d time.Duration, err error)
	// ErrorRecord: one record with this reason went to the errors file.
	ErrorRecord(reason string)
}
