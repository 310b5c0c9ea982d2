package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/testmodels"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// The Slurm examples run for real: examples/slurm/local-cluster.sh starts a
// private single-node cluster (slurmctld, slurmd and munged from Debian's
// slurm-wlm and munge packages, everything in a temporary folder), and the
// examples' own scripts submit the jobs. `make test-slurm` runs these tests.

// slurmTestEnv names the variable that turns the Slurm tests on.
const slurmTestEnv = "SYNAPSE_SLURM_TEST"

// slurmDeadline bounds every wait for the cluster or a job.
const slurmDeadline = 3 * time.Minute

// slurmCluster is a running private cluster.
type slurmCluster struct {
	dir    string // the cluster's config, state and logs
	script string // local-cluster.sh
	env    []string
}

// needSlurm skips the test unless SYNAPSE_SLURM_TEST=1; then it fails when
// Slurm, munge or root is missing.
func needSlurm(t *testing.T) {
	t.Helper()
	if os.Getenv(slurmTestEnv) != "1" {
		why := "Slurm is installed"
		if _, err := exec.LookPath("slurmctld"); err != nil {
			why = "Slurm is absent"
		}
		t.Skipf("Slurm test: %s, %s is not set: `make test-slurm` installs slurm-wlm and munge when missing and runs it", why, slurmTestEnv)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("%s=1: the private Slurm cluster needs root", slurmTestEnv)
	}
	for _, c := range []string{"slurmctld", "slurmd", "munged", "sbatch", "squeue", "scontrol", "scancel"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("%s=1: %s not found (apt-get install slurm-wlm munge): %v", slurmTestEnv, c, err)
		}
	}
}

// startSlurm starts a private cluster, stopped (and its folder removed) when
// the test ends, pass or fail; a failed test's log gets the daemons' logs.
// Clusters that an earlier test process left behind (killed before its
// cleanup ran) are stopped first.
func startSlurm(t *testing.T) *slurmCluster {
	t.Helper()
	script, err := filepath.Abs(repoPath("examples", "slurm", "local-cluster.sh"))
	if err != nil {
		t.Fatal(err)
	}
	stopStaleClusters(t, script)
	dir, err := os.MkdirTemp("", "synapse-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	c := &slurmCluster{dir: dir, script: script, env: append(os.Environ(), "SLURM_CONF="+filepath.Join(dir, "slurm.conf"))}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command(script, "logs", dir).CombinedOutput()
			t.Logf("Slurm daemon logs:\n%s", out)
		}
		if out, err := exec.Command(script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("local-cluster.sh stop: %v\n%s", err, out)
		}
		os.Remove(dir + ".owner")
	})
	// The owner file names this process, so that a later run can tell a
	// cluster left behind by a dead test process.
	if err := os.WriteFile(dir+".owner", []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(script, "start", dir).CombinedOutput(); err != nil {
		t.Fatalf("local-cluster.sh start: %v\n%s", err, out)
	}
	return c
}

// stopStaleClusters stops the clusters of test processes that are gone.
func stopStaleClusters(t *testing.T, script string) {
	owners, _ := filepath.Glob(filepath.Join(os.TempDir(), "synapse-slurm-*.owner"))
	for _, owner := range owners {
		b, _ := os.ReadFile(owner)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil && syscall.Kill(pid, 0) == nil {
			continue // its test is still running
		}
		dir := strings.TrimSuffix(owner, ".owner")
		out, err := exec.Command(script, "stop", dir).CombinedOutput()
		if err != nil {
			t.Logf("stopping the stale cluster in %s: %v\n%s", dir, err, out)
		}
		os.Remove(owner)
	}
}

// run runs a command against the cluster in dir and returns its stdout.
func (c *slurmCluster) run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), c.env...), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// slurmJob is one job or array task as scontrol shows it.
type slurmJob map[string]string

// jobs returns the tasks of a job (one for a plain job, one per array task).
func (c *slurmCluster) jobs(t *testing.T, id string) []slurmJob {
	t.Helper()
	var jobs []slurmJob
	for _, line := range strings.Split(strings.TrimSpace(c.run(t, "", nil, "scontrol", "show", "job", "-o", id)), "\n") {
		j := slurmJob{}
		for _, field := range strings.Fields(line) {
			if k, v, ok := strings.Cut(field, "="); ok {
				j[k] = v
			}
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// task returns one array task of a job.
func (c *slurmCluster) task(t *testing.T, id string, task int) slurmJob {
	t.Helper()
	for _, j := range c.jobs(t, id) {
		if j["ArrayTaskId"] == strconv.Itoa(task) {
			return j
		}
	}
	t.Fatalf("job %s has no array task %d", id, task)
	return nil
}

// waitUntil polls cond every 100 ms until it holds; past the deadline the
// test fails saying what it waited for.
func (c *slurmCluster) waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(slurmDeadline)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s\nsqueue:\n%s", slurmDeadline, what, c.run(t, "", nil, "squeue"))
		}
		<-tick.C
	}
}

// waitDone waits until none of the jobs is pending or running any more.
func (c *slurmCluster) waitDone(t *testing.T, ids ...string) {
	t.Helper()
	c.waitUntil(t, "jobs "+strings.Join(ids, ", ")+" to end", func() bool {
		return strings.TrimSpace(c.run(t, "", nil, "squeue", "-h", "-o", "%i", "-j", strings.Join(ids, ","))) == ""
	})
}

// wantState fails the test unless the job (every task of it) ended in state
// with exit code (Slurm's "code:signal").
func (c *slurmCluster) wantState(t *testing.T, id, state, exit string) {
	t.Helper()
	for _, j := range c.jobs(t, id) {
		if j["JobState"] != state || j["ExitCode"] != exit {
			log, _ := os.ReadFile(j["StdOut"])
			t.Fatalf("job %s (task %s): %s, exit %s; want %s, exit %s\nits log:\n%s", j["JobId"], j["ArrayTaskId"],
				j["JobState"], j["ExitCode"], state, exit, log)
		}
	}
}

// submit runs examples/slurm/submit.sh and returns the array's and the
// merge's job ids.
func (c *slurmCluster) submit(t *testing.T, dir string, env []string, args ...string) (embed, merge string) {
	t.Helper()
	script, _ := filepath.Abs(repoPath("examples", "slurm", "submit.sh"))
	out := c.run(t, dir, env, script, args...)
	ids := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			ids[k] = v
		}
	}
	if ids["embed"] == "" || ids["merge"] == "" {
		t.Fatalf("submit.sh printed %q; want the lines \"embed JOBID\" and \"merge JOBID\"", out)
	}
	return ids["embed"], ids["merge"]
}

// slurmCorpus writes a Parquet file of several row groups and a JSONL file
// long enough that each of 4 shards gets a part of it, all rows with ids.
func slurmCorpus(t *testing.T, dir string) []string {
	t.Helper()
	docs := testmodels.Corpus(700)
	var b bytes.Buffer
	for i, d := range docs[:500] {
		line, _ := json.Marshal(map[string]any{"id": d.ID, "text": d.Title + ". " + d.Text[:min(len(d.Text), 300+i%400)]})
		b.Write(append(line, '\n'))
	}
	jsonl := filepath.Join(dir, "a.jsonl")
	if err := os.WriteFile(jsonl, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	pq := filepath.Join(dir, "b.parquet")
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	for _, d := range docs[500:] {
		bld.Field(0).(*array.StringBuilder).Append(d.ID)
		bld.Field(1).(*array.StringBuilder).Append(d.Title + ". " + d.Text[:min(len(d.Text), 200)])
	}
	writeRecordGroups(t, pq, bld.NewRecordBatch(), 25)
	return []string{jsonl, pq}
}

// slurmFixture is what the Slurm tests share: the cluster, the corpus, the
// model, the single run's output to compare with, and the environment of the
// example scripts (the synapse binary and its libraries).
type slurmFixture struct {
	c           *slurmCluster
	dir, model  string
	inputs, env []string
	single      string
}

// TestSlurm runs the Slurm examples on one private cluster:
//   - the array of 4 shards over a Parquet and a JSONL corpus, and the merge
//     job after it, give the single run's rows;
//   - a fault drill: a task cancelled mid-run leaves its shard undone, the
//     dependent merge job never runs, `synapse merge` names the missing
//     shard; the task requeued, merge gives the single run;
//   - a task with a usage error (exit 2) fails without a requeue; one that
//     fails transiently (exit 1) requeues itself, then gives up.
func TestSlurm(t *testing.T) {
	needSlurm(t)
	f := &slurmFixture{c: startSlurm(t), dir: t.TempDir(), model: tinyModel(t)}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(f.dir, "slurm-*.out"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("=== %s\n%s", filepath.Base(l), b)
			}
		}
	})
	f.inputs = slurmCorpus(t, f.dir)
	f.env = []string{"SYNAPSE=" + testenv.Binary(t), "SYNAPSE_LLAMA_LIB=" + testenv.LlamaLib(t)}
	f.single = filepath.Join(f.dir, "single.arrow")
	runSynapse(t, nil, append(append([]string{"embed"}, f.inputs...), "-m", f.model, "-o", f.single, "-q")...).wantCode(t, exitOK)
	t.Run("array and merge give the single run", f.arrayAndMerge)
	// The faults run side by side: each waits for a requeued job's begin time.
	t.Run("faults", func(t *testing.T) {
		for name, test := range map[string]func(*testing.T){
			"fault drill":                   f.faultDrill,
			"usage error is not requeued":   f.usageError,
			"transient failure is requeued": f.transient,
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				test(t)
			})
		}
	})
}

// arrayAndMerge: submit.sh runs a 4-task array and the merge job after it;
// the merged file is the single run's, row for row.
func (f *slurmFixture) arrayAndMerge(t *testing.T) {
	c := f.c
	out := filepath.Join(f.dir, "out", "vectors.arrow")
	if err := os.Mkdir(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	embed, merge := c.submit(t, f.dir, f.env, append([]string{"-n", "4", "-k", "4", "-c", "1", "-m", f.model, "-o", out}, f.inputs...)...)
	c.waitDone(t, embed, merge)
	c.wantState(t, embed, "COMPLETED", "0:0")
	c.wantState(t, merge, "COMPLETED", "0:0")
	if n := len(c.jobs(t, embed)); n != 4 {
		t.Errorf("the array ran %d tasks; want 4", n)
	}
	_, want := readOutput(t, f.single)
	_, got := readOutput(t, out)
	sameRows(t, "merged by the Slurm merge job vs single run", got, want)

	// A done shard submitted again (alone: an array of one task) does
	// nothing and succeeds.
	manifest := filepath.Join(f.dir, "out", "vectors.shard-2-of-4.json")
	before, _ := os.ReadFile(manifest)
	script, _ := filepath.Abs(repoPath("examples", "slurm", "embed-array.sbatch"))
	env := append(f.env, "SHARDS=4", "MODEL="+f.model, "OUT="+out, "INPUTS="+strings.Join(f.inputs, " "))
	again := strings.TrimSpace(c.run(t, f.dir, env, "sbatch", "--parsable", "--array=2", "--cpus-per-task=1", script))
	c.waitDone(t, again)
	c.wantState(t, again, "COMPLETED", "0:0")
	after, _ := os.ReadFile(manifest)
	log, _ := os.ReadFile(c.task(t, again, 2)["StdOut"])
	if !bytes.Equal(before, after) || !bytes.Contains(log, []byte("nothing to do")) {
		t.Errorf("shard 2 submitted again: manifest unchanged %v; want true and a log saying \"nothing to do\":\n%s", bytes.Equal(before, after), log)
	}
}

// faultDrill: a task cancelled mid-run; merge names it; requeued, the merge
// gives the single run.
func (f *slurmFixture) faultDrill(t *testing.T) {
	c, dir := f.c, f.dir
	// Every request of the drill's workers waits 200 ms, so that a task is
	// still running when it is cancelled.
	out := filepath.Join(dir, "drill.arrow")
	env := append(f.env, "SYNAPSE_ARGS=--chaos delay=200ms")
	embed, merge := c.submit(t, dir, env, append([]string{"-n", "4", "-c", "1", "-m", f.model, "-o", out}, f.inputs...)...)
	log1 := filepath.Join(dir, fmt.Sprintf("slurm-%s_1.out", embed))
	c.waitUntil(t, "task 1 to start synapse", func() bool {
		b, _ := os.ReadFile(log1)
		return bytes.Contains(b, []byte("shard 1 of 4 (attempt 1)"))
	})
	c.run(t, dir, nil, "scancel", embed+"_1")
	c.waitDone(t, embed, merge)
	if j := c.task(t, embed, 1); j["JobState"] != "CANCELLED" {
		t.Fatalf("task 1 after scancel: %s; want CANCELLED (did it finish first?)", j["JobState"])
	}
	for _, i := range []int{0, 2, 3} {
		if j := c.task(t, embed, i); j["JobState"] != "COMPLETED" {
			t.Fatalf("task %d: %s, exit %s; want COMPLETED", i, j["JobState"], j["ExitCode"])
		}
	}
	if j := c.jobs(t, merge)[0]; j["JobState"] != "CANCELLED" || j["RunTime"] != "00:00:00" {
		t.Errorf("merge job after a failed task: %s after %s; want CANCELLED before it ran", j["JobState"], j["RunTime"])
	}
	res := runSynapse(t, nil, "merge", out)
	res.wantCode(t, exitFatal)
	if !strings.Contains(res.stderr, "shard 1 of 4 not done") {
		t.Fatalf("merge with task 1 cancelled:\n%s\nwant it to name shard 1", res.stderr)
	}

	// Requeued, task 1 runs again alone, once its begin time comes
	// (cred_expire, 10 s on the local cluster: starting it sooner races with
	// slurmd, which refuses the job while it holds the revoked credential of
	// the cancelled run).
	c.run(t, dir, nil, "scontrol", "requeue", embed+"_1")
	c.waitDone(t, embed)
	c.wantState(t, embed, "COMPLETED", "0:0")
	if j := c.task(t, embed, 1); j["Restarts"] != "1" {
		t.Errorf("task 1 after the requeue: Restarts=%s; want 1", j["Restarts"])
	}
	runSynapse(t, nil, "merge", out, "-q").wantCode(t, exitOK)
	_, want := readOutput(t, f.single)
	_, got := readOutput(t, out)
	sameRows(t, "merged after the requeue vs single run", got, want)
}

// usageError: a task whose synapse exits 2 (--dims larger than the model's)
// ends FAILED with exit 2 and no requeue; the merge job never runs.
func (f *slurmFixture) usageError(t *testing.T) {
	c := f.c
	out := filepath.Join(f.dir, "usage.arrow")
	env := append(f.env, "SYNAPSE_ARGS=--dims 4096")
	embed, merge := c.submit(t, f.dir, env, append([]string{"-n", "1", "-c", "1", "-m", f.model, "-o", out}, f.inputs...)...)
	c.waitDone(t, embed, merge)
	c.wantState(t, embed, "FAILED", "2:0")
	c.wantState(t, merge, "CANCELLED", "0:0")
	j := c.task(t, embed, 0)
	if j["Restarts"] != "0" {
		t.Errorf("a usage error was requeued: Restarts=%s; want 0", j["Restarts"])
	}
	if log, _ := os.ReadFile(j["StdOut"]); !bytes.Contains(log, []byte("not requeued")) {
		t.Errorf("task log does not say it is not requeued:\n%s", log)
	}
}

// transient: a task whose synapse exits 1 (the model quarantined: every
// request crashes its worker) requeues itself once (MAX_RETRIES=1), then
// ends FAILED with exit 1.
func (f *slurmFixture) transient(t *testing.T) {
	c := f.c
	in := filepath.Join(f.dir, "many.jsonl")
	writeJSONL(t, in, testCorpus(40))
	tok, err := tokenize.Load(f.model)
	if err != nil {
		t.Fatal(err)
	}
	cls, _ := tok.Affixes() // in every chunk: every request crashes
	out := filepath.Join(f.dir, "transient.arrow")
	env := append(f.env, fmt.Sprintf("SYNAPSE_ARGS=--chaos abort-on-token=%d", cls[0]), "MAX_RETRIES=1")
	embed, merge := c.submit(t, f.dir, env, "-n", "1", "-c", "1", "-m", f.model, "-o", out, in)
	c.waitUntil(t, "the failed task to be requeued", func() bool {
		j := c.task(t, embed, 0)
		return j["Restarts"] == "1" && j["JobState"] == "PENDING"
	})
	c.waitDone(t, embed, merge)
	c.wantState(t, embed, "FAILED", "1:0")
	log, _ := os.ReadFile(c.task(t, embed, 0)["StdOut"])
	for _, want := range []string{"(exit 1, transient): requeued", "after 1 requeues: giving up"} {
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("task log does not say %q:\n%s", want, log)
		}
	}
}
