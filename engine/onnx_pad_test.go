//go:build cgo

package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/wire"
)

func TestONNXRunsPadded(t *testing.T) {
	// lengths: 0→3 1→5 2→3 3→1 4→8 5→3 6→5
	for _, tc := range []struct {
		name        string
		pad, tokens int
		seqMax      int
		batchOps    []string
		want        [][]int
	}{
		{"pad 0 is equal lengths", 0, 100, 64, nil, [][]int{{3}, {0, 2, 5}, {1, 6}, {4}}},
		{"pad 2", 2, 100, 64, nil, [][]int{{3, 0, 2, 5}, {1, 6}, {4}}},
		{"pad 3", 3, 100, 64, nil, [][]int{{3, 0, 2, 5}, {1, 6, 4}}},
		{"tokens counted at the longest", 8, 12, 64, nil, [][]int{{3, 0, 2, 5}, {1, 6}, {4}}},
		{"seq max", 8, 100, 3, nil, [][]int{{3, 0, 2}, {5, 1, 6}, {4}}},
		{"batch-dependent graph: one per run", 8, 100, 64, []string{"DynamicQuantizeLinear"}, [][]int{{3}, {0}, {2}, {5}, {1}, {6}, {4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &onnxModel{cfg: onnxConfig{tokensPerRun: tc.tokens, seqMax: tc.seqMax}, plan: graphPlan{batchOps: tc.batchOps}}
			got := m.runs(testSeqs, tc.pad)
			if len(got) != len(tc.want) {
				t.Fatalf("runs: got %v; want %v", got, tc.want)
			}
			for i := range tc.want {
				if !equalInts(got[i], tc.want[i]) {
					t.Fatalf("runs: got %v; want %v", got, tc.want)
				}
			}
		})
	}
}

// padSeqs have near-equal lengths (3 to 10 tokens), so that pad 8 puts
// them all in one run; each length once or twice.
var padSeqs = [][]int32{
	{2, 5, 3}, {2, 6, 7, 8, 3}, {2, 9, 10, 3}, {2, 10, 11, 12, 13, 14, 15, 3}, {2, 7, 6, 9, 3},
	{2, 16, 17, 18, 19, 20, 21, 22, 23, 3}, {2, 5, 5, 3}, {2, 11, 3},
}

// embedVecs loads path on e and embeds seqs with pooling pool (normalized),
// one vector per sequence; it also returns the runs the engine formed.
func embedVecs(t *testing.T, e *ONNX, path, pool string, seqs [][]int32) ([][]float32, [][]int, *onnxModel) {
	t.Helper()
	ctx := context.Background()
	info, err := e.Load(ctx, onnxLoad(t, path, wire.RuntimeConfig{Threads: 1}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	vecs, dims, err := e.Embed(ctx, info.Ref, pool, true, seqs)
	if err != nil {
		t.Fatalf("Embed %q: %v", pool, err)
	}
	out := make([][]float32, len(seqs))
	for i := range out {
		out[i] = vecs[i*dims : (i+1)*dims]
	}
	m := e.models[info.Ref]
	pad := m.cfg.pad
	if pool == PoolingDefault && m.useGraph && !m.padGraph {
		pad = 0
	}
	return out, m.runs(seqs, pad), m
}

func mixesLengths(runs [][]int, seqs [][]int32) bool {
	for _, r := range runs {
		if len(seqs[r[0]]) != len(seqs[r[len(r)-1]]) {
			return true
		}
	}
	return false
}

// Padded runs give the vectors unpadded runs give: mean pooling leaves the
// padding out, cls and last take the real first and last tokens, and the
// graph's own (masked) sentence_embedding is used padded after the probe.
func TestONNXEmbedPadded(t *testing.T) {
	plain := openONNX(t)
	padded, err := OpenONNX(ONNXOptions{Lib: testenv.ORTLib(t), PadTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { padded.Close() })
	encoders := map[string]onnxtest.Encoder{
		"both outputs": onnxtest.Tiny(),
		"hidden only":  func() onnxtest.Encoder { x := onnxtest.Tiny(); x.Pooled = false; return x }(),
		"dense layers": func() onnxtest.Encoder { x := onnxtest.Tiny(); x.Hidden, x.Layers = 32, 2; return x }(),
	}
	for name, enc := range encoders {
		t.Run(name, func(t *testing.T) {
			dir, enc := writeEncoder(t, enc)
			for _, pool := range []string{"", PoolingMean, PoolingCLS, PoolingLast} {
				want, wantRuns, _ := embedVecs(t, plain, dir, pool, padSeqs)
				got, runs, m := embedVecs(t, padded, dir, pool, padSeqs)
				if mixesLengths(wantRuns, padSeqs) {
					t.Fatalf("pooling %q: unpadded runs %v mix lengths", pool, wantRuns)
				}
				if !mixesLengths(runs, padSeqs) || len(runs) != 1 {
					t.Fatalf("pooling %q: padded runs %v; want one run of every length (padGraph %v)", pool, runs, m.padGraph)
				}
				for i, s := range padSeqs {
					if c := testenv.Cosine(got[i], want[i]); c < 0.99999 {
						t.Errorf("pooling %q sequence %d: padded vs unpadded cosine %.7f; want ≥ 0.99999", pool, i, c)
					}
					if d := maxDiff(got[i], expected(enc, s, pool, true)); d > 1e-5 {
						t.Errorf("pooling %q sequence %d: max |Δ| %g to the expected vector", pool, i, d)
					}
				}
			}
		})
	}
}

// On a real BERT (attention over the sequence), padded runs give the
// vectors unpadded runs give: the mask keeps the padding out of attention
// and of the graph's pooling.
func TestONNXEmbedPaddedFixture(t *testing.T) {
	dir := testenv.Fixture(t, "models", "ref-bert-embed-onnx")
	seqs := fixtureSeqs(t)
	plain := openONNX(t)
	padded, err := OpenONNX(ONNXOptions{Lib: testenv.ORTLib(t), PadTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { padded.Close() })
	for _, pool := range []string{"", PoolingMean, PoolingCLS} {
		want, _, _ := embedVecs(t, plain, dir, pool, seqs)
		got, runs, m := embedVecs(t, padded, dir, pool, seqs)
		if !mixesLengths(runs, seqs) {
			t.Fatalf("pooling %q: padded runs %v do not mix lengths (padGraph %v)", pool, runs, m.padGraph)
		}
		worst := 1.0
		for i := range seqs {
			worst = min(worst, testenv.Cosine(got[i], want[i]))
		}
		if worst < 0.99999 {
			t.Errorf("pooling %q: padded vs unpadded lowest cosine %.7f; want ≥ 0.99999", pool, worst)
		}
		t.Logf("pooling %q: %d texts in %d runs, lowest cosine padded vs unpadded %.8f", pool, len(seqs), len(runs), worst)
	}
}

// A batch-dependent (dynamically quantized) graph is never padded: each
// sequence runs alone, and its vectors are bit-equal with and without the
// option.
func TestONNXPaddedQuantizedRunsAlone(t *testing.T) {
	enc := onnxtest.Tiny()
	enc.Hidden, enc.Layers = 32, 2
	dir, _ := writeEncoder(t, enc)
	q := quantizeInto(t, filepath.Join(dir, "model.onnx"), "model.onnx")
	besideModel(t, dir, q)
	plain := openONNX(t)
	padded, err := OpenONNX(ONNXOptions{Lib: testenv.ORTLib(t), PadTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { padded.Close() })
	want, _, _ := embedVecs(t, plain, q, PoolingMean, padSeqs)
	got, runs, m := embedVecs(t, padded, q, PoolingMean, padSeqs)
	if len(m.plan.batchOps) == 0 || m.cfg.pad != 0 {
		t.Fatalf("batch ops %v, pad %d; want a batch-dependent graph with padding off", m.plan.batchOps, m.cfg.pad)
	}
	if len(runs) != len(padSeqs) {
		t.Fatalf("runs %v; want one sequence per run", runs)
	}
	for i := range padSeqs {
		if d := maxDiff(got[i], want[i]); d != 0 {
			t.Errorf("sequence %d: max |Δ| %g with PadTokens 8; want bit-equal", i, d)
		}
	}
}

func TestOpenONNXPadTokensInvalid(t *testing.T) {
	if _, err := OpenONNX(ONNXOptions{Lib: testenv.ORTLib(t), PadTokens: -1}); err == nil {
		t.Fatal("PadTokens -1: got no error")
	}
}
