package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/model/testmodels"
)

// TestEndlessInputInterrupt: an input that never ends a line (/dev/zero)
// is read, and dropped, only until the first SIGTERM: the run then stops
// at once with exit 130. SIGQUIT stops it the same way (Go's default,
// exit 2, would read as a usage error to a scheduler).
func TestEndlessInputInterrupt(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) { endlessInputInterrupt(t, sig) })
	}
}

func endlessInputInterrupt(t *testing.T, sig syscall.Signal) {
	dir := t.TempDir()
	cmd := synapseCmd(context.Background(), t, nil, "embed", "/dev/zero", "-m", tinyModel(t), "-o", filepath.Join(dir, "out.arrow"),
		"--workers", "1", "--threads", "1")
	e := startEmbedding(t, cmd)
	waitBytesRead(t, cmd.Process.Pid, 64<<20) // inside the endless line
	e.interrupt(t, sig, 10*time.Second, "while reading /dev/zero")
}

// TestGrammarRefusedBeforeWork: a grammar file that is endless, empty or
// nests groups deeper than llama.cpp survives is refused with exit 2
// before any worker starts, naming the file.
func TestGrammarRefusedBeforeWork(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "a", "text": "hello"}})
	empty := filepath.Join(dir, "empty.gbnf")
	os.WriteFile(empty, []byte("# nothing\n\n"), 0o644)
	deep := filepath.Join(dir, "deep.gbnf")
	os.WriteFile(deep, []byte("root ::= "+strings.Repeat("(", 20000)+`"a"`+strings.Repeat(")", 20000)+"\n"), 0o644)
	model := testmodels.Llama(t)
	for _, tc := range []struct {
		name, flag, file, want string
	}{
		{"endless grammar", "--grammar", sparseFile(t, filepath.Join(dir, "endless.gbnf")), "more than"},
		{"endless schema", "--json-schema", sparseFile(t, filepath.Join(dir, "endless.json")), "more than"},
		{"a device as the grammar", "--grammar", "/dev/zero", "not a regular file"},
		{"a device as the schema", "--json-schema", "/dev/zero", "not a regular file"},
		{"empty grammar", "--grammar", empty, "empty"},
		{"deeply nested grammar", "--grammar", deep, "nest 20000 deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runSynapseWithin(t, time.Minute, nil, "generate", in, "-m", model, "-o", filepath.Join(dir, "out.arrow"), tc.flag, tc.file, "--workers", "1")
			res.wantCode(t, exitUsage)
			if !strings.Contains(res.stderr, tc.want) || !strings.Contains(res.stderr, tc.file) {
				t.Errorf("stderr does not name %s and say %q:\n%s", tc.file, tc.want, res.stderr)
			}
			if strings.Contains(res.stderr, "worker") {
				t.Errorf("a worker was started for a refused grammar:\n%s", res.stderr)
			}
		})
	}
}

// waitBytesRead waits until process pid has read n bytes (/proc/PID/io rchar).
func waitBytesRead(t *testing.T, pid int, n int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
		if err != nil {
			t.Skipf("needs /proc/PID/io: %v", err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "rchar: "); ok {
				if got, _ := strconv.ParseInt(v, 10, 64); got >= n {
					return
				}
			}
		}
		runtime.Gosched()
	}
	t.Fatalf("pid %d did not read %d bytes within a minute", pid, n)
}

// TestPermanentFailuresExit2: failures that running again unchanged cannot
// mend exit 2 (never retried), not 1, and say what to change.
func TestPermanentFailuresExit2(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t)
	in := filepath.Join(dir, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "a", "text": "hello world"}})
	loop := filepath.Join(dir, "loop.gguf")
	os.Symlink(loop+"2", loop)
	os.Symlink(loop, loop+"2")
	blocks := filepath.Join(dir, "blocks.gguf")
	w, err := tinyBERT().Writer()
	if err != nil {
		t.Fatal(err)
	}
	w.Set("bert.block_count", uint32(100000))
	if err := w.WriteFile(blocks); err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(dir, "damaged.arrow")
	os.WriteFile(damaged+".checkpoint", []byte("{not json"), 0o644)
	os.WriteFile(damaged+".partial", []byte("x"), 0o644)
	endless := filepath.Join(dir, "endless.arrow") // resume files and a shard manifest that never end
	sparseFile(t, endless+".checkpoint")
	os.WriteFile(endless+".partial", []byte("x"), 0o644)
	device := filepath.Join(dir, "device.arrow") // a resume checkpoint that is a device
	os.Symlink("/dev/zero", device+".checkpoint")
	os.WriteFile(device+".partial", []byte("x"), 0o644)
	endlessShard := filepath.Join(dir, "shards.arrow")
	sparseFile(t, filepath.Join(dir, "shards.shard-0-of-1.json"))
	deviceShard := filepath.Join(dir, "devshards.arrow")
	os.Symlink("/dev/zero", filepath.Join(dir, "devshards.shard-0-of-1.json"))
	deep := dir
	for len(deep) < 120 {
		deep = filepath.Join(deep, "dddddddddddddddd")
	}
	os.MkdirAll(deep, 0o700)
	badONNX := filepath.Join(dir, "bad-onnx")
	os.Mkdir(badONNX, 0o755)
	os.WriteFile(filepath.Join(badONNX, "model.onnx"), []byte("x"), 0o644)
	store := filepath.Join(dir, "store")
	embed := func(args ...string) []string {
		return append([]string{"embed", in, "--workers", "1", "--threads", "1"}, args...)
	}
	out := filepath.Join(dir, "out.arrow")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"a loop of symbolic links as the model", nil, embed("-m", loop, "-o", out), "too many levels of symbolic links"},
		{"an unknown cache name with --quantize", []string{"SYNAPSE_MODELS=" + store}, embed("-m", "no-such-model", "--quantize", "q8_0", "-o", out), "no-such-model"},
		{"block_count beyond the blocks", nil, embed("-m", blocks, "-o", out), "block_count is 100000"},
		{"a LOAD that crashes every time", nil, embed("-m", model, "-o", out, "--chaos", "abort-on-type=LOAD"), "crashed loading the model twice"},
		{"damaged resume files", nil, embed("-m", model, "-o", damaged, "--resume"), "start over without --resume"},
		{"an endless resume checkpoint", nil, embed("-m", model, "-o", endless, "--resume"), "start over without --resume"},
		{"a device as the resume checkpoint", nil, embed("-m", model, "-o", device, "--resume"), "start over without --resume"},
		{"merge: an endless manifest", nil, []string{"merge", endlessShard, "-o", filepath.Join(dir, "merged.arrow")}, "more than"},
		{"merge: a device as a manifest", nil, []string{"merge", deviceShard, "-o", filepath.Join(dir, "merged.arrow")}, "not a regular file"},
		{"a runtime directory too deep", []string{"XDG_RUNTIME_DIR=" + deep}, embed("-m", model, "-o", out), "socket path too long"},
		{"inspect: a bad ONNX model", nil, []string{"inspect", badONNX}, "not a usable model"},
		{"models add: a name like a digest prefix", []string{"SYNAPSE_MODELS=" + store}, []string{"models", "add", model, "--name", "deadbeef"}, "digest prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runSynapse(t, tc.env, tc.args...)
			res.wantCode(t, exitUsage)
			if !strings.Contains(res.stderr, tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, res.stderr)
			}
		})
	}
}

// TestEmbedPreviousNotFinite: a NaN planted in a --previous output is not
// copied into the new one (no run writes such a vector): that unchanged
// document is embedded again, and the summary says so.
func TestEmbedPreviousNotFinite(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeJSONL(t, in, testCorpus(5))
	prev, out := filepath.Join(dir, "prev.arrow"), filepath.Join(dir, "new.arrow")
	embed := func(args ...string) []string {
		return append([]string{"embed", in, "-m", tinyModel(t), "--workers", "1", "--threads", "1"}, args...)
	}
	runSynapse(t, nil, embed("-o", prev)...).wantCode(t, exitOK)
	_, rows := readOutput(t, prev)
	b := readFile(t, prev)
	var v [4]byte
	binary.LittleEndian.PutUint32(v[:], math.Float32bits(rows[0].Emb[0]))
	at := bytes.Index(b, v[:])
	if at < 0 {
		t.Fatal("the first vector's first value is not in the file")
	}
	binary.LittleEndian.PutUint32(b[at:], math.Float32bits(float32(math.NaN())))
	if err := os.WriteFile(prev, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, r := readOutput(t, prev); !math.IsNaN(float64(r[0].Emb[0])) {
		t.Fatal("the NaN did not land in the first vector")
	}
	res := runSynapse(t, nil, embed("-o", out, "--previous", prev)...)
	res.wantCode(t, exitOK)
	_, got := readOutput(t, out)
	for _, r := range got {
		for i, x := range r.Emb {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("row %s chunk %d: value %v at dimension %d; want only finite values", r.ID, r.Chunk, x, i)
			}
		}
	}
	if !strings.Contains(res.stdout, "1 unchanged documents embedded again") {
		t.Errorf("the summary does not say a document was embedded again:\n%s", res.stdout)
	}
	if c := res.incCounts(t); c.reused != 4 || c.embedded != 1 {
		t.Errorf("documents: %d reused, %d embedded; want 4 and 1", c.reused, c.embedded)
	}
}

// TestGrammarCrashExit2: a grammar that passes the module's checks but
// kills the engine when a worker parses it (played by a drill that aborts
// every GENERATE) is refused with exit 2 before any row, not retried
// forever with exit 1: parsing it alone is what crashed.
func TestGrammarCrashExit2(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "a", "text": "hello"}})
	g := filepath.Join(dir, "yes.gbnf")
	os.WriteFile(g, []byte(`root ::= "yes" | "no"`+"\n"), 0o644)
	res := runSynapseWithin(t, 2*time.Minute, nil, "generate", in, "-m", testmodels.Llama(t), "-o", filepath.Join(dir, "out.arrow"),
		"--grammar", g, "--workers", "1", "--chaos", "abort-on-type=GENERATE")
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "crashed parsing it") {
		t.Errorf("stderr does not say the engine crashed parsing the grammar:\n%s", res.stderr)
	}
}

// sparseFile makes path a regular file of 1 GiB of zeros without a newline,
// sparse on disk: larger than any file synapse reads whole, so that reading
// it must stop at a bound. It returns path.
func sparseFile(t *testing.T, path string) string {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 1<<30); err != nil {
		t.Fatal(err)
	}
	return path
}
