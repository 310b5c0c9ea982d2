package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx"
	"github.com/synapse-embed/synapse/model/onnx/cpuclass"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// End-to-end tests of the model cache with ONNX models: `models add DIR`,
// `--quantize int8` (synapse's own dynamic int8 graph, written in a worker)
// and `embed --quantize int8`.

// newONNXModelsEnv is newModelsEnv with ONNX Runtime for the workers.
func newONNXModelsEnv(t *testing.T) *modelsEnv {
	m := newModelsEnv(t)
	m.env = append(m.env, "SYNAPSE_ORT_LIB="+testenv.ORTLib(t))
	return m
}

// genONNXDir writes a generated encoder directory (32 wide, with dense
// layers when layers > 0) named name.
func genONNXDir(t *testing.T, name string, layers int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	enc := onnxtest.Tiny()
	enc.Hidden, enc.Layers = 32, layers
	if _, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: enc}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// models add DIR --quantize int8 adds the directory and its int8 variant
// with a quality report; embed runs the variant by name, and embed
// --quantize int8 -m DIR finds it in the cache.
func TestModelsONNXQuantize(t *testing.T) {
	m := newONNXModelsEnv(t)
	dir := genONNXDir(t, "gen-encoder", 2)
	out, _ := m.must(0, "models", "add", dir, "--quantize", "int8", "--threads", "1", "--rounds", "1")
	for _, want := range []string{"added     gen-encoder ", "F32 (", "quantized gen-encoder:int8 ", "INT8", "quality   cosine to F32: min ", "speed     "} {
		if !strings.Contains(out, want) {
			t.Errorf("models add --quantize int8: stdout lacks %q:\n%s", want, out)
		}
	}
	entries := m.ls()
	if len(entries) != 2 || entries[1].Name != "gen-encoder:int8" || entries[1].Of != entries[0].Digest || entries[1].Quantization != "INT8" {
		t.Fatalf("entries: %+v; want gen-encoder and its INT8 variant", entries)
	}
	for _, f := range []string{"model.onnx", "tokenizer.json", "config.json"} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(entries[1].Path), f)); err != nil {
			t.Errorf("the variant's entry lacks %s: %v", f, err)
		}
	}
	m.must(0, "models", "verify")

	work := t.TempDir()
	corpus := filepath.Join(work, "c.jsonl")
	os.WriteFile(corpus, []byte("{\"id\":\"1\",\"text\":\"the cell protein\"}\n{\"id\":\"2\",\"text\":\"hello world\"}\n"), 0o644)
	_, errOut := m.must(0, "embed", corpus, "-m", dir, "--quantize", "int8", "-o", filepath.Join(work, "a.arrow"), "--workers", "1", "--threads", "1", "-q")
	if strings.Contains(errOut, "quantizing") || !strings.Contains(errOut, "running gen-encoder:int8 (INT8 of gen-encoder") {
		t.Errorf("embed --quantize int8: stderr %q; want the cached variant run", errOut)
	}
	sc, rows := readOutput(t, filepath.Join(work, "a.arrow"))
	meta := map[string]string{}
	for i, k := range sc.Metadata().Keys() {
		meta[k] = sc.Metadata().Values()[i]
	}
	if len(rows) != 2 || meta["synapse.model_name"] != "gen-encoder:int8" || meta["synapse.model_quantization"] != "INT8" || meta["synapse.model_quantized_from"] != entries[0].Digest {
		t.Errorf("output: %d rows, metadata name %q quantization %q from %q; want 2 rows of the INT8 variant", len(rows), meta["synapse.model_name"], meta["synapse.model_quantization"], meta["synapse.model_quantized_from"])
	}
}

// A model the quantizer cannot handle is refused by name, with exit 2,
// before any entry is made; so is a GGUF type asked of an ONNX model.
func TestModelsONNXQuantizeRefused(t *testing.T) {
	m := newONNXModelsEnv(t)
	dir := genONNXDir(t, "no-dense", 0) // no MatMul at all
	_, errOut, code := m.run(nil, "models", "add", dir, "--quantize", "int8")
	if code != exitUsage || !strings.Contains(errOut, "quantize "+dir) || !strings.Contains(errOut, "nothing to quantize") {
		t.Errorf("no MatMul: exit %d, %q; want 2 naming the model and the reason", code, errOut)
	}
	_, errOut, code = m.run(nil, "models", "add", dir, "--quantize", "q8_0")
	if code != exitUsage || !strings.Contains(errOut, "an ONNX model is quantized to int8") {
		t.Errorf("q8_0 of an ONNX model: exit %d, %q; want 2", code, errOut)
	}
	if entries := m.ls(); len(entries) != 0 {
		t.Errorf("entries after the refusals: %+v; want none", entries)
	}
	if s := m.staged(); len(s) != 0 {
		t.Errorf("staging after the refusals: %v; want nothing", s)
	}
}

// An interrupted int8 quantization (SIGINT, SIGKILL, a crashed worker)
// leaves no variant; the next one succeeds.
func TestModelsONNXQuantizeInterrupted(t *testing.T) {
	m := newONNXModelsEnv(t)
	dir := genONNXDir(t, "gen-encoder", 2)
	m.must(0, "models", "add", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	noVariant := func(when string) {
		t.Helper()
		if entries := m.ls(); len(entries) != 1 || entries[0].Of != "" {
			t.Errorf("%s: got entries %+v; want only the source", when, entries)
		}
	}
	cmd, wait := m.startQuantizeTo(ctx, dir, "int8")
	cmd.Process.Signal(os.Interrupt)
	if ee, ok := wait().(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Errorf("after SIGINT: want exit %d", exitInterrupted)
	}
	noVariant("after SIGINT")
	if s := m.staged(); len(s) != 0 {
		t.Errorf("staging after SIGINT: %v; want nothing", s)
	}
	cmd, wait = m.startQuantizeTo(ctx, dir, "int8")
	cmd.Process.Kill()
	if err := wait(); err == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("after SIGKILL: %v; want death by SIGKILL", err)
	}
	noVariant("after SIGKILL")
	_, errOut, code := m.run(nil, "models", "add", dir, "--quantize", "int8", "--chaos", "abort-on-type=QUANTIZE")
	if code != exitFatal || !strings.Contains(errOut, "the worker crashed (killed by SIGABRT); nothing was added") {
		t.Errorf("with a crashing quantizer: exit %d, %q; want 1 and a crash message", code, errOut)
	}
	noVariant("after the worker crash")
	if s := m.staged(); len(s) != 0 {
		t.Errorf("staging after the next command: %v; want the killed run's cleaned up", s)
	}
	out, _ := m.must(0, "models", "add", dir, "--quantize", "int8", "--rounds", "1")
	if !strings.Contains(out, "quantized gen-encoder:int8") {
		t.Errorf("quantize after the interruptions: got %q", out)
	}
}

// The fixture's BERT directory quantized through the cache keeps cosine ≥
// 0.99 to its fp32 vectors on the built-in sample.
func TestModelsONNXQuantizeFixture(t *testing.T) {
	m := newONNXModelsEnv(t)
	dir := testenv.Fixture(t, "models", "ref-bert-embed-onnx")
	out, _ := m.must(0, "models", "add", dir, "--quantize", "int8", "--rounds", "1")
	if !strings.Contains(out, "quantized ref-bert-embed-onnx:int8") {
		t.Fatalf("got %q", out)
	}
	var minCos float64
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "quality   cosine to F32: min "); ok {
			if _, err := fmtSscan(rest, &minCos); err != nil {
				t.Fatal(err)
			}
		}
	}
	if minCos < 0.99 {
		t.Errorf("lowest cosine %.6f; want ≥ 0.99\n%s", minCos, out)
	}
}

// fmtSscan reads the number that starts s ("0.998187, mean …").
func fmtSscan(s string, f *float64) (int, error) {
	return fmt.Sscan(strings.TrimSuffix(strings.Fields(s)[0], ","), f)
}

// An int8 variant an earlier synapse made (8-bit weights: no graph form in
// its entry) is refused by name, exit 2, saying how to make it again, and
// `models add --quantize int8` makes it again in the form whose result is
// the same on every CPU class, recording the class it was measured on.
func TestModelsONNXStaleVariant(t *testing.T) {
	m := newONNXModelsEnv(t)
	dir := genONNXDir(t, "gen-encoder", 2)
	out, _ := m.must(0, "models", "add", dir, "--quantize", "int8", "--threads", "1", "--rounds", "1")
	if want := "cpu       " + cpuclass.Of() + " (the graph's result is the same on every CPU class)"; !strings.Contains(out, want) {
		t.Errorf("models add --quantize int8: stdout lacks %q:\n%s", want, out)
	}
	var variant string
	for _, e := range m.ls() {
		if e.Name == "gen-encoder:int8" {
			variant = filepath.Join(filepath.Dir(e.Path), "entry.json")
		}
	}
	raw, err := os.ReadFile(variant)
	if err != nil {
		t.Fatalf("the variant's entry: %v", err)
	}
	var entry map[string]any
	if err := json.Unmarshal(raw, &entry); err != nil {
		t.Fatal(err)
	}
	q := entry["quality"].(map[string]any)
	if q["graph"] != onnx.QuantForm || q["cpu"] != cpuclass.Of() {
		t.Errorf("the variant's quality records graph %v and cpu %v; want %s and %s", q["graph"], q["cpu"], onnx.QuantForm, cpuclass.Of())
	}
	delete(q, "graph") // as an earlier synapse wrote it
	delete(q, "cpu")
	raw, _ = json.Marshal(entry)
	if err := os.WriteFile(variant, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(t.TempDir(), "in.jsonl")
	writeJSONL(t, input, []map[string]any{{"id": "a", "text": "a short text"}})
	_, errOut := m.must(2, "embed", input, "-m", "gen-encoder:int8", "-o", filepath.Join(t.TempDir(), "out.jsonl"))
	for _, want := range []string{"int8 variant made by an earlier synapse", "8-bit weights", "an unrecorded CPU", "synapse models rm gen-encoder:int8"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("embed -m a stale variant: stderr lacks %q:\n%s", want, errOut)
		}
	}
	out, errOut = m.must(0, "models", "add", dir, "--quantize", "int8", "--threads", "1", "--rounds", "1")
	if !strings.Contains(errOut, "making it again") || !strings.Contains(out, "quantized gen-encoder:int8") {
		t.Errorf("models add --quantize int8 over a stale variant: stdout %q, stderr %q; want it made again", out, errOut)
	}
	m.must(0, "embed", input, "-m", "gen-encoder:int8", "-o", filepath.Join(t.TempDir(), "out.jsonl"))
}
