//go:build cgo

package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/synapse-embed/synapse/engine/testenv"
	tk "github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/model/tokenize/parity"
	"github.com/synapse-embed/synapse/wire"
)

// BenchmarkONNXvsLlama embeds the same SciFact documents with the same
// MiniLM-L6-shaped weights through the engines a worker runs (llama.cpp F16
// and Q8_0 GGUFs; ONNX Runtime fp32 and dynamic-int8 graphs, with equal-length
// batching, as the engine runs by default, and one sequence per run) and with ONNX Runtime called directly
// (the raw baseline: one pre-built sequence per run, no pooling), in rounds
// that run every contender back to back. See docs/onnx-bench.md for how the
// models are made (SYNAPSE_BENCH_MINILM names their directory) and the results.
//
//	SYNAPSE_BENCH_MINILM=DIR go test ./engine -run '^$' -bench ONNXvsLlama -benchtime 1x
//
// SYNAPSE_BENCH_THREADS (default 2), SYNAPSE_BENCH_ROUNDS (default 3) and
// SYNAPSE_BENCH_DOCS (default 300) tune it. Each workload reports, per
// contender, the median tokens/s over the rounds and the tokens per CPU
// second of this process (less sensitive to other processes' load).
func BenchmarkONNXvsLlama(b *testing.B) {
	dir, workloads := sciFactWorkloads(b)
	for _, wl := range workloads {
		seqs := wl.seqs
		b.Run(wl.name, func(b *testing.B) {
			cs := contenders(b, dir, wl.window+2)
			for b.Loop() {
				runRounds(b, cs, seqs, wl.window+2)
			}
		})
	}
}

// workload is the SciFact documents cut one way into sequences.
type workload struct {
	name   string
	window int // content tokens per sequence
	seqs   [][]int32
}

// sciFactWorkloads tokenizes SYNAPSE_BENCH_DOCS SciFact documents (default
// 300) with the MiniLM-L6-shaped model in SYNAPSE_BENCH_MINILM (the
// benchmark is skipped without it) and cuts them as the ONNX benchmarks
// run them: each document's first 510 tokens (doc512), and all of each
// document in 126-token chunks (chunk128).
func sciFactWorkloads(b *testing.B) (dir string, wls []workload) {
	dir = os.Getenv("SYNAPSE_BENCH_MINILM")
	if dir == "" {
		b.Skip("SYNAPSE_BENCH_MINILM is not set (see docs/onnx-bench.md)")
	}
	docs, err := parity.Corpus(testenv.Fixture(b, "corpora", "scifact", "corpus.jsonl"), envInt("SYNAPSE_BENCH_DOCS", 300))
	if err != nil {
		b.Fatal(err)
	}
	ids := benchTokenize(b, dir, docs)
	return dir, []workload{
		{"doc512", 510, windows(ids, 510, false)},
		{"chunk128", 126, windows(ids, 126, true)},
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// benchTokenize tokenizes the documents with the GGUF's tokenizer and with
// tokenizer.json, and insists that they agree.
func benchTokenize(b *testing.B, dir string, docs []string) [][]int32 {
	g, err := tk.Load(filepath.Join(dir, "minilm-f16.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	h, err := tk.LoadHF(filepath.Join(dir, "onnx", "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	out := make([][]int32, len(docs))
	for i, d := range docs {
		out[i] = g.Tokenize(d, tk.Options{}).IDs()
		if hf := h.Tokenize(d, tk.Options{}).IDs(); !slices.Equal(out[i], hf) {
			b.Fatalf("document %d: GGUF and tokenizer.json ids differ", i)
		}
	}
	return out
}

// windows cuts each document into [CLS] + window + [SEP] sequences: the
// first window only, or all of them.
func windows(docs [][]int32, window int, all bool) [][]int32 {
	var out [][]int32
	for _, d := range docs {
		for start := 0; start == 0 || all && start < len(d); start += window {
			body := d[start:min(len(d), start+window)]
			out = append(out, append(append([]int32{101}, body...), 102))
		}
	}
	return out
}

// contender embeds sequences: run gets request i's sequences; prepare, if
// set, is given all requests first, untimed.
type contender struct {
	name    string
	run     func(i int, seqs [][]int32) error
	prepare func(reqs [][][]int32)
}

func contenders(b *testing.B, dir string, n int) []contender {
	threads := envInt("SYNAPSE_BENCH_THREADS", 2)
	ctx := context.Background()
	llama, onnxEng := testEngine(b), openONNX(b)
	rc := wire.RuntimeConfig{Embeddings: true, ContextSize: n, BatchSize: n, UBatchSize: n, Threads: threads}
	load := func(e Engine, path, format string, rc wire.RuntimeConfig) func(int, [][]int32) error {
		req := LoadRequest{Path: path, Format: format, Config: rc}
		if format == FormatONNX {
			req = onnxLoad(b, path, rc)
		} else {
			req.Digest = fileDigest(b, path)
		}
		info, err := e.Load(ctx, req)
		if err != nil {
			b.Fatalf("load %s: %v", path, err)
		}
		return func(_ int, seqs [][]int32) error { _, _, err := e.Embed(ctx, info.Ref, "", true, seqs); return err }
	}
	fp32, int8 := filepath.Join(dir, "onnx", "model.onnx"), filepath.Join(dir, "onnx", "model_quantized.onnx")
	one := rc
	one.SeqMax = 1
	return []contender{
		{name: "llama-f16", run: load(llama, filepath.Join(dir, "minilm-f16.gguf"), FormatGGUF, rc)},
		{name: "llama-q8_0", run: load(llama, filepath.Join(dir, "minilm-q8_0.gguf"), FormatGGUF, rc)},
		{name: "onnx-fp32", run: load(onnxEng, fp32, FormatONNX, rc)},
		{name: "onnx-fp32-one", run: load(onnxEng, fp32, FormatONNX, one)},
		{name: "onnx-int8", run: load(onnxEng, int8, FormatONNX, rc)},
		rawORT(b, "raw-ort-fp32", fp32, threads),
		rawORT(b, "raw-ort-int8", int8, threads),
	}
}

// rawORT runs a graph directly: one session with last_hidden_state as its
// only output, each sequence one run, its input and output tensors built
// before the timing starts.
func rawORT(b *testing.B, name, path string, threads int) contender {
	so, err := ort.NewSessionOptions()
	if err != nil {
		b.Fatal(err)
	}
	defer so.Destroy()
	so.SetIntraOpNumThreads(threads)
	so.SetInterOpNumThreads(1)
	so.SetExecutionMode(ort.ExecutionModeSequential)
	sess, err := ort.NewDynamicAdvancedSession(path, []string{"input_ids", "attention_mask", "token_type_ids"}, []string{"last_hidden_state"}, so)
	if err != nil {
		b.Fatal(err)
	}
	type run struct{ in, out []ort.Value }
	var runs [][]run // by request, then sequence
	b.Cleanup(func() {
		for _, rs := range runs {
			for _, r := range rs {
				destroyAll(r.in)
				destroyAll(r.out)
			}
		}
		sess.Destroy()
	})
	prepare := func(reqs [][][]int32) {
		if runs != nil {
			return // the same requests again (b.Loop's next iteration)
		}
		for _, seqs := range reqs {
			rs := make([]run, len(seqs))
			for i, s := range seqs {
				shape := ort.NewShape(1, int64(len(s)))
				ids, mask, types := make([]int64, len(s)), make([]int64, len(s)), make([]int64, len(s))
				for k, t := range s {
					ids[k], mask[k] = int64(t), 1
				}
				a, _ := ort.NewTensor(shape, ids)
				m, _ := ort.NewTensor(shape, mask)
				ty, _ := ort.NewTensor(shape, types)
				o, _ := ort.NewEmptyTensor[float32](ort.NewShape(1, int64(len(s)), 384))
				rs[i] = run{[]ort.Value{a, m, ty}, []ort.Value{o}}
			}
			runs = append(runs, rs)
		}
	}
	return contender{name: name, prepare: prepare, run: func(i int, _ [][]int32) error {
		for _, r := range runs[i] {
			if err := sess.Run(r.in, r.out); err != nil {
				return err
			}
		}
		return nil
	}}
}

// requests packs sequences in order into requests of at most 4 × n tokens,
// as the job does by default.
func requests(seqs [][]int32, n int) [][][]int32 {
	var out [][][]int32
	var cur [][]int32
	tokens := 0
	for _, s := range seqs {
		if tokens+len(s) > 4*n && len(cur) > 0 {
			out, cur, tokens = append(out, cur), nil, 0
		}
		cur, tokens = append(cur, s), tokens+len(s)
	}
	return append(out, cur)
}

// runRounds runs every contender over all requests, rounds times, in an
// order rotated each round, and reports the medians.
func runRounds(b *testing.B, cs []contender, seqs [][]int32, n int) {
	reqs := requests(seqs, n)
	total := 0
	for _, s := range seqs {
		total += len(s)
	}
	rounds := envInt("SYNAPSE_BENCH_ROUNDS", 3)
	for _, c := range cs { // warm up: first runs of a shape pay for kernel choices and arena growth
		if c.prepare != nil {
			c.prepare(reqs)
		}
		for i, q := range reqs[:min(len(reqs), 4)] {
			if err := c.run(i, q); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
		}
	}
	wall, cpu := measureRounds(b, cs, reqs, total, rounds)
	var lines []string
	for _, c := range cs {
		b.ReportMetric(median(wall[c.name]), c.name+"-tok/s")
		lines = append(lines, fmt.Sprintf("%-16s tokens/s %s  tokens/cpu-s median %.0f", c.name, spread(wall[c.name]), median(cpu[c.name])))
	}
	b.Logf("%d sequences, %d tokens, %d requests, %d rounds (ended %s):\n%s", len(seqs), total, len(reqs), rounds,
		time.Now().Format(time.RFC3339), strings.Join(lines, "\n"))
	b.ReportMetric(median(wall["onnx-fp32"])/median(wall["llama-f16"]), "onnx-fp32/llama-f16")
	b.ReportMetric(median(wall["onnx-fp32"])/median(wall["raw-ort-fp32"]), "onnx-fp32/raw")
	b.ReportMetric(median(wall["onnx-int8"])/median(wall["raw-ort-int8"]), "onnx-int8/raw")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[len(s)/2]
}

// spread shows the median and the range of the rounds.
func spread(v []float64) string {
	s := slices.Clone(v)
	sort.Float64s(s)
	return fmt.Sprintf("median %6.0f (%6.0f–%6.0f)", s[len(s)/2], s[0], s[len(s)-1])
}

// measureRounds runs every contender over all requests once a round, in
// an order rotated each round, and returns each one's tokens per second
// and per CPU-second of this process, a figure a round.
func measureRounds(b *testing.B, cs []contender, reqs [][][]int32, total, rounds int) (wall, cpu map[string][]float64) {
	wall, cpu = map[string][]float64{}, map[string][]float64{}
	for r := range rounds {
		for k := range cs {
			c := cs[(k+r)%len(cs)]
			var m cost
			m.measure(b, 0, func() {
				for i, q := range reqs {
					if err := c.run(i, q); err != nil {
						b.Fatalf("%s: %v", c.name, err)
					}
				}
			})
			wall[c.name] = append(wall[c.name], float64(total)/m.wall.Seconds())
			cpu[c.name] = append(cpu[c.name], float64(total)/m.cpu.Seconds())
		}
	}
	return wall, cpu
}
