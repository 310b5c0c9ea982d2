package supervise

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLogRingCaps(t *testing.T) {
	r := NewLogRing(100, 150)
	now := time.Unix(0, 0)
	for i := range 20 {
		r.Add("a", "stderr", strings.Repeat("a", 10), now)
		if i%2 == 0 {
			r.Add("b", "stdout", strings.Repeat("b", 10), now)
		}
	}
	tests := []struct {
		worker     string
		max, total int
	}{
		{"a", 100, 150},
		{"b", 100, 150},
	}
	for _, tt := range tests {
		got, total := r.Size(tt.worker)
		if got > tt.max || total > tt.total {
			t.Errorf("worker %s: got %d bytes, total %d; want ≤ %d, ≤ %d", tt.worker, got, total, tt.max, tt.total)
		}
	}
	if a, _ := r.Size("a"); a != 100 {
		t.Errorf("worker a: got %d bytes; want its full 100 (b's older lines evicted first)", a)
	}
	lines := r.Lines("a")
	for i := 1; i < len(lines); i++ {
		if lines[i].Seq <= lines[i-1].Seq {
			t.Fatalf("lines out of order: %v", lines)
		}
	}
}

func TestLogRingTail(t *testing.T) {
	r := NewLogRing(1<<10, 1<<10)
	now := time.Unix(0, 0)
	r.Add("w", "stdout", "one", now)
	r.Add("w", "stderr", "two", now)
	tests := []struct {
		max  int
		want string
	}{
		{100, "stdout: one\nstderr: two\n"},
		{12, "stderr: two\n"},
		{5, " two\n"}, // the oldest kept line is cut at its start
		{0, ""},
	}
	for _, tt := range tests {
		if got := r.Tail("w", tt.max); got != tt.want {
			t.Errorf("Tail(%d): got %q; want %q", tt.max, got, tt.want)
		}
	}
	if got := r.Tail("nobody", 100); got != "" {
		t.Errorf("Tail of unknown worker: got %q; want empty", got)
	}
}

func TestDrainSplitsLines(t *testing.T) {
	long := strings.Repeat("x", maxLogLine+10)
	input := "first\n" + long + "\nlast without newline"
	r := NewLogRing(1<<20, 1<<20)
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < len(input); i += 7 { // odd chunk sizes
			pw.Write([]byte(input[i:min(i+7, len(input))]))
		}
		pw.Close()
	}()
	drain(pr, r, "w", "stderr", slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	var got []string
	for _, l := range r.Lines("w") {
		got = append(got, l.Text)
	}
	want := []string{"first", long[:maxLogLine], long[maxLogLine:], "last without newline"}
	if len(got) != len(want) {
		t.Fatalf("lines: got %d %q; want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %q; want %q", i, got[i], want[i])
		}
	}
}

func TestLogRingCrashTail(t *testing.T) {
	now := time.Unix(0, 0)
	dump := func(r *LogRing, header string, n int) {
		r.Add("w", "stderr", header, now)
		for i := range n {
			r.Add("w", "stderr", "runtime frame "+strings.Repeat("x", 60)+" "+string(rune('a'+i%26)), now)
			if i%50 == 49 {
				r.Add("w", "stderr", "SIGQUIT: quit", now) // another thread's dump
			}
		}
	}
	tests := []struct {
		name     string
		fill     func(r *LogRing)
		contains []string
		absent   []string
	}{
		{"abort dump keeps the cause", func(r *LogRing) {
			r.Add("w", "stderr", "chaos: abort-on-token fired", now)
			dump(r, "SIGABRT: abort", 500)
		}, []string{"stderr: chaos: abort-on-token fired\n", "stderr: SIGABRT: abort\n", "lines of the Go runtime dump left out]"}, nil},
		{"short dump kept whole", func(r *LogRing) {
			r.Add("w", "stderr", "cause", now)
			dump(r, "fatal error: unexpected signal", 5)
		}, []string{"stderr: cause\n", "fatal error: unexpected signal"}, []string{"left out"}},
		{"no dump: plain tail", func(r *LogRing) {
			for range 500 {
				r.Add("w", "stdout", "ordinary line "+strings.Repeat("y", 60), now)
			}
		}, []string{"ordinary line"}, []string{"left out"}},
		{"latest dump counts", func(r *LogRing) {
			dump(r, "SIGSEGV: segmentation violation", 500)
			r.Add("w", "stderr", "second cause", now)
			dump(r, "SIGABRT: abort", 500)
		}, []string{"second cause", "SIGABRT: abort"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewLogRing(256<<10, 1<<20)
			tt.fill(r)
			got := r.CrashTail("w", 8<<10)
			if len(got) > 8<<10 {
				t.Errorf("got %d bytes; want ≤ %d", len(got), 8<<10)
			}
			for _, s := range tt.contains {
				if !strings.Contains(got, s) {
					t.Errorf("got %q; want it to contain %q", got, s)
				}
			}
			for _, s := range tt.absent {
				if strings.Contains(got, s) {
					t.Errorf("got %q; want no %q", got, s)
				}
			}
		})
	}
}
