package engine

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
)

// int8 on every CPU class (docs/onnx.md): synapse's int8 graphs run on an
// emulated AVX2-only CPU (qemu-x86_64 -cpu Haswell, testenv.Emulator) give
// the vectors and scores they give on this machine's CPU, whatever its
// class, and so the quality measured here holds there. The fixture's own
// model_quantized.onnx (8-bit weights) is the control: its vectors move
// with the CPU, which shows that the emulated CPU does run the saturating
// kernels.
//
// The test runs natively (fp32 and int8 vectors and scores), then runs its
// own binary again under the emulator as TestONNXQuantizedOnCPUChild,
// which computes the int8 ones there; the comparisons are made here.
//
//	make test-cpu     (or: go test ./engine -run TestONNXQuantizedCPUClasses -v)

// cpuClassEnv carries the shared directory to the emulated child.
const cpuClassEnv = "SYNAPSE_CPUCLASS_DIR"

// cpuClassRun is what one CPU computed, written as JSON by the child.
type cpuClassRun struct {
	Class   string                 `json:"class"`
	Vectors map[string][][]float32 `json:"vectors"` // by graph file name
	Scores  []float32              `json:"scores"`  // the int8 cross-encoder's
}

// cpuClassPlan is what the parent sets up for the child.
type cpuClassPlan struct {
	Seqs   [][]int32     `json:"seqs"`
	Embed  []string      `json:"embed"` // graphs beside the embedding model's sidecars
	Rerank string        `json:"rerank"`
	Groups []RerankGroup `json:"groups"`
}

func TestONNXQuantizedCPUClasses(t *testing.T) {
	qemu := testenv.Emulator(t)
	fixture := testenv.Fixture(t, "models", "ref-bert-embed-onnx")
	rerankDir := testenv.Fixture(t, "models", "ref-bert-rerank-onnx")
	dir := t.TempDir()
	plan := cpuClassPlan{Seqs: fixtureSeqs(t), Groups: rerankFixtureGroups(t)}
	ours := quantizeInto(t, filepath.Join(fixture, "model.onnx"), "model.onnx")
	besideModel(t, fixture, ours)
	plan.Embed = []string{ours, filepath.Join(fixture, "model_quantized.onnx")}
	plan.Rerank = quantizeInto(t, filepath.Join(rerankDir, "model.onnx"), "model.onnx")
	linkSidecars(t, rerankDir, filepath.Dir(plan.Rerank))
	writeJSONFile(t, filepath.Join(dir, "plan.json"), plan)

	host := runCPUClass(t, plan)
	e := openONNX(t)
	fp := embedONNXWith(t, e, filepath.Join(fixture, "model.onnx"), plan.Seqs)
	fpScores := rerankWith(t, e, filepath.Join(rerankDir, "model.onnx"), plan.Groups)

	cmd := exec.Command(qemu, "-cpu", testenv.EmulatedCPU, os.Args[0], "-test.run", "^TestONNXQuantizedOnCPUChild$", "-test.v")
	cmd.Env = append(os.Environ(), cpuClassEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the emulated run (%s -cpu %s): %v\n%s", qemu, testenv.EmulatedCPU, err, tail(out))
	}
	var emu cpuClassRun
	readJSONFile(t, filepath.Join(dir, "emulated.json"), &emu)
	if emu.Class != "avx2" {
		t.Fatalf("the emulated CPU is of class %q; want avx2 (AVX2, no AVX-512, VNNI or AMX)", emu.Class)
	}
	t.Logf("host CPU class %s, emulated %s", host.Class, emu.Class)

	worstHost, worstEmu, same := 1.0, 1.0, 1.0
	for i := range plan.Seqs {
		worstHost = min(worstHost, testenv.Cosine(host.Vectors[ours][i], fp[i]))
		worstEmu = min(worstEmu, testenv.Cosine(emu.Vectors[ours][i], fp[i]))
		same = min(same, testenv.Cosine(emu.Vectors[ours][i], host.Vectors[ours][i]))
	}
	t.Logf("synapse int8, lowest cosine to fp32 over %d texts: %s %.5f, %s %.5f; to each other %.7f", len(plan.Seqs), host.Class, worstHost, emu.Class, worstEmu, same)
	if worstEmu < 0.99 || worstHost < 0.99 {
		t.Errorf("synapse int8 vs fp32: lowest cosine %.5f on %s, %.5f on %s; want ≥ 0.99 on both", worstHost, host.Class, worstEmu, emu.Class)
	}
	if same < 0.999999 {
		t.Errorf("synapse int8 on %s against %s: lowest cosine %.7f; want the same vectors (≥ 0.999999): the graph's result depends on the CPU's kernels", emu.Class, host.Class, same)
	}

	control := plan.Embed[1]
	moved := 1.0
	for i := range plan.Seqs {
		moved = min(moved, testenv.Cosine(emu.Vectors[control][i], host.Vectors[control][i]))
	}
	t.Logf("control, the fixture's model_quantized.onnx (8-bit weights): lowest cosine %s against %s %.7f", emu.Class, host.Class, moved)
	if host.Class != emu.Class && moved >= 0.999999 {
		t.Errorf("control: the fixture's 8-bit graph gives the same vectors on %s and %s (lowest cosine %.7f); the emulated CPU did not run the saturating kernels, so this test shows nothing", emu.Class, host.Class, moved)
	}

	// A score is one token's state through the classifier, with no pooling
	// to average over: a float rounding that differs between the CPUs'
	// float kernels can move an activation across a quantization step, so
	// the scores agree to within a small part of what int8 itself costs.
	apart, cost := 0.0, 0.0
	for i := range host.Scores {
		apart = max(apart, math.Abs(float64(emu.Scores[i]-host.Scores[i])))
		cost = max(cost, math.Abs(float64(host.Scores[i]-fpScores[i])))
	}
	hostCorr, emuCorr, between := pearson(host.Scores, fpScores), pearson(emu.Scores, fpScores), pearson(emu.Scores, host.Scores)
	t.Logf("int8 cross-encoder over %d pairs: score correlation to fp32 %s %.5f, %s %.5f, to each other %.7f; largest difference between the CPUs %.3g, to fp32 %.3g",
		len(host.Scores), host.Class, hostCorr, emu.Class, emuCorr, between, apart, cost)
	if hostCorr < 0.99 || emuCorr < 0.99 || between < 0.9999 || apart > cost/10 {
		t.Errorf("int8 cross-encoder: correlation to fp32 %.5f / %.5f, to each other %.7f, scores apart by %.3g against int8's own %.3g; want ≥ 0.99 on both CPUs, ≥ 0.9999 between them, and at most a tenth of int8's difference apart",
			hostCorr, emuCorr, between, apart, cost)
	}
}

// TestONNXQuantizedOnCPUChild is TestONNXQuantizedCPUClasses's run on the
// emulated CPU; alone it does nothing.
func TestONNXQuantizedOnCPUChild(t *testing.T) {
	dir := os.Getenv(cpuClassEnv)
	if dir == "" {
		t.Skip("helper: runs only as TestONNXQuantizedCPUClasses's child on an emulated CPU")
	}
	var plan cpuClassPlan
	readJSONFile(t, filepath.Join(dir, "plan.json"), &plan)
	writeJSONFile(t, filepath.Join(dir, "emulated.json"), runCPUClass(t, plan))
}

// runCPUClass computes the plan's int8 vectors and scores on this CPU.
func runCPUClass(t *testing.T, plan cpuClassPlan) cpuClassRun {
	e := openONNX(t)
	run := cpuClassRun{Class: testenv.CPUClass(), Vectors: map[string][][]float32{}}
	for _, g := range plan.Embed {
		run.Vectors[g] = embedONNXWith(t, e, g, plan.Seqs)
	}
	run.Scores = rerankWith(t, e, plan.Rerank, plan.Groups)
	return run
}

// rerankFixtureGroups are the rerank reference's pairs as groups.
func rerankFixtureGroups(t *testing.T) []RerankGroup {
	var ref rerankRef
	readJSON(t, &ref, "reference", "rerank.json")
	return rerankRefGroups(t, ref)
}

// rerankRefGroups groups ref's pairs by query, in order.
func rerankRefGroups(t *testing.T, ref rerankRef) []RerankGroup {
	var groups []RerankGroup
	for _, it := range ref.Items {
		q, d := splitPair(t, it.IDs)
		if len(groups) == 0 || !slices.Equal(groups[len(groups)-1].Query, q) {
			groups = append(groups, RerankGroup{Query: q})
		}
		g := &groups[len(groups)-1]
		g.Candidates = append(g.Candidates, d)
	}
	return groups
}

// rerankWith loads the cross-encoder at path and scores groups.
func rerankWith(t *testing.T, e *ONNX, path string, groups []RerankGroup) []float32 {
	t.Helper()
	info, err := e.Load(context.Background(), onnxLoad(t, path, rankConfig))
	if err != nil {
		t.Fatalf("Load %s: %v", path, err)
	}
	scores, err := e.Rerank(context.Background(), info.Ref, groups)
	if err != nil {
		t.Fatalf("Rerank %s: %v", path, err)
	}
	return scores
}

// linkSidecars links every file of the model directory src but its graphs
// into dst.
func linkSidecars(t *testing.T, src, dst string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		if strings.HasSuffix(ent.Name(), ".onnx") {
			continue
		}
		if err := os.Symlink(filepath.Join(src, ent.Name()), filepath.Join(dst, ent.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// pearson is the correlation of a and b.
func pearson(a, b []float32) float64 {
	var ma, mb float64
	for i := range a {
		ma += float64(a[i])
		mb += float64(b[i])
	}
	ma /= float64(len(a))
	mb /= float64(len(b))
	var sab, saa, sbb float64
	for i := range a {
		x, y := float64(a[i])-ma, float64(b[i])-mb
		sab += x * y
		saa += x * x
		sbb += y * y
	}
	return sab / math.Sqrt(saa*sbb)
}

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err == nil {
		err = os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// tail is the last 4 KB of a child's output.
func tail(b []byte) []byte {
	if len(b) > 4096 {
		return b[len(b)-4096:]
	}
	return b
}
