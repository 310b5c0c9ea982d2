package supervise

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
)

// maxLogLine caps one ring entry; longer output without a newline is split.
const maxLogLine = 4 << 10

// LogLine is one line of worker output.
type LogLine struct {
	Seq      uint64 // global order across workers
	Time     time.Time
	WorkerID string
	Stream   string // "stdout" or "stderr"
	Text     string // without the trailing newline
}

// LogRing keeps the most recent worker output, tagged by worker and stream,
// within a byte budget per worker and in total. Appending never blocks on
// anything but its own mutex.
type LogRing struct {
	perWorker, total int

	mu      sync.Mutex
	seq     uint64
	size    int
	workers map[string]*lineQueue
}

// lineQueue is one worker's lines, oldest first.
type lineQueue struct {
	lines []LogLine
	head  int
	size  int
}

func (q *lineQueue) len() int { return len(q.lines) - q.head }

func (q *lineQueue) push(l LogLine) {
	q.lines = append(q.lines, l)
	q.size += len(l.Text)
}

func (q *lineQueue) pop() int {
	n := len(q.lines[q.head].Text)
	q.lines[q.head] = LogLine{}
	q.head++
	q.size -= n
	if q.head > 64 && q.head*2 > len(q.lines) { // compact
		q.lines = append(q.lines[:0], q.lines[q.head:]...)
		q.head = 0
	}
	return n
}

// NewLogRing returns a ring that keeps at most perWorker bytes of text per
// worker and total bytes over all workers.
func NewLogRing(perWorker, total int) *LogRing {
	return &LogRing{perWorker: perWorker, total: total, workers: make(map[string]*lineQueue)}
}

// Add appends one line, evicting the worker's oldest lines beyond its budget
// and then the oldest lines of any worker beyond the total.
func (r *LogRing) Add(workerID, stream, text string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.workers[workerID]
	if q == nil {
		q = &lineQueue{}
		r.workers[workerID] = q
	}
	r.seq++
	q.push(LogLine{Seq: r.seq, Time: now, WorkerID: workerID, Stream: stream, Text: text})
	r.size += len(text)
	for q.size > r.perWorker && q.len() > 0 {
		r.size -= q.pop()
	}
	for r.size > r.total {
		var oldest *lineQueue
		for _, w := range r.workers {
			if w.len() > 0 && (oldest == nil || w.lines[w.head].Seq < oldest.lines[oldest.head].Seq) {
				oldest = w
			}
		}
		if oldest == nil {
			break
		}
		r.size -= oldest.pop()
	}
}

// Size returns the bytes of text held for workerID, and in total.
func (r *LogRing) Size(workerID string) (worker, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q := r.workers[workerID]; q != nil {
		worker = q.size
	}
	return worker, r.size
}

// Lines returns workerID's lines, oldest first.
func (r *LogRing) Lines(workerID string) []LogLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.workers[workerID]
	if q == nil {
		return nil
	}
	return append([]LogLine(nil), q.lines[q.head:]...)
}

// Tail renders the most recent lines of workerID as "stream: text" lines,
// at most max bytes; the oldest line kept may be cut at its start.
func (r *LogRing) Tail(workerID string, max int) string {
	return tailOf(r.Lines(workerID), max)
}

// crashDumpLines is how much of a Go runtime crash dump CrashTail keeps.
const crashDumpLines = 40

// goDumpStart matches the first line of a Go runtime crash dump.
var goDumpStart = regexp.MustCompile(`^(SIG[A-Z]+: |fatal error: |panic: )`)

// CrashTail is Tail for a crash report. A worker that dies by a signal
// prints a Go runtime dump (every goroutine and, under GOTRACEBACK=crash,
// every thread's registers: tens of KiB) that would push the lines before
// it, usually the cause, out of max; CrashTail keeps the dump's first
// crashDumpLines lines and notes how many it left out.
func (r *LogRing) CrashTail(workerID string, max int) string {
	lines := r.Lines(workerID)
	start := -1
	for i := len(lines) - 1; i >= 0; i-- {
		// Under GOTRACEBACK=crash the other threads report "SIGQUIT: quit".
		if t := lines[i].Text; goDumpStart.MatchString(t) && !strings.HasPrefix(t, "SIGQUIT: ") {
			start = i
			break
		}
	}
	if start < 0 || len(lines)-start <= crashDumpLines+1 {
		return tailOf(lines, max)
	}
	end := start + crashDumpLines
	note := LogLine{Stream: lines[end].Stream, Text: fmt.Sprintf("[%d more lines of the Go runtime dump left out]", len(lines)-end)}
	return tailOf(append(lines[:end:end], note), max)
}

// tailOf renders the last lines, at most max bytes.
func tailOf(lines []LogLine, max int) string {
	if max <= 0 {
		return ""
	}
	var parts []string
	n := 0
	for i := len(lines) - 1; i >= 0 && n < max; i-- {
		l := lines[i]
		s := l.Stream + ": " + l.Text + "\n"
		if n+len(s) > max {
			s = s[len(s)-(max-n):]
		}
		parts = append(parts, s)
		n += len(s)
	}
	var b strings.Builder
	b.Grow(n)
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteString(parts[i])
	}
	return b.String()
}

// drain reads rc until EOF or error, splitting it into lines for the ring
// and the logger. It always keeps reading, so a flooding worker never blocks
// on a full pipe, and holds at most maxLogLine bytes of a partial line.
func drain(rc io.Reader, ring *LogRing, workerID, stream string, logger *slog.Logger, now func() time.Time) {
	buf := make([]byte, 32<<10)
	var partial []byte
	emit := func(b []byte) {
		text := string(b)
		ring.Add(workerID, stream, text, now())
		logger.Debug("worker output", "worker", workerID, "stream", stream, "text", text)
	}
	for {
		n, err := rc.Read(buf)
		data := buf[:n]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			seg := data
			if i >= 0 {
				seg = data[:i]
			}
			take := min(len(seg), maxLogLine-len(partial))
			partial = append(partial, seg[:take]...)
			data = data[take:]
			switch {
			case i >= 0 && take == len(seg):
				emit(partial)
				partial = partial[:0]
				data = data[1:] // the newline
			case len(partial) == maxLogLine:
				emit(partial) // a longer line continues in the next entry
				partial = partial[:0]
			}
		}
		if err != nil {
			if len(partial) > 0 {
				emit(partial)
			}
			return
		}
	}
}
