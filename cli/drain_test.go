package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/model/testmodels"
)

// The drain drills: SIGTERM at a random moment of a job, then --resume;
// the resumed output is the uninterrupted run's, byte for byte, and the
// work done twice is what the drain dropped after a gap plus what the
// resume replayed and sent. The moment is a seeded random delay after the
// job says it started (SYNAPSE_DRAIN_SEED repeats a run's seed).

// drainKind is a job command set up for the drills.
type drainKind struct {
	name string
	args func(out string) []string // the command without -o's value and the common flags
}

// drainKinds are embed, rerank and generate on generated models, with
// small requests slowed by the chaos delay so that a run has many of them.
func drainKinds(t *testing.T) []drainKind {
	dir := t.TempDir()
	docs := filepath.Join(dir, "docs.jsonl")
	var rows []map[string]any
	for _, d := range testmodels.Corpus(120) {
		rows = append(rows, d.Map())
	}
	writeJSONL(t, docs, rows)
	pairs := filepath.Join(dir, "pairs.jsonl")
	poisonRerank(t, pairs, 30, 4, -1, -1)
	prompt := filepath.Join(dir, "prompts.jsonl")
	prompts(t, prompt, 80)
	embedder, reranker, llama := tinyModel(t), testmodels.Reranker(t), testmodels.Llama(t)
	return []drainKind{
		{"embed", func(out string) []string {
			return []string{"embed", docs, "-m", embedder, "-o", out, "--text-field", "title", "--text-field", "text", "--batch-tokens", "160"}
		}},
		{"rerank", func(out string) []string {
			return []string{"rerank", pairs, "-m", reranker, "-o", out, "--batch-tokens", "256"}
		}},
		{"generate", func(out string) []string {
			return []string{"generate", prompt, "-m", llama, "-o", out, "--max-tokens", "4"}
		}},
	}
}

// drainFlags are every drill run's: two workers, JSON logs, a checkpoint
// by time every few requests (so that open batches are cut and joined).
var drainFlags = []string{"--workers", "2", "--threads", "1", "--log-format", "json", "--checkpoint-every", "30ms", "--chaos", "delay=8ms"}

// drainJob is a started synapse job whose JSON log records arrive on records.
type drainJob struct {
	cmd     *exec.Cmd
	records chan logRecord
	stderr  *strings.Builder // read only after exited is closed
	exited  chan struct{}
}

func startJob(t *testing.T, args []string) *drainJob {
	t.Helper()
	cmd := synapseCmd(context.Background(), t, nil, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = new(bytes.Buffer)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	j := &drainJob{cmd: cmd, records: make(chan logRecord, 1024), stderr: new(strings.Builder), exited: make(chan struct{})}
	go func() {
		defer close(j.exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			j.stderr.WriteString(sc.Text() + "\n")
			var r logRecord
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				select {
				case j.records <- r:
				default: // nobody waits for progress records
				}
			}
		}
		cmd.Wait()
	}()
	return j
}

// waitFor returns the first record with msg (a prefix), failing the test
// after a minute or when the job ends first.
func (j *drainJob) waitFor(t *testing.T, msg string) logRecord {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case r := <-j.records:
			if m, _ := r["msg"].(string); strings.HasPrefix(m, msg) {
				return r
			}
		case <-j.exited:
			t.Fatalf("the job ended before logging %q:\n%s", msg, j.stderr)
		case <-deadline:
			j.cmd.Process.Kill()
			<-j.exited
			t.Fatalf("no %q within a minute:\n%s", msg, j.stderr)
		}
	}
}

// wait waits for the job's end (a minute at most: a hang, not a speed
// check) and returns its exit code and summary record.
func (j *drainJob) wait(t *testing.T) (int, logRecord) {
	t.Helper()
	var sum logRecord
	deadline := time.After(time.Minute)
	for {
		select {
		case r := <-j.records:
			if r["msg"] == "summary" {
				sum = r
			}
			continue
		case <-j.exited:
		case <-deadline:
			j.cmd.Process.Kill()
			<-j.exited
			t.Fatalf("still running a minute on:\n%s", j.stderr)
		}
		break
	}
	for len(j.records) > 0 { // records the reader passed before it ended
		if r := <-j.records; r["msg"] == "summary" {
			sum = r
		}
	}
	return j.cmd.ProcessState.ExitCode(), sum
}

func drainSeed(t *testing.T) uint64 {
	if s := os.Getenv("SYNAPSE_DRAIN_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SYNAPSE_DRAIN_SEED=%q: %v", s, err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// TestDrainResume: SIGTERM at a random moment of 20 runs of each job kind
// (5 with -short) exits 130 saying what it kept; --resume then writes the
// uninterrupted run's bytes, and the items done twice are exactly those a
// drain dropped after a gap plus those the resume replayed and sent.
func TestDrainResume(t *testing.T) {
	runs := 20
	if testing.Short() {
		runs = 5
	}
	seed := drainSeed(t)
	t.Logf("seed %d (SYNAPSE_DRAIN_SEED=%d repeats it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 32))
	for _, k := range drainKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			dir := t.TempDir()
			ref := filepath.Join(dir, "ref.arrow")
			j := startJob(t, append(k.args(ref), drainFlags...))
			j.waitFor(t, "started")
			began := time.Now()
			code, refSum := j.wait(t)
			span := time.Since(began)
			if code != exitOK || refSum == nil {
				t.Fatalf("uninterrupted run: exit %d, summary %v; want 0 and a summary\n%s", code, refSum, j.stderr)
			}
			want, err := os.ReadFile(ref)
			if err != nil {
				t.Fatal(err)
			}
			var drained, finished, mostTwice int64
			for i := range runs {
				at := time.Duration(rng.Int64N(int64(span)))
				out := filepath.Join(dir, fmt.Sprintf("run%d.arrow", i))
				twice, ok := drainOnce(t, k, out, at, int64(refSum.num("request_items")))
				if !ok {
					finished++
				} else {
					drained++
					mostTwice = max(mostTwice, twice)
				}
				if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("run %d (SIGTERM %v after the start): the output is not the uninterrupted run's bytes (%d bytes, %v; want %d)",
						i, at, len(got), err, len(want))
				}
			}
			t.Logf("%d runs drained and resumed, %d finished before the signal; uninterrupted: %.0f requests, %.0f items in %v; at most %d items done twice",
				drained, finished, refSum["requests"], refSum["request_items"], span.Round(time.Millisecond), mostTwice)
			if drained < int64(runs)/2 {
				t.Errorf("only %d of %d runs were still running at the signal; the drill does not drill", drained, runs)
			}
		})
	}
}

// drainOnce runs k into out, sends SIGTERM at after its start and resumes
// it; refItems are the items an uninterrupted run sends. It returns the
// items done twice, and false when the run finished before the signal.
func drainOnce(t *testing.T, k drainKind, out string, at time.Duration, refItems int64) (int64, bool) {
	t.Helper()
	j := startJob(t, append(k.args(out), drainFlags...))
	j.waitFor(t, "started")
	select {
	case <-time.After(at):
	case <-j.exited:
	}
	j.cmd.Process.Signal(syscall.SIGTERM)
	code, sum := j.wait(t)
	if code == exitOK {
		return 0, false
	}
	log := j.stderr.String()
	if code != exitInterrupted || !strings.Contains(log, "interrupted: ") || !strings.Contains(log, "rows kept") || sum == nil {
		t.Fatalf("SIGTERM %v after the start: exit %d; want %d, a note of the rows kept and a summary\n%s", at, code, exitInterrupted, log)
	}
	r := startJob(t, append(k.args(out), append(drainFlags, "--resume")...))
	start := r.waitFor(t, "started")
	code, rsum := r.wait(t)
	if code != exitOK || rsum == nil {
		t.Fatalf("--resume: exit %d; want 0\n%s", code, r.stderr)
	}
	if int64(start.num("resumed_rows")) != int64(rsum.num("resumed_rows")) || !strings.Contains(r.stderr.String(), `"resumed":true`) {
		t.Errorf("--resume: start says %d rows kept, summary %d; want the same, and resumed", int64(start.num("resumed_rows")), int64(rsum.num("resumed_rows")))
	}
	twice := int64(sum.num("request_items")) + int64(rsum.num("request_items")) - refItems
	dropped, replayed := int64(sum.num("dropped_items")), int64(rsum.num("replayed_items_sent"))
	if twice != dropped+replayed {
		t.Errorf("SIGTERM %v after the start: %d items done twice; want the %d the drain dropped + the %d the resume replayed and sent",
			at, twice, dropped, replayed)
	}
	return twice, true
}
