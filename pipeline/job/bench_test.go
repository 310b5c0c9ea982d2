package job

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine"
	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/testmodels"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/wire"
)

// End-to-end throughput of `synapse embed` (job.Embed with real
// workers) against the raw engine (the same chunks, the same batches,
// engine.OpenLlama in this process, no pipeline), on the first
// SYNAPSE_BENCH_DOCS (default 300) SciFact documents (title + text) and a
// MiniLM-L6-shaped F16 model with the bert-bge vocabulary:
//
//	go test ./job -run '^$' -bench 'EmbedRaw$' -benchtime 1x
//	go test ./job -run '^$' -bench 'EmbedPipeline$' -benchtime 1x
//
// (two processes: see BenchmarkEmbedRaw). Sub-benchmarks: EmbedRaw/tN/bB (N
// threads, B batch tokens), EmbedPipeline/WxT/bB (W workers × T threads). Metrics: tok/s (wall clock) and tok/cpu-s (tokens per
// CPU-second of this process and its workers: less sensitive to other load
// on the machine). The model is written to a temporary directory.

func TestMain(m *testing.M) {
	code := m.Run()
	testmodels.RemoveAll()
	os.Exit(code)
}

// benchCorpus writes the first n SciFact documents as JSONL in dir.
func benchCorpus(b *testing.B, dir string, n int) string {
	b.Helper()
	src, err := os.Open(testenv.Fixture(b, "corpora", "scifact", "corpus.jsonl"))
	if err != nil {
		b.Skipf("scifact: %v", err)
	}
	defer src.Close()
	path := filepath.Join(dir, "corpus.jsonl")
	dst, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(src)
	sc.Buffer(nil, 1<<20)
	for i := 0; i < n && sc.Scan(); i++ {
		dst.Write(append(sc.Bytes(), '\n'))
	}
	if err := dst.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// cpuTime is the user+system time of this process and its reaped children.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// rawBatches tokenizes and chunks the corpus as Embed does and packs the
// chunks as the pipeline does (pipeline.Pack, groups as io/corpus's reader
// makes them).
func rawBatches(b *testing.B, corpusPath, model string, budget int) ([][]Chunk, int) {
	b.Helper()
	tok, err := tokenize.Load(model)
	if err != nil {
		b.Fatal(err)
	}
	pre, suf := tok.Affixes()
	ch := Chunking{Window: 512 - len(pre) - len(suf), Prefix: pre, Suffix: suf}
	r, err := corpus.Open([]string{corpusPath}, corpus.ReadOptions{TextFields: []string{"title", "text"}})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var groups [][]Chunk
	group, tokens := int64(-1), 0
	for {
		d, err := r.Next()
		if err != nil {
			break
		}
		if d.Group != group {
			groups, group = append(groups, nil), d.Group
		}
		for _, c := range ch.Cut(tok.Tokenize(d.Text, tokenize.Options{}).Tokens) {
			tokens += len(c.IDs)
			groups[len(groups)-1] = append(groups[len(groups)-1], c)
		}
	}
	return pipeline.Pack(groups, func(c Chunk) int { return len(c.IDs) }, pipeline.Config{BatchTokens: budget}), tokens
}

// benchSetup returns the model, the llama.cpp libraries and the corpus.
func benchSetup(b *testing.B) (model, lib, corpusPath string) {
	model = testmodels.MiniLM(b)
	lib = testenv.LlamaLib(b)
	docs := 300
	if s := os.Getenv("SYNAPSE_BENCH_DOCS"); s != "" {
		docs, _ = strconv.Atoi(s)
	}
	return model, lib, benchCorpus(b, b.TempDir(), docs)
}

// BenchmarkEmbedRaw runs in a process of its own (llama.cpp loaded in the
// test process has crashed a later pipeline benchmark in the same process).
func BenchmarkEmbedRaw(b *testing.B) {
	model, lib, corpusPath := benchSetup(b)
	for _, threads := range []int{2, 1} {
		for _, budget := range []int{512, 2048} {
			b.Run(fmt.Sprintf("t%d/b%d", threads, budget), func(b *testing.B) { benchRaw(b, lib, model, corpusPath, threads, budget) })
		}
	}
}

func BenchmarkEmbedPipeline(b *testing.B) {
	model, lib, corpusPath := benchSetup(b)
	bin := testenv.Binary(b)
	// 1x1 against EmbedRaw/t1: the pipeline's cost at the same llama.cpp threads.
	for _, split := range [][2]int{{1, 2}, {2, 1}, {1, 1}} {
		for _, budget := range []int{512, 2048} {
			name := fmt.Sprintf("%dx%d/b%d", split[0], split[1], budget)
			b.Run(name, func(b *testing.B) { benchPipeline(b, bin, lib, model, corpusPath, split[0], split[1], budget) })
		}
	}
}

func benchRaw(b *testing.B, lib, model, corpusPath string, threads, budget int) {
	batches, tokens := rawBatches(b, corpusPath, model, budget)
	e, err := engine.OpenLlama(engine.LlamaOptions{LibDir: lib, LogLevel: "error"})
	if err != nil {
		b.Fatal(err)
	}
	_, digest, err := gguf.Digest(model)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	info, err := e.Load(ctx, engine.LoadRequest{Path: model, Digest: digest, Config: wire.RuntimeConfig{
		ContextSize: 512, BatchSize: 512, UBatchSize: 512, Threads: threads, Embeddings: true}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for range b.N {
		for _, bt := range batches {
			seqs := make([][]int32, len(bt))
			for i, c := range bt {
				seqs[i] = c.IDs
			}
			if _, _, err := e.Embed(ctx, info.Ref, "", true, seqs); err != nil {
				b.Fatal(err)
			}
		}
	}
	report(b, tokens*b.N, time.Since(start), cpuTime()-cpu0)
}

func benchPipeline(b *testing.B, bin, lib, model, corpusPath string, workers, threads, budget int) {
	dir := b.TempDir()
	var tokens int64
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i := range b.N {
		sum, err := Embed(context.Background(), EmbedOptions{Normalize: true, Options: Options{Inputs: []string{corpusPath}, Model: model,
			Out: filepath.Join(dir, fmt.Sprintf("out-%d.arrow", i)), BatchTokens: budget,
			Read:    corpus.ReadOptions{TextFields: []string{"title", "text"}},
			Workers: workers, Threads: threads, Worker: []string{bin, "worker"}, Env: []string{"SYNAPSE_LLAMA_LIB=" + lib}}})
		if err != nil {
			b.Fatal(err)
		}
		tokens += sum.Job.Tokens
	}
	report(b, int(tokens), time.Since(start), cpuTime()-cpu0)
}

func report(b *testing.B, tokens int, wall, cpu time.Duration) {
	b.ReportMetric(float64(tokens)/wall.Seconds(), "tok/s")
	b.ReportMetric(float64(tokens)/cpu.Seconds(), "tok/cpu-s")
	b.ReportMetric(0, "ns/op")
}
