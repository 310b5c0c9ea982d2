package cli

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rivo/uniseg"
)

// etaTau is the shortest time constant of the rate's moving average: a
// sample weighs e times less after it. It is longer when the work is
// written in sparser bursts (8 gaps between them), so that the rate
// averages several bursts and one bigger or smaller batch moves the ETA a
// little.
const etaTau = 15 * time.Second

// meterHold is how long the work done may stand still before the meter
// counts the pause, or twice the usual gap between bursts when that is
// longer: the pipeline writes in bursts (a batch's records at once), and a
// sample between two bursts is not a fall of the rate, a stall is.
const meterHold = 5 * time.Second

// etaSlew is the time constant with which the ETA shown moves to a new
// estimate: between bursts it counts down, and the change a burst brings
// is spread over a few seconds of redraws instead of one.
const etaSlew = 5 * time.Second

// meter turns samples of the work done (input bytes or rows written) into
// a smoothed rate and an ETA. The rate is an exponential moving average over
// time, bias-corrected (Adam's trick): while the run is younger than the
// time constant it is the plain average since the start, later the recent
// rate. A sample with no new work is held (see meterHold) and folded in
// with the next burst, so a burst every few seconds reads as a steady rate,
// not as 0 and then a spike.
type meter struct {
	total  int64     // the work in all; <= 0: unknown, no ETA
	at     time.Time // the last sample folded into the rate
	now    time.Time // the last sample
	done   int64     // work done at the last folded sample
	ema    float64   // the moving average of the rate, before its correction
	weight float64   // the sum of the samples' weights: the correction
	burst  time.Time // the last sample with new work (zero before the first)
	gap    float64   // seconds between bursts, a moving average (0: unknown)
	shown  float64   // the ETA shown, in seconds; < 0: none yet
	// rebase: the first sample with work done is the base, not a rate
	// (after --resume, the resumed position arrives at once).
	rebase bool
}

func newMeter(now time.Time, total int64, rebase bool) *meter {
	return &meter{total: total, at: now, now: now, shown: -1, rebase: rebase}
}

// add records that done units are done at now.
func (m *meter) add(now time.Time, done int64) {
	dt := now.Sub(m.at).Seconds()
	if dt <= 0 {
		return
	}
	defer m.settle(now)
	switch {
	case m.rebase && done > m.done:
		m.at, m.done, m.burst, m.rebase = now, done, now, false
		return
	case done == m.done && dt < max(meterHold.Seconds(), 2*m.gap):
		return // between bursts
	case done != m.done:
		if !m.burst.IsZero() {
			g := now.Sub(m.burst).Seconds()
			if m.gap == 0 {
				m.gap = g
			} else {
				m.gap = 0.7*m.gap + 0.3*g
			}
		}
		m.burst = now
	}
	decay := math.Exp(-dt / max(etaTau.Seconds(), 8*m.gap))
	m.ema = decay*m.ema + (1-decay)*float64(done-m.done)/dt
	m.weight = decay*m.weight + (1 - decay)
	m.at, m.done = now, done
}

// settle moves the ETA shown toward the estimate at now: the time left at
// the smoothed rate, less the time since the last burst (whose successor
// is being worked on), at most the usual gap between bursts.
func (m *meter) settle(now time.Time) {
	dt := now.Sub(m.now).Seconds()
	m.now = now
	r := m.rate()
	if m.total <= 0 || r <= 0 {
		return
	}
	since := now.Sub(m.at).Seconds()
	if m.gap > 0 {
		since = min(since, m.gap) // a late burst does not run the ETA down to 0
	}
	target := max(float64(m.total-m.done)/r-since, 0)
	if m.shown < 0 {
		m.shown = target
		return
	}
	m.shown = max(m.shown-dt, 0) // the clock ran
	m.shown += (target - m.shown) * (1 - math.Exp(-dt/etaSlew.Seconds()))
}

// rate is the smoothed work per second; 0 before any work is timed.
func (m *meter) rate() float64 {
	if m.weight == 0 {
		return 0
	}
	return m.ema / m.weight
}

// eta is the time left; ok is false while it is unknown (no total, no
// rate yet).
func (m *meter) eta() (time.Duration, bool) {
	if m.shown < 0 {
		return 0, false
	}
	return time.Duration(min(m.shown, 1e6) * float64(time.Second)), true
}

// lineState is what one progress line shows.
type lineState struct {
	done, total int64 // input bytes or rows written; total <= 0: unknown
	bytes       bool  // done and total are bytes
	rate        float64
	eta         time.Duration
	etaOK       bool
	rows, items int64
	itemsWord   string
	tokens      float64 // per second
	failed      int64
	restarts    int
	elapsed     time.Duration
}

// renderLine draws s in fewer than width columns: the share done, a bar,
// then the details, most useful first, as many as fit. The last column is
// never written (a terminal would wrap there).
func renderLine(s lineState, width int) string {
	cols := width - 1
	var head string
	if s.total > 0 {
		frac := min(max(float64(s.done)/float64(s.total), 0), 1)
		bar := min(max(cols/4, 8), 30)
		fill := int(frac * float64(bar))
		head = fmt.Sprintf("%3d%% [%s%s] ", int(frac*100), strings.Repeat("#", fill), strings.Repeat("-", bar-fill))
	}
	parts := []string{}
	if s.etaOK {
		parts = append(parts, "ETA "+fmtDuration(s.eta))
	} else if s.total > 0 {
		parts = append(parts, "ETA ?")
	}
	parts = append(parts, doneOf(s))
	if s.failed > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", s.failed))
	}
	if s.restarts > 0 {
		parts = append(parts, plural(s.restarts, "restart"))
	}
	if s.bytes { // with rows, doneOf has them
		parts = append(parts, fmt.Sprintf("%d rows", s.rows))
	}
	parts = append(parts, fmt.Sprintf("%d %s", s.items, s.itemsWord), fmt.Sprintf("%.0f tok/s", s.tokens),
		fmtDuration(s.elapsed)+" elapsed")
	// Whole parts only: a number cut short would read as another number.
	line := head
	for i, part := range parts {
		if i > 0 {
			part = "  " + part
		}
		if uniseg.StringWidth(line+part) > cols {
			if uniseg.StringWidth(line+" …") <= cols {
				line += " …"
			}
			break
		}
		line += part
	}
	return truncate(line, cols) // a terminal narrower than the bar
}

// doneOf is the work done and its rate: "3.1 GB/7.4 GB 12.3 MB/s" (input
// bytes written) or "1200/5000 rows 950 rows/s" (input rows written).
func doneOf(s lineState) string {
	if s.bytes {
		d := fmtCount(float64(s.done), true)
		if s.total > 0 {
			d += "/" + fmtCount(float64(s.total), true)
		}
		return d + " " + fmtCount(s.rate, true) + "/s"
	}
	d := fmt.Sprint(s.done)
	if s.total > 0 {
		d += fmt.Sprintf("/%d", s.total)
	}
	return d + " rows " + fmtCount(s.rate, false) + " rows/s"
}

// fmtCount is n with an SI prefix: "950", "12.3k", "4.5 MB" with bytes.
func fmtCount(n float64, bytes bool) string {
	suffix := ""
	if bytes {
		suffix = "B"
	}
	for _, p := range []string{"", "k", "M", "G", "T"} {
		if math.Abs(n) < 999.5 || p == "T" {
			switch {
			case p == "" && bytes:
				return fmt.Sprintf("%.0f B", n)
			case p == "":
				return fmt.Sprintf("%.0f", n)
			case bytes:
				return fmt.Sprintf("%.1f %s%s", n, p, suffix)
			}
			return fmt.Sprintf("%.1f%s", n, p)
		}
		n /= 1000
	}
	return "" // not reached: "T" returns
}

// fmtDuration is "45s", "12m05s", "3h07m".
func fmtDuration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm", s/3600, s/60%60)
}

// truncate cuts s to at most cols display columns, ending in "…" when cut.
func truncate(s string, cols int) string {
	if cols <= 0 {
		return ""
	}
	if uniseg.StringWidth(s) <= cols {
		return s
	}
	var b strings.Builder
	w := 0
	g := uniseg.NewGraphemes(s)
	for g.Next() {
		if w+g.Width() > cols-1 {
			break
		}
		w += g.Width()
		b.WriteString(g.Str())
	}
	return b.String() + "…"
}
