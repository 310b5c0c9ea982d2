package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/synapse-embed/synapse/io/output"
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
			if k.name == "generate" && mostTwice != 0 {
				// One prompt a request, sent in input order: the drain lets
				// every request in flight finish, so no answer is dropped,
				// and a resume sends no replayed prompt.
				t.Errorf("generate: %d items done twice; want none", mostTwice)
			}
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

// TestDrainStopsInFlight: requests that take seconds are not waited for
// past the drain: a second SIGTERM stops the run at once and says that
// nothing is kept beyond the last checkpoint; a --drain that runs out
// abandons them and keeps what was finished. Either way --resume from
// what was kept gives the uninterrupted run's bytes.
func TestDrainStopsInFlight(t *testing.T) {
	k := drainKinds(t)[0]
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.arrow")
	runSynapse(t, nil, append(k.args(ref), drainFlags...)...).wantCode(t, exitOK)
	want, _ := os.ReadFile(ref)
	for _, tc := range []struct {
		name, drain string
		second      bool
		note        string
	}{
		{"second signal", "1m", true, "stopped at once by a second signal: nothing kept beyond the last checkpoint"},
		{"drain runs out", "300ms", false, "the rest abandoned after --drain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".arrow")
			slow := append(k.args(out), "--workers", "2", "--threads", "1", "--log-format", "json", "--chaos", "delay=3s",
				"--drain", tc.drain, "--progress-every", "100ms")
			j := startJob(t, slow)
			j.waitFor(t, "started")
			j.waitFor(t, "progress") // its first requests are in flight for seconds
			j.cmd.Process.Signal(syscall.SIGTERM)
			j.waitFor(t, "interrupted: sending no new requests")
			if tc.second {
				j.cmd.Process.Signal(syscall.SIGTERM)
			}
			code, _ := j.wait(t)
			log := j.stderr.String()
			if code != exitInterrupted || !strings.Contains(log, tc.note) {
				t.Fatalf("exit %d; want %d and the note %q\n%s", code, exitInterrupted, tc.note, log)
			}
			if tc.second && strings.Contains(log, "requests in flight finished") {
				t.Errorf("the run waited for its requests in flight after the second signal:\n%s", log)
			}
			runSynapse(t, nil, append(k.args(out), append(drainFlags, "--resume")...)...).wantCode(t, exitOK)
			if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, want) {
				t.Errorf("resumed: %d bytes (%v); want the uninterrupted run's %d", len(got), err, len(want))
			}
		})
	}
}

// TestSearchInterrupt: search is one pass, read-only, with nothing to
// resume: SIGTERM stops it promptly (a minute is the hang guard) with exit
// 130, and no run file, partial or temporary, is left behind.
func TestSearchInterrupt(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "one.arrow")
	writeJSONL(t, filepath.Join(dir, "one.jsonl"), []map[string]any{{"id": "a", "text": "hello world"}})
	runSynapse(t, nil, "embed", filepath.Join(dir, "one.jsonl"), "-m", tinyModel(t), "-o", small, "-q").wantCode(t, exitOK)
	sc, err := output.FileSchema(context.Background(), small)
	if err != nil {
		t.Fatal(err)
	}
	dims, _ := strconv.Atoi(mustMeta(t, sc, "synapse.dims"))
	queries, corpus := filepath.Join(dir, "q.arrow"), filepath.Join(dir, "c.arrow")
	writeVectors(t, queries, sc, dims, 4000, 1)
	writeVectors(t, corpus, sc, dims, 40000, 2) // 1.6·10⁸ similarities: seconds of work
	run := filepath.Join(dir, "run.trec")
	cmd := synapseCmd(context.Background(), t, nil, "search", "--queries", queries, "--corpus", corpus, "-o", run, "--threads", "1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-time.After(300 * time.Millisecond): // a moment into the search, not an event waited for
	case <-exited:
		t.Fatalf("search ended before the signal; give it more work:\n%s", stderr.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("search still running a minute after SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Errorf("search after SIGTERM: exit %d; want %d\n%s", code, exitInterrupted, stderr.String())
	}
	left, _ := filepath.Glob(run + "*")
	if len(left) != 0 {
		t.Errorf("search after SIGTERM left %v; want no run file", left)
	}
}

func mustMeta(t *testing.T, sc *arrow.Schema, key string) string {
	t.Helper()
	v, ok := sc.Metadata().GetValue(key)
	if !ok {
		t.Fatalf("no %s in the embed output's metadata", key)
	}
	return v
}

// writeVectors writes an embed output of n random unit vectors with the
// schema (and so the settings) of sc.
func writeVectors(t *testing.T, path string, sc *arrow.Schema, dims, n int, seed uint64) {
	t.Helper()
	w, err := output.Create(path, output.WriterOptions{Schema: sc})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range n {
		v := make([]float32, dims)
		var s float64
		for k := range v {
			v[k] = float32(rng.NormFloat64())
			s += float64(v[k]) * float64(v[k])
		}
		for k := range v {
			v[k] /= float32(math.Sqrt(s))
		}
		id := fmt.Sprint("v", i)
		rows := output.EmbedRows{{ID: id, NTokens: 3, TokenEnd: 3, Embedding: v}}
		if err := w.Put(int64(i), int64(i), rows, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestCalibrationSaysOnce: int8 and uint8 calibrated on the input embed
// its first documents first, once; the start line and the summary say so,
// with the cost (not only the README).
func TestCalibrationSaysOnce(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "corpus.jsonl")
	writeJSONL(t, in, testCorpus(20))
	for _, d := range []string{"int8", "uint8"} {
		res := runSynapse(t, nil, "embed", in, "-m", tinyModel(t), "-o", filepath.Join(dir, d+".arrow"), "--workers", "1",
			"--dtype", d, "--calibration-docs", "10")
		res.wantCode(t, exitOK)
		once := regexp.MustCompile(`first 10 documents of the input, embedded first with the rest of their packing group \(\d+ tokens, [0-9.]+s\), their answers written once the ranges were fixed, not asked again`)
		if !once.MatchString(res.stderr) || !once.MatchString(res.stdout) || !regexp.MustCompile(`\((\d+) of the (\d+) chunks it embedded written from them\)`).MatchString(res.stdout) {
			t.Errorf("%s: the start line and the summary do not say the calibration documents are embedded once, with the cost:\n%s\n%s", d, res.stderr, res.stdout)
		}
	}
}
