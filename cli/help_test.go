package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/artifact"

	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/pipeline/job"
)

// TestHelpSaysEachDefaultOnce: no flag's help line names its default twice
// (a "(default: …)" in the usage string and another from the flag's value).
func TestHelpSaysEachDefaultOnce(t *testing.T) {
	names := []string{""}
	for _, c := range commands() {
		names = append(names, c.Name)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			args := []string{"synapse", "--help"}
			if name != "" {
				args = []string{"synapse", name, "--help"}
			}
			var out, errOut bytes.Buffer
			if code := Run(context.Background(), args, &out, &errOut); code != exitOK {
				t.Fatalf("%q: exit %d; want 0\n%s", args, code, errOut.String())
			}
			for _, line := range strings.Split(out.String(), "\n") {
				if n := strings.Count(line, "(default:"); n > 1 {
					t.Errorf("help line %q: %d defaults; want at most 1", strings.TrimSpace(line), n)
				}
			}
		})
	}
}

// TestProgressStartLine: the line that starts a run counts workers and
// threads in words that agree with the numbers.
func TestProgressStartLine(t *testing.T) {
	tests := []struct {
		workers, threads int
		want             string
	}{
		{1, 1, "embedding with m on 1 worker × 1 thread,"},
		{2, 1, "embedding with m on 2 workers × 1 thread,"},
		{1, 4, "embedding with m on 1 worker × 4 threads,"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		p := newProgress(&out, &pipeline.Stats{}, words{verb: "embedding"}, false)
		p.start(job.Info{Model: &artifact.Artifact{Name: "m"}, Workers: tt.workers, Threads: tt.threads})
		p.stop()
		if got := out.String(); !strings.HasPrefix(got, tt.want) {
			t.Errorf("workers %d, threads %d: got %q; want it to start with %q", tt.workers, tt.threads, got, tt.want)
		}
	}
}
