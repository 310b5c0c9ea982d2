package cli

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"
	"github.com/rivo/uniseg"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/pipeline/job"
)

// TestMeterETA drives steady synthetic runs on a fake clock, as the
// pipeline writes: nothing for the first batches, then a batch written
// every second (or every 6 s, as a 1,000-document SciFact run with
// all-MiniLM-L6-v2 on 2 busy cores did) of a size that varies ±50 %
// around the steady rate, sampled every 250 ms as the line is drawn. From
// 20 % of the run on, the ETA is within 2× of the time truly left, and it
// never jumps: one redraw moves it by at most a tenth of the time left
// (plus a second).
func TestMeterETA(t *testing.T) {
	for _, c := range []struct {
		every   time.Duration // between two batches written
		startup time.Duration // before the first
		batches int
	}{{time.Second, 3 * time.Second, 100}, {6 * time.Second, 8 * time.Second, 27}} {
		t.Run(c.every.String(), func(t *testing.T) {
			const total = 100_000_000
			rng := rand.New(rand.NewPCG(42, 42))
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			m := newMeter(t0, total, false)
			var written []int64 // after batch i
			for done := int64(0); done < total; {
				done = min(done+int64(total/float64(c.batches)*(0.5+rng.Float64())), total)
				written = append(written, done)
			}
			end := t0.Add(c.startup + time.Duration(len(written)-1)*c.every) // the last batch
			doneAt := func(now time.Time) int64 {
				if el := now.Sub(t0); el >= c.startup {
					return written[min(int((el-c.startup)/c.every), len(written)-1)]
				}
				return 0
			}
			checked, prev := 0, time.Duration(-1)
			for tick := 1; ; tick++ {
				now := t0.Add(time.Duration(tick) * 250 * time.Millisecond)
				d := doneAt(now)
				m.add(now, d)
				if d >= total {
					break
				}
				eta, ok := m.eta()
				truth := end.Sub(now)
				if d < total/5 || truth < 2*c.every { // the last batch comes at once
					continue
				}
				if !ok || eta < truth/2 || eta > truth*2 {
					t.Fatalf("at %v (%d%% done): ETA %v (known %v); want within 2× of %v", now.Sub(t0), 100*d/total, eta, ok, truth)
				}
				if prev >= 0 && (eta-prev).Abs() > truth/10+time.Second {
					t.Errorf("at %v: ETA jumped from %v to %v in one redraw (%v left)", now.Sub(t0), prev, eta, truth)
				}
				prev = eta
				checked++
			}
			if want := int(end.Sub(t0) / time.Second * 2); checked < want {
				t.Errorf("ETA checked at %d redraws; want over %d (most of the last 80 %% of the run)", checked, want)
			}
		})
	}
}

// TestMeterResumed: after --resume, the position the interrupted run
// reached arrives at once; it is the base of the rate, not a rate.
func TestMeterResumed(t *testing.T) {
	t0 := time.Unix(0, 0)
	m := newMeter(t0, 0, true)
	m.add(t0.Add(time.Second), 0)
	m.add(t0.Add(2*time.Second), 50_000) // the resumed position
	for s := 3; s <= 10; s++ {
		m.add(t0.Add(time.Duration(s)*time.Second), 50_000+int64(s-2)*1000)
	}
	if r := m.rate(); r < 900 || r > 1100 {
		t.Errorf("rate %.0f/s after a resume at 50000 and 1000/s since; want 1000/s", r)
	}
}

// TestRenderLineWidth: at every width the line is narrower than the
// terminal (never its last column); from 20 columns on it keeps a bar of
// 8 columns or more.
func TestRenderLineWidth(t *testing.T) {
	s := lineState{done: 3_100_000_000, total: 7_400_000_000, bytes: true, rate: 12_345_678, eta: 5*time.Hour + 7*time.Minute, etaOK: true,
		rows: 123_456_789, items: 987_654_321, itemsWord: "generations", tokens: 123_456, failed: 12_345, restarts: 3, elapsed: 2 * time.Hour}
	for width := 1; width <= 240; width++ {
		got := renderLine(s, width)
		if w := uniseg.StringWidth(got); w > width-1 || strings.ContainsAny(got, "\r\n") {
			t.Errorf("width %d: line of %d columns (or with a line break); want at most %d: %q", width, w, width-1, got)
		}
		if i, j := strings.Index(got, "["), strings.Index(got, "]"); width >= 20 && (i < 0 || j-i-1 < 8) {
			t.Errorf("width %d: bar of %d columns; want 8 or more: %q", width, j-i-1, got)
		}
	}
	if got := renderLine(s, 80); !strings.HasPrefix(got, " 41% [######") || !strings.Contains(got, "ETA 5h07m") {
		t.Errorf("80 columns: %q; want 41 %%, a bar filled to 41 %% and the ETA first", got)
	}
	s.total, s.etaOK = -1, false // stdin
	if got := renderLine(s, 80); !strings.HasPrefix(got, "3.1 GB 12.3 MB/s  12345 failed  3 restarts") {
		t.Errorf("no total: %q; want the bytes written and the rate first", got)
	}
}

// ptyOut collects what a pseudo-terminal's master side reads.
type ptyOut struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	read chan struct{}
}

func (o *ptyOut) copy(r io.Reader) {
	b := make([]byte, 4096)
	for {
		n, err := r.Read(b)
		o.mu.Lock()
		o.buf.Write(b[:n])
		o.mu.Unlock()
		select {
		case o.read <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

func (o *ptyOut) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitCount waits until s occurs n times after offset from, failing after
// ten seconds.
func (o *ptyOut) waitCount(t *testing.T, from int, s string, n int) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for strings.Count(o.String()[from:], s) < n {
		select {
		case <-o.read:
		case <-deadline.C:
			t.Fatalf("%d × %q not drawn within ten seconds:\n%q", n, s, o.String()[from:])
		}
	}
}

// screen follows out as a terminal of cols columns would: the most
// columns a line reached and the line breaks. A line reaching the last
// column would wrap (or scroll) at its next character.
func screen(t *testing.T, out string, cols int) (widest, breaks int) {
	t.Helper()
	col := 0
	for i := 0; i < len(out); {
		switch c := out[i]; {
		case c == '\r':
			col, i = 0, i+1
		case c == '\n':
			breaks, col, i = breaks+1, 0, i+1
		case c == 0x1b: // CSI: ESC [ parameters final
			j := i + 2
			for j < len(out) && (out[j] < 0x40 || out[j] > 0x7e) {
				j++
			}
			if i+1 >= len(out) || out[i+1] != '[' || j == len(out) || out[j] != 'K' {
				t.Fatalf("escape sequence other than erase-line at %d: %q", i, out[i:min(j+1, len(out))])
			}
			i = j + 1
		default:
			r, n := utf8.DecodeRuneInString(out[i:])
			col += uniseg.StringWidth(string(r))
			widest, i = max(widest, col), i+n
		}
	}
	return widest, breaks
}

// TestProgressLinePTY draws the progress line in a real pseudo-terminal of
// 80 columns, then resizes it to 60: each redraw stays on one line narrower
// than the terminal (no wrap, no scroll: the only line breaks are the
// header's and a warning's, which clears the line first), the bar has
// width, and the line is cleared at the end.
func TestProgressLinePTY(t *testing.T) {
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer master.Close()
	if err := pty.Setsize(master, &pty.Winsize{Rows: 24, Cols: 80}); err != nil {
		t.Fatalf("set the pseudo-terminal's size: %v", err)
	}
	out := &ptyOut{read: make(chan struct{}, 1)}
	copied := make(chan struct{})
	go func() { out.copy(master); close(copied) }()

	st := &pipeline.Stats{}
	st.Read.Store(123_456)
	st.Items.Store(7_654_321)
	st.Tokens.Store(98_765_432)
	st.DoneBytes.Store(3_000_000_000)
	p := newProgress(slave, st, words{verb: "embedding", items: "chunks"}, false)
	if p.tty == nil {
		t.Fatal("a pseudo-terminal's slave side is not taken for a terminal")
	}
	p.redraw = 5 * time.Millisecond
	p.start(job.Info{Kind: "embed", Model: &artifact.Artifact{Name: "m"}, Workers: 2, Threads: 1, Settings: "max 256 tokens",
		Estimate: corpus.Estimate{JSONLBytes: 10_000_000_000}})
	out.waitCount(t, 0, "\x1b[K", 5)
	if err := pty.Setsize(master, &pty.Winsize{Rows: 24, Cols: 60}); err != nil {
		t.Fatalf("resize the pseudo-terminal: %v", err)
	}
	resized := len(out.String())
	out.waitCount(t, resized, "\x1b[K", 2) // the redraw in flight at the resize, then one at 60
	// From the second redraw after the resize on, the terminal is 60 wide.
	from := resized + strings.Index(out.String()[resized:], "\x1b[K") + len("\x1b[K")
	st.DoneBytes.Store(6_000_000_000)
	out.waitCount(t, from, "\x1b[K", 5)
	// A warning in the job's log clears the line and takes a line of its
	// own; the line is drawn again below it.
	log := p.logThrough(newJobLog(slave, "text"))
	log.note(slog.LevelWarn, "worker 1 crashed")
	out.waitCount(t, from, "synapse: worker 1 crashed", 1)
	warned := strings.Index(out.String(), "synapse: worker 1 crashed")
	out.waitCount(t, warned, "\x1b[K", 2)
	p.stop()
	fmt.Fprint(slave, "END")
	out.waitCount(t, from, "END", 1)
	slave.Close()
	master.Close()
	<-copied

	all := out.String()
	header, at80 := all[:strings.Index(all, "\n")+1], all[:from]
	if header != "embedding with m on 2 workers × 1 thread, max 256 tokens\r\n" {
		t.Errorf("header %q; want one line", header)
	}
	if !strings.Contains(all, "\x1b[K\r\x1b[Ksynapse: worker 1 crashed\r\n\r ") {
		t.Errorf("the warning does not clear the line, or the line is not drawn again after it:\n%q", all[from:])
	}
	for _, c := range []struct {
		out    string
		cols   int
		breaks int
	}{{at80[len(header):], 80, 0}, {all[from:], 60, 1}} { // the warning's line break
		widest, breaks := screen(t, c.out, c.cols)
		if widest > c.cols-1 || breaks != c.breaks {
			t.Errorf("%d columns: a redraw reached column %d and %d line breaks; want at most %d and %d:\n%q", c.cols, widest, breaks, c.cols-1, c.breaks, c.out)
		}
		if !regexp.MustCompile(`\[#+-*\]`).MatchString(c.out) || !regexp.MustCompile(`\[[#-]{8,}\]`).MatchString(c.out) || !strings.Contains(c.out, "ETA ") {
			t.Errorf("%d columns: no bar with width or no ETA:\n%q", c.cols, c.out)
		}
	}
	if !strings.HasSuffix(all, "\r\x1b[KEND") {
		t.Errorf("the line is not cleared at the end: %q", all[max(len(all)-100, 0):])
	}
	if !strings.Contains(all[from:], " 60% [") {
		t.Errorf("no 60 %% drawn after the work done reached 6 of 10 GB:\n%q", all[from:])
	}
}

// TestMeterStall: work that stops is not hidden by the hold between
// bursts: after meterHold the pause counts, and the rate falls.
func TestMeterStall(t *testing.T) {
	t0 := time.Unix(0, 0)
	m := newMeter(t0, 0, false)
	for s := 1; s <= 30; s++ {
		m.add(t0.Add(time.Duration(s)*time.Second), int64(s)*1000)
	}
	steady := m.rate()
	for s := 31; s <= 60; s++ {
		m.add(t0.Add(time.Duration(s)*time.Second), 30_000)
	}
	if r := m.rate(); steady < 900 || r > steady/2 {
		t.Errorf("rate %.0f/s after 30 s at 1000/s, %.0f/s after 30 s more with no work; want about 1000, then under half", steady, r)
	}
}
