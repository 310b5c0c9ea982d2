package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
)

// End-to-end tests of `synapse models`: the real binary, real workers, a
// private model cache per test (SYNAPSE_MODELS) and generated models.

// modelsEnv runs synapse commands against one model cache.
type modelsEnv struct {
	t     *testing.T
	store string
	env   []string
}

func newModelsEnv(t *testing.T) *modelsEnv {
	t.Helper()
	lib := testenv.LlamaLib(t)
	store := filepath.Join(t.TempDir(), "models")
	return &modelsEnv{t: t, store: store, env: []string{"SYNAPSE_LLAMA_LIB=" + lib, "SYNAPSE_MODELS=" + store}}
}

// cmd is a synapse command with the env's cache and libraries, plus env.
func (m *modelsEnv) cmd(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, testenv.Binary(m.t), args...)
	cmd.Env = append(append(os.Environ(), m.env...), env...)
	return cmd
}

// run runs synapse to its end (at most two minutes).
func (m *modelsEnv) run(env []string, args ...string) (stdout, stderr string, code int) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := m.cmd(ctx, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		m.t.Fatalf("synapse %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		m.t.Fatalf("synapse %s: still running after 2 minutes\nstderr:\n%s", strings.Join(args, " "), errb.String())
	}
	return out.String(), errb.String(), code
}

// must runs synapse and fails the test unless it exits with code.
func (m *modelsEnv) must(code int, args ...string) (stdout, stderr string) {
	m.t.Helper()
	out, errOut, got := m.run(nil, args...)
	if got != code {
		m.t.Fatalf("synapse %s: exit %d; want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, out, errOut)
	}
	return out, errOut
}

type lsEntry struct {
	Name, Digest, Path, Quantization, Of string
}

// ls returns the cache's entries.
func (m *modelsEnv) ls() []lsEntry {
	m.t.Helper()
	out, _ := m.must(0, "models", "ls", "--json")
	var entries []lsEntry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		m.t.Fatalf("ls --json: %v\n%s", err, out)
	}
	return entries
}

// staged returns what the cache's staging directory holds.
func (m *modelsEnv) staged() []string {
	des, _ := os.ReadDir(filepath.Join(m.store, "tmp"))
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// genTiny writes TinyEmbedder (2 layers, 128 wide, F16, general.name
// synapse-tiny-embed) with the demo vocabulary.
func genTiny(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.TinyEmbedder(modelgen.WordPieceVocab(modelgen.DemoWords)).Write(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// add / ls / verify / rm, and a corrupted cached file found by verify and
// refused by the worker's LOAD.
func TestModelsRoundTrip(t *testing.T) {
	m := newModelsEnv(t)
	model := genTiny(t)
	out, _ := m.must(0, "models", "add", model, "--name", "tiny")
	if !strings.HasPrefix(out, "added     tiny  sha256:") {
		t.Errorf("add: got %q; want an added line", out)
	}
	entries := m.ls()
	if len(entries) != 1 || entries[0].Name != "tiny" || entries[0].Quantization != "F16" {
		t.Fatalf("ls: got %+v; want one F16 entry named tiny", entries)
	}
	if out, _ := m.must(0, "models", "ls"); !strings.Contains(out, "tiny") || !strings.Contains(out, "F16") {
		t.Errorf("ls: got %q; want a row for tiny", out)
	}
	digest := strings.TrimPrefix(entries[0].Digest, "sha256:")
	m.must(0, "inspect", digest[:8]) // -m resolution: a digest prefix
	if out, _ := m.must(0, "models", "verify"); !strings.HasPrefix(out, "ok      tiny") {
		t.Errorf("verify: got %q; want ok", out)
	}

	corrupt(t, entries[0].Path)
	out, errOut := m.must(1, "models", "verify", "tiny")
	if !strings.HasPrefix(out, "FAILED  tiny") || !strings.Contains(errOut, "1 of 1 cached models failed") {
		t.Errorf("verify after corruption: got %q / %q; want FAILED", out, errOut)
	}
	corpus := filepath.Join(t.TempDir(), "c.jsonl")
	os.WriteFile(corpus, []byte(`{"id":"1","text":"the model embeds text"}`+"\n"), 0o644)
	_, errOut = m.must(exitUsage, "embed", corpus, "-m", "tiny", "-o", filepath.Join(t.TempDir(), "v.arrow"), "--workers", "1", "--threads", "1", "-q")
	if !strings.Contains(errOut, "artifact_invalid") || !strings.Contains(errOut, "digest") {
		t.Errorf("embed with the corrupted model: got %q; want the worker's artifact_invalid digest refusal", errOut)
	}

	if out, _ := m.must(0, "models", "rm", "tiny"); !strings.HasPrefix(out, "removed tiny") {
		t.Errorf("rm: got %q", out)
	}
	if entries := m.ls(); len(entries) != 0 {
		t.Errorf("ls after rm: got %+v; want none", entries)
	}
	if _, errOut := m.must(exitUsage, "models", "rm", "tiny"); !strings.Contains(errOut, "not in the model cache") {
		t.Errorf("rm of a removed model: got %q", errOut)
	}
	if _, err := os.Stat(model); err != nil {
		t.Errorf("the added file after rm: %v; want it kept", err)
	}
	if _, errOut := m.must(exitUsage, "inspect", "no-such-model"); !strings.Contains(errOut, "not in the model cache") {
		t.Errorf("inspect of an unknown name: got %q", errOut)
	}
}

// corrupt flips one byte in the middle of a file, in place.
func corrupt(t *testing.T, path string) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	b := make([]byte, 1)
	fh.ReadAt(b, st.Size()/2)
	b[0] ^= 0xff
	if _, err := fh.WriteAt(b, st.Size()/2); err != nil {
		t.Fatal(err)
	}
}

func TestModelsUsage(t *testing.T) {
	m := newModelsEnv(t)
	model := genTiny(t)
	sample := filepath.Join(t.TempDir(), "s.jsonl")
	os.WriteFile(sample, []byte("{\"text\":\"a\"}\nnot json\n"), 0o644)
	for _, args := range [][]string{
		{"models", "add"},
		{"models", "add", model, model},
		{"models", "add", model, "--quantize", "q9_9"},
		{"models", "add", model, "--sample", sample},
		{"models", "add", model, "--quantize", "q8_0", "--sample", sample},
		{"models", "add", model, "--quantize", "q8_0", "--min-cosine", "2"},
		{"models", "add", filepath.Join(t.TempDir(), "missing.gguf")},
		{"models", "ls", "extra"},
		{"models", "ls", "--frob"},
		{"models", "rm"},
		{"models", "verify", "no-such-model"},
		{"models", "add", model, "--chaos", "explode=1"},
	} {
		if _, errOut, code := m.run(nil, args...); code != exitUsage {
			t.Errorf("synapse %s: exit %d; want %d (stderr %q)", strings.Join(args, " "), code, exitUsage, errOut)
		}
	}
	if _, errOut, _ := m.run(nil, "models", "add", model, "--quantize", "q8_0", "--sample", sample); !strings.Contains(errOut, sample+":2") {
		t.Errorf("a bad sample line: got %q; want the file and line", errOut)
	}
}

// Two processes adding the same file at once leave one valid entry: the
// second waits for the first's lock (the delay drill keeps the first in its
// worker for seconds) and finds the entry.
func TestModelsConcurrentAdd(t *testing.T) {
	m := newModelsEnv(t)
	model := genTiny(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var outs, errs [2]bytes.Buffer
	var cmds [2]*exec.Cmd
	for i := range cmds {
		cmds[i] = m.cmd(ctx, nil, "models", "add", model, "--chaos", "delay=1s")
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &errs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, errs[i].String())
		}
	}
	got := outs[0].String() + outs[1].String()
	if strings.Count(got, "added ") != 1 || strings.Count(got, "cached ") != 1 {
		t.Errorf("outputs: got %q; want one added and one cached", got)
	}
	if w := errs[0].String() + errs[1].String(); !strings.Contains(w, "waiting for another synapse process adding this model") {
		t.Errorf("stderr: got %q; want one process waiting for the other", w)
	}
	if entries := m.ls(); len(entries) != 1 {
		t.Errorf("entries: got %d; want 1", len(entries))
	}
	m.must(0, "models", "verify")
	if s := m.staged(); len(s) != 0 {
		t.Errorf("staging leftovers: %v", s)
	}
}

// startQuantize starts `models add MODEL --quantize q8_0` with a worker that
// hangs on QUANTIZE and returns once the command says it is quantizing;
// wait waits for the command (after its stderr is drained).
func (m *modelsEnv) startQuantize(ctx context.Context, model string) (cmd *exec.Cmd, wait func() error) {
	m.t.Helper()
	return m.startQuantizeTo(ctx, model, "q8_0")
}

// startQuantizeTo is startQuantize with the --quantize type.
func (m *modelsEnv) startQuantizeTo(ctx context.Context, model, ftype string) (cmd *exec.Cmd, wait func() error) {
	m.t.Helper()
	cmd = m.cmd(ctx, nil, "models", "add", model, "--quantize", ftype, "--chaos", "hang-on-type=QUANTIZE")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		m.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	seen, drained := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "quantizing") {
				close(seen)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-seen:
	case <-ctx.Done():
		cmd.Process.Kill()
		m.t.Fatalf("the command never started quantizing")
	}
	return cmd, func() error { <-drained; return cmd.Wait() }
}

// An interrupted quantize leaves no entry: Ctrl-C exits 130 and cleans up;
// SIGKILL leaves a staging directory, which the next command removes. A
// worker crash in the quantizer is a clean error.
func TestModelsQuantizeInterrupted(t *testing.T) {
	m := newModelsEnv(t)
	model := genTiny(t)
	m.must(0, "models", "add", model)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	noVariant := func(when string) {
		t.Helper()
		if entries := m.ls(); len(entries) != 1 || entries[0].Of != "" {
			t.Errorf("%s: got entries %+v; want only the source", when, entries)
		}
	}

	cmd, wait := m.startQuantize(ctx, model)
	cmd.Process.Signal(os.Interrupt)
	err := wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Errorf("after SIGINT: %v; want exit %d", err, exitInterrupted)
	}
	noVariant("after SIGINT")
	if s := m.staged(); len(s) != 0 {
		t.Errorf("staging after SIGINT: %v; want nothing", s)
	}

	cmd, wait = m.startQuantize(ctx, model)
	cmd.Process.Kill()
	if err := wait(); err == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("after SIGKILL: %v; want death by SIGKILL", err)
	}
	noVariant("after SIGKILL")
	if s := m.staged(); len(s) == 0 {
		t.Errorf("staging after SIGKILL: empty; want the killed run's directory left for the next command to remove")
	}

	_, errOut, code := m.run(nil, "models", "add", model, "--quantize", "q8_0", "--chaos", "abort-on-type=QUANTIZE")
	if code != exitFatal || !strings.Contains(errOut, "the worker crashed (killed by SIGABRT); nothing was added") {
		t.Errorf("with a crashing quantizer: exit %d, %q; want 1 and a crash message", code, errOut)
	}
	noVariant("after the worker crash")
	if s := m.staged(); len(s) != 0 {
		t.Errorf("staging after the next command: %v; want the killed run's cleaned up", s)
	}

	out, _ := m.must(0, "models", "add", model, "--quantize", "q8_0")
	if !strings.Contains(out, "quantized synapse-tiny-embed:q8_0") || !strings.Contains(out, "quality   cosine to F16: min ") {
		t.Errorf("quantize after the interruptions: got %q", out)
	}
}

// embed --quantize adds and quantizes on first use, reuses the variant
// afterwards, and runs a degraded one only with --allow-degraded.
func TestEmbedQuantize(t *testing.T) {
	m := newModelsEnv(t)
	model := genTiny(t)
	dir := t.TempDir()
	corpus := filepath.Join(dir, "c.jsonl")
	os.WriteFile(corpus, []byte("{\"id\":\"1\",\"text\":\"the model embeds text\"}\n{\"id\":\"2\",\"text\":\"a query\"}\n"), 0o644)
	embed := func(code int, out string, extra ...string) string {
		t.Helper()
		args := append([]string{"embed", corpus, "-m", model, "-o", filepath.Join(dir, out), "--workers", "1", "--threads", "1", "-q"}, extra...)
		_, errOut := m.must(code, args...)
		return errOut
	}
	errOut := embed(0, "a.arrow", "--quantize", "q8_0", "--min-cosine", "0.99")
	if !strings.Contains(errOut, "quantizing synapse-tiny-embed to Q8_0") || !strings.Contains(errOut, "running synapse-tiny-embed:q8_0 (Q8_0 of synapse-tiny-embed") {
		t.Errorf("first embed --quantize: stderr %q; want it quantizing, then running the variant", errOut)
	}
	sc, _ := readOutput(t, filepath.Join(dir, "a.arrow"))
	meta := map[string]string{}
	for i, k := range sc.Metadata().Keys() {
		meta[k] = sc.Metadata().Values()[i]
	}
	if meta["synapse.model_name"] != "synapse-tiny-embed:q8_0" || meta["synapse.model_quantization"] != "Q8_0" ||
		!strings.HasPrefix(meta["synapse.model_quantized_from"], "sha256:") || !strings.Contains(meta["synapse.model_quality"], "min 0.99") {
		t.Errorf("output metadata: got name %q quantization %q from %q quality %q; want the Q8_0 variant's",
			meta["synapse.model_name"], meta["synapse.model_quantization"], meta["synapse.model_quantized_from"], meta["synapse.model_quality"])
	}
	errOut = embed(0, "b.arrow", "--quantize", "q8_0")
	if strings.Contains(errOut, "quantizing") || strings.Contains(errOut, "validating") || !strings.Contains(errOut, "running synapse-tiny-embed:q8_0") {
		t.Errorf("second embed --quantize: stderr %q; want the cached variant, no worker work before the job", errOut)
	}
	if entries := m.ls(); len(entries) != 2 {
		t.Errorf("entries: got %d; want the source and one variant", len(entries))
	}
	// A variant measured against an unreachable threshold is degraded.
	errOut = embed(exitUsage, "c.arrow", "--quantize", "q4_0", "--min-cosine", "0.9999999")
	if !strings.Contains(errOut, "synapse-tiny-embed:q4_0 is degraded") || !strings.Contains(errOut, "--allow-degraded") {
		t.Errorf("degraded variant: stderr %q; want a refusal naming the flag", errOut)
	}
	embed(0, "d.arrow", "--quantize", "q4_0", "--allow-degraded")
	_, errOut = m.must(exitUsage, "embed", corpus, "-m", "synapse-tiny-embed:q4_0", "-o", filepath.Join(dir, "e.arrow"), "-q")
	if !strings.Contains(errOut, "degraded quantized variant") {
		t.Errorf("-m NAME of a degraded variant: stderr %q; want it refused", errOut)
	}
	m.must(0, "embed", corpus, "-m", "synapse-tiny-embed:q4_0", "--allow-degraded", "-o", filepath.Join(dir, "f.arrow"), "--workers", "1", "--threads", "1", "-q")
}
