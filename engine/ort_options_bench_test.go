//go:build cgo

package engine

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ort "github.com/yalue/onnxruntime_go"
)

// BenchmarkORTOptions measures, on ONNX Runtime called through the binding
// with the MiniLM-L6-shaped fp32 graph (docs/onnx-bench.md says how it is
// made; SYNAPSE_BENCH_MINILM names its directory), what the engine's choices
// give: the graph optimization level, intra-op spinning on and off at 1 and
// 2 threads, and how the sequences of a request sorted by length (as the
// packer's windows are) share runs: one per run, equal lengths together (the
// engine's rule), or near-equal lengths padded by up to SYNAPSE_BENCH_PAD
// tokens (default 8) with the attention mask zero over the padding. Every
// contender runs back to back in each round, in a rotated order.
//
//	SYNAPSE_BENCH_MINILM=DIR go test ./engine -run '^$' -bench ORTOptions -benchtime 1x
func BenchmarkORTOptions(b *testing.B) {
	dir, workloads := sciFactWorkloads(b)
	openONNX(b) // initializes ONNX Runtime
	graph := filepath.Join(dir, "onnx", "model.onnx")
	pad := envInt("SYNAPSE_BENCH_PAD", 8)
	for _, wl := range workloads {
		seqs := wl.seqs
		b.Run(wl.name, func(b *testing.B) {
			reqs := sortedRequests(seqs, wl.window+2)
			var cs []ortContender
			for _, lv := range []ort.GraphOptimizationLevel{ort.GraphOptimizationLevelDisableAll, ort.GraphOptimizationLevelEnableBasic,
				ort.GraphOptimizationLevelEnableExtended, ort.GraphOptimizationLevelEnableAll} {
				cs = append(cs, newORTContender(b, graph, fmt.Sprintf("level-%d/t1", lv), lv, 1, true, 0))
			}
			for _, th := range []int{1, 2} {
				for _, spin := range []bool{true, false} {
					cs = append(cs, newORTContender(b, graph, fmt.Sprintf("spin-%v/t%d", spin, th), ort.GraphOptimizationLevelEnableAll, th, spin, 0))
				}
			}
			cs = append(cs,
				newORTContender(b, graph, "one/t1", ort.GraphOptimizationLevelEnableAll, 1, true, -1),
				newORTContender(b, graph, fmt.Sprintf("pad%d/t1", pad), ort.GraphOptimizationLevelEnableAll, 1, true, pad))
			for b.Loop() {
				runORTRounds(b, cs, reqs)
			}
		})
	}
}

// sortedRequests sorts windows of 256 sequences by length (stable, as the
// packer does) and cuts them into requests of at most 4 × n tokens.
func sortedRequests(seqs [][]int32, n int) [][][]int32 {
	var sorted [][]int32
	for start := 0; start < len(seqs); start += 256 {
		w := slices.Clone(seqs[start:min(len(seqs), start+256)])
		slices.SortStableFunc(w, func(a, b []int32) int { return len(a) - len(b) })
		sorted = append(sorted, w...)
	}
	return requests(sorted, n)
}

// ortContender is one session and one rule for sharing runs.
type ortContender struct {
	name string
	sess *ort.DynamicAdvancedSession
	// pad: -1 one sequence per run, 0 equal lengths share a run, k > 0
	// lengths within k tokens share a run, padded to the longest.
	pad int
}

func newORTContender(b *testing.B, graph, name string, level ort.GraphOptimizationLevel, threads int, spin bool, pad int) ortContender {
	so, err := ort.NewSessionOptions()
	if err != nil {
		b.Fatal(err)
	}
	defer so.Destroy()
	spinning := "1"
	if !spin {
		spinning = "0"
	}
	for _, err := range []error{so.SetIntraOpNumThreads(threads), so.SetInterOpNumThreads(1), so.SetExecutionMode(ort.ExecutionModeSequential),
		so.SetGraphOptimizationLevel(level), so.AddSessionConfigEntry("session.intra_op.allow_spinning", spinning)} {
		if err != nil {
			b.Fatal(err)
		}
	}
	sess, err := ort.NewDynamicAdvancedSession(graph, []string{"input_ids", "attention_mask", "token_type_ids"}, []string{"last_hidden_state"}, so)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sess.Destroy() })
	return ortContender{name: name, sess: sess, pad: pad}
}

// run embeds one request's sequences (sorted by length) as the rule says.
func (c ortContender) run(seqs [][]int32) error {
	for start := 0; start < len(seqs); {
		end := start + 1
		for c.pad >= 0 && end < len(seqs) && len(seqs[end])-len(seqs[start]) <= c.pad && (end-start+1)*len(seqs[end]) <= onnxRunTokens {
			end++
		}
		if err := c.runPadded(seqs[start:end]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// runPadded runs seqs in one run, padded to the longest.
func (c ortContender) runPadded(seqs [][]int32) error {
	l := len(seqs[len(seqs)-1])
	n := len(seqs)
	ids, mask, types := make([]int64, n*l), make([]int64, n*l), make([]int64, n*l)
	for i, s := range seqs {
		for j, t := range s {
			ids[i*l+j], mask[i*l+j] = int64(t), 1
		}
	}
	shape := ort.NewShape(int64(n), int64(l))
	a, _ := ort.NewTensor(shape, ids)
	m, _ := ort.NewTensor(shape, mask)
	ty, _ := ort.NewTensor(shape, types)
	o, _ := ort.NewEmptyTensor[float32](ort.NewShape(int64(n), int64(l), 384))
	defer destroyAll([]ort.Value{a, m, ty, o})
	return c.sess.Run([]ort.Value{a, m, ty}, []ort.Value{o})
}

// runORTRounds runs every contender over all requests in rotated order.
func runORTRounds(b *testing.B, cs []ortContender, reqs [][][]int32) {
	total := 0
	for _, q := range reqs {
		for _, s := range q {
			total += len(s)
		}
	}
	for _, c := range cs { // warm up
		for _, q := range reqs[:min(len(reqs), 4)] {
			if err := c.run(q); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
		}
	}
	rounds := envInt("SYNAPSE_BENCH_ROUNDS", 3)
	wall := map[string][]float64{}
	cpu := map[string][]float64{}
	for r := range rounds {
		for k := range cs {
			c := cs[(k+r)%len(cs)]
			var m cost
			m.measure(b, 0, func() {
				for _, q := range reqs {
					if err := c.run(q); err != nil {
						b.Fatalf("%s: %v", c.name, err)
					}
				}
			})
			wall[c.name] = append(wall[c.name], float64(total)/m.wall.Seconds())
			cpu[c.name] = append(cpu[c.name], float64(total)/m.cpu.Seconds())
		}
	}
	var lines []string
	for _, c := range cs {
		lines = append(lines, fmt.Sprintf("%-14s tokens/s %s  tokens/cpu-s median %.0f", c.name, spread(wall[c.name]), median(cpu[c.name])))
	}
	b.Logf("%d requests, %d tokens, %d rounds (ended %s):\n%s", len(reqs), total, rounds, time.Now().Format(time.RFC3339), strings.Join(lines, "\n"))
}
