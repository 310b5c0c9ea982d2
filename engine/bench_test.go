package engine

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/model/testmodels"
	"github.com/synapse-embed/synapse/wire"
)

// Embedding throughput on a MiniLM-L6-shaped model (6 layers, 384 wide, 12
// heads, 1536 FFN, F16, bert-bge vocabulary; random weights from
// gguf/modelgen), in-process and through a real `synapse worker` over the
// protocol, on identical batches:
//
//	go test ./engine -run '^$' -bench EmbedProtocol -benchtime 10x
//
// SYNAPSE_BENCH_THREADS sets n_threads (default 1: on a shared 2-core
// machine llama.cpp's spinning thread pool is unstable under load).

// TestMain removes the benchmark model written to a temporary directory.
func TestMain(m *testing.M) {
	code := m.Run()
	testmodels.RemoveAll()
	os.Exit(code)
}

func benchConfig() wire.RuntimeConfig {
	threads := 1
	if s := os.Getenv("SYNAPSE_BENCH_THREADS"); s != "" {
		threads, _ = strconv.Atoi(s)
	}
	return wire.RuntimeConfig{Embeddings: true, ContextSize: 512, Threads: threads}
}

// benchBatches are the batch shapes: sequences × tokens per sequence.
var benchBatches = []struct{ seqs, tokens int }{{16, 128}, {64, 32}, {8, 512}}

// benchSeqs returns deterministic [CLS] … [SEP] sequences.
func benchSeqs(n, length int) [][]int32 {
	seqs := make([][]int32, n)
	x := uint32(12345)
	for i := range seqs {
		s := make([]int32, length)
		s[0], s[length-1] = 101, 102
		for k := 1; k < length-1; k++ {
			x = x*1664525 + 1013904223
			s[k] = 1996 + int32(x>>8)%28000
		}
		seqs[i] = s
	}
	return seqs
}

// BenchmarkEmbedProtocol interleaves the same batch in-process and through
// the worker, so that load from other processes hits both alike. It reports
// wall-clock tokens/s of each and, less sensitive to a busy machine, tokens
// per CPU-second (in-process: this process; worker: the worker's CPU plus
// this process's CPU for encoding and decoding frames), and the protocol's
// cost as a percentage of each.
func BenchmarkEmbedProtocol(b *testing.B) {
	path := testmodels.MiniLM(b)
	e := testEngine(b)
	digest := fileDigest(b, path)
	info, err := e.Load(context.Background(), LoadRequest{Path: path, Digest: digest, Config: benchConfig()})
	if err != nil {
		b.Fatal(err)
	}
	w := startWorker(b)
	msg := w.call(&wire.Load{ReqID: 1, ArtifactPath: path, ArtifactDigest: digest, Format: "gguf", RuntimeConfig: benchConfig()})
	loaded, ok := msg.(*wire.Loaded)
	if !ok {
		b.Fatalf("LOAD: got %#v", msg)
	}
	for _, bb := range benchBatches {
		seqs := benchSeqs(bb.seqs, bb.tokens)
		req := &wire.EmbedBatch{ModelRef: loaded.ModelRef, Normalize: true}
		for i, s := range seqs {
			req.Items = append(req.Items, wire.Item{ID: uint64(i), NTokens: len(s)})
			req.IDs = append(req.IDs, s...)
		}
		b.Run(fmt.Sprintf("batch=%dx%d", bb.seqs, bb.tokens), func(b *testing.B) {
			var in, out cost
			for b.Loop() {
				in.measure(b, 0, func() {
					if _, _, err := e.Embed(context.Background(), info.Ref, "", true, seqs); err != nil {
						b.Fatal(err)
					}
				})
				out.measure(b, w.cmd.Process.Pid, func() {
					req.ReqID++
					if v, ok := w.call(req).(*wire.Vectors); !ok || v.N != bb.seqs {
						b.Fatalf("got %#v; want VECTORS", v)
					}
				})
			}
			tokens := float64(b.N * bb.seqs * bb.tokens)
			b.ReportMetric(tokens/in.wall.Seconds(), "inproc-tok/s")
			b.ReportMetric(tokens/out.wall.Seconds(), "worker-tok/s")
			b.ReportMetric(tokens/in.cpu.Seconds(), "inproc-tok/cpu-s")
			b.ReportMetric(tokens/out.cpu.Seconds(), "worker-tok/cpu-s")
			b.ReportMetric(100*(out.wall.Seconds()/in.wall.Seconds()-1), "wall-overhead-%")
			b.ReportMetric(100*(out.cpu.Seconds()/in.cpu.Seconds()-1), "cpu-overhead-%")
		})
	}
	w.conn.Send(&wire.Shutdown{})
	w.wait()
}

// cost accumulates wall time and CPU time (this process, plus the worker's
// when pid is not 0).
type cost struct{ wall, cpu time.Duration }

func (c *cost) measure(b *testing.B, pid int, f func()) {
	cpu0 := selfCPU() + procCPU(b, pid)
	t0 := time.Now()
	f()
	c.wall += time.Since(t0)
	c.cpu += selfCPU() + procCPU(b, pid) - cpu0
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is utime+stime of a process from /proc/PID/stat (clock ticks of 10ms).
func procCPU(b *testing.B, pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the parenthesised command: state is field 3; utime, stime are 14, 15.
	rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
	f := strings.Fields(rest)
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
