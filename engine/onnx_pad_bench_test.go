//go:build cgo

package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/wire"
)

// BenchmarkONNXPad measures ONNXOptions.PadTokens: engine.ONNX.Embed on the
// MiniLM-L6-shaped fp32 graph (docs/onnx-bench.md says how it is made;
// SYNAPSE_BENCH_MINILM names its directory) with pad 0 (equal lengths share
// a run: the default), 2, 4, 8 and 16 tokens, over SciFact sequences as the
// packer hands them over (windows of 256 sorted by length, requests of 4 ×
// the sequence length in tokens). The contenders run back to back in each
// round, in an order rotated each round; the load average is logged before
// and after.
//
//	SYNAPSE_BENCH_MINILM=DIR go test ./engine -run '^$' -bench ONNXPad -benchtime 1x
func BenchmarkONNXPad(b *testing.B) {
	dir, workloads := sciFactWorkloads(b)
	graph := filepath.Join(dir, "onnx", "model.onnx")
	threads := envInt("SYNAPSE_BENCH_THREADS", 1)
	for _, wl := range workloads {
		seqs := wl.seqs
		b.Run(wl.name, func(b *testing.B) {
			reqs := sortedRequests(seqs, wl.window+2)
			var cs []contender
			for _, pad := range []int{0, 2, 4, 8, 16} {
				cs = append(cs, padContender(b, graph, pad, wl.window+2, threads, reqs))
			}
			for b.Loop() {
				benchLog(b, "load average before: %s", loadavg(b))
				runPadRounds(b, cs, reqs)
				benchLog(b, "load average after: %s", loadavg(b))
			}
		})
	}
}

// padContender loads graph on an engine of its own with PadTokens pad and
// logs how the requests fall into runs.
func padContender(b *testing.B, graph string, pad, n, threads int, reqs [][][]int32) contender {
	e, err := OpenONNX(ONNXOptions{Lib: testenv.ORTLib(b), PadTokens: pad})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	ctx := context.Background()
	info, err := e.Load(ctx, onnxLoad(b, graph, wire.RuntimeConfig{ContextSize: n, BatchSize: n, UBatchSize: n, Threads: threads}))
	if err != nil {
		b.Fatal(err)
	}
	m := e.models[info.Ref]
	p := m.cfg.pad
	if m.useGraph && !m.padGraph {
		p = 0
	}
	runs, real, padded := 0, 0, 0
	for _, q := range reqs {
		for _, r := range m.runs(q, p) {
			runs++
			l := len(q[r[len(r)-1]])
			for _, s := range r {
				real += len(q[s])
				padded += l - len(q[s])
			}
		}
	}
	name := fmt.Sprintf("pad%d", pad)
	benchLog(b, "%s: %d runs for %d sequences, %d padding tokens (%.2f%% of %d real); graph pooling padded: %v",
		name, runs, countSeqs(reqs), padded, 100*float64(padded)/float64(real), real, m.padGraph)
	return contender{name: name, run: func(_ int, seqs [][]int32) error {
		_, _, err := e.Embed(ctx, info.Ref, "", true, seqs)
		return err
	}}
}

func countSeqs(reqs [][][]int32) int {
	n := 0
	for _, q := range reqs {
		n += len(q)
	}
	return n
}

func loadavg(b *testing.B) string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}

// runPadRounds runs every contender over all requests, rounds times, in an
// order rotated each round, and logs tokens/s (median and range) and tokens
// per CPU second of this process.
func runPadRounds(b *testing.B, cs []contender, reqs [][][]int32) {
	total := 0
	for _, q := range reqs {
		for _, s := range q {
			total += len(s)
		}
	}
	for _, c := range cs { // warm up: kernel choices and arena growth on first shapes
		for i, q := range reqs[:min(len(reqs), 4)] {
			if err := c.run(i, q); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
		}
	}
	rounds := envInt("SYNAPSE_BENCH_ROUNDS", 3)
	wall, cpu := measureRounds(b, cs, reqs, total, rounds)
	var lines []string
	for _, c := range cs {
		b.ReportMetric(median(wall[c.name]), c.name+"-tok/s")
		lines = append(lines, fmt.Sprintf("%-6s tokens/s %s  tokens/cpu-s %s", c.name, spread(wall[c.name]), spread(cpu[c.name])))
	}
	benchLog(b, "%d requests, %d tokens, %d rounds (ended %s):\n%s", len(reqs), total, rounds, time.Now().Format(time.RFC3339), strings.Join(lines, "\n"))
}

// benchLog logs to the benchmark and to stderr, which go test does not cut.
func benchLog(b *testing.B, format string, args ...any) {
	b.Helper()
	b.Logf(format, args...)
	fmt.Fprintf(os.Stderr, b.Name()+": "+format+"\n", args...)
}
