package job

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine"
	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/record"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/testmodels"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/wire"
)

// Throughput of `synapse rerank` and `synapse generate` (the jobs with real
// workers) against the raw engine in this process on the same requests:
//
//	go test ./job -run '^$' -bench 'RerankRaw$' -benchtime 1x
//	go test ./job -run '^$' -bench 'RerankPipeline$' -benchtime 1x
//	go test ./job -run '^$' -bench 'GenerateRaw$' -benchtime 1x
//	go test ./job -run '^$' -bench 'GeneratePipeline$' -benchtime 1x
//
// Rerank: SYNAPSE_BENCH_QUERIES (default 30) SciFact test queries, each with
// 10 SciFact documents (its relevant ones first), scored by a
// MiniLM-L6-shaped cross-encoder (random weights, bert-bge vocabulary).
// Generate: SYNAPSE_BENCH_PROMPTS (default 40) SciFact titles completed to
// 32 tokens greedily by a 4-layer, 512-wide llama (random weights,
// generated SentencePiece vocabulary). Metrics: pairs/s or gen-tok/s, tok/s
// (prompt and pair tokens), and per CPU-second.

// rerankBenchInput writes a grouped rerank input of SciFact queries.
func rerankBenchInput(b *testing.B, dir string) (string, [][]string) {
	b.Helper()
	n := benchCount("SYNAPSE_BENCH_QUERIES", 30)
	corpus := map[string]string{}
	var ids []string
	readJSONL(b, testenv.Fixture(b, "corpora", "scifact", "corpus.jsonl"), func(m map[string]any) {
		id := fmt.Sprint(m["_id"])
		corpus[id] = fmt.Sprint(m["title"]) + "\n" + fmt.Sprint(m["text"])
		ids = append(ids, id)
	})
	var rows []map[string]any
	var texts [][]string // query, then documents
	k := 0
	readJSONL(b, testenv.Fixture(b, "corpora", "scifact", "queries.jsonl"), func(m map[string]any) {
		if len(rows) >= n {
			return
		}
		q := fmt.Sprint(m["text"])
		var cands []map[string]any
		t := []string{q}
		for range 10 {
			id := ids[k%len(ids)]
			k += 37
			cands = append(cands, map[string]any{"id": id, "text": corpus[id]})
			t = append(t, corpus[id])
		}
		rows = append(rows, map[string]any{"query_id": fmt.Sprint(m["_id"]), "query": q, "candidates": cands})
		texts = append(texts, t)
	})
	path := filepath.Join(dir, "rerank.jsonl")
	writeJSONLRows(b, path, rows)
	return path, texts
}

func benchCount(env string, def int) int {
	if s := os.Getenv(env); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	return def
}

func readJSONL(b *testing.B, path string, fn func(map[string]any)) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Skipf("fixture: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			fn(m)
		}
	}
}

func writeJSONLRows(b *testing.B, path string, rows []map[string]any) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for _, r := range rows {
		line, _ := json.Marshal(r)
		w.Write(append(line, '\n'))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
}

func rerankModel(b *testing.B) string {
	return testmodels.BGE(b, "minilm-rerank", modelgen.MiniLMReranker)
}

// BenchmarkRerankRaw scores the pairs the job sends, batched as the job
// batches them, with the engine in this process.
func BenchmarkRerankRaw(b *testing.B) {
	model, lib := rerankModel(b), testenv.LlamaLib(b)
	_, texts := rerankBenchInput(b, b.TempDir())
	tok, err := tokenize.Load(model)
	if err != nil {
		b.Fatal(err)
	}
	k := &rerankKind{tok: tok, ctx: 512, overhead: 3}
	var pairs []Pair
	tokens := 0
	for qi, t := range texts {
		q := record.Query{Doc: record.Doc{Index: int64(qi), ID: fmt.Sprint(qi), Text: t[0]}}
		for j, d := range t[1:] {
			q.Cands = append(q.Cands, record.Candidate{ID: fmt.Sprint(j), Text: d})
		}
		work, _ := k.Items(q)
		for _, w := range work {
			pairs = append(pairs, w.Item)
			tokens += k.Tokens(w.Item)
		}
	}
	batches := pipeline.Pack([][]Pair{pairs}, k.Tokens, pipeline.Config{BatchTokens: 2048})
	for _, threads := range []int{2, 1} {
		b.Run(fmt.Sprintf("t%d", threads), func(b *testing.B) {
			e, ref := rawEngine(b, lib, model, wire.RuntimeConfig{ContextSize: 512, BatchSize: 512, UBatchSize: 512,
				Threads: threads, Embeddings: true, Pooling: "rank"})
			defer e.Close()
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			for range b.N {
				for _, bt := range batches {
					if _, err := e.Rerank(context.Background(), ref, rerankGroups(bt)); err != nil {
						b.Fatal(err)
					}
				}
			}
			reportPairs(b, len(pairs)*b.N, tokens*b.N, time.Since(start), cpuTime()-cpu0)
		})
	}
}

// rerankGroups groups a batch's pairs by query, as the job's Call does.
func rerankGroups(pairs []Pair) []engine.RerankGroup {
	var gs []engine.RerankGroup
	at := map[*int32]int{}
	for _, p := range pairs {
		g, ok := at[queryKey(p.Query)]
		if !ok {
			g = len(gs)
			gs = append(gs, engine.RerankGroup{Query: p.Query})
			at[queryKey(p.Query)] = g
		}
		gs[g].Candidates = append(gs[g].Candidates, p.Doc)
	}
	return gs
}

func rawEngine(b *testing.B, lib, model string, rc wire.RuntimeConfig) (*engine.Llama, string) {
	e, err := engine.OpenLlama(engine.LlamaOptions{LibDir: lib, LogLevel: "error"})
	if err != nil {
		b.Fatal(err)
	}
	_, digest, err := gguf.Digest(model)
	if err != nil {
		b.Fatal(err)
	}
	info, err := e.Load(context.Background(), engine.LoadRequest{Path: model, Digest: digest, Config: rc})
	if err != nil {
		b.Fatal(err)
	}
	return e, info.Ref
}

func BenchmarkRerankPipeline(b *testing.B) {
	model, lib := rerankModel(b), testenv.LlamaLib(b)
	dir := b.TempDir()
	in, texts := rerankBenchInput(b, dir)
	bin := testenv.Binary(b)
	for _, split := range [][2]int{{2, 1}, {1, 1}, {1, 2}} {
		b.Run(fmt.Sprintf("%dx%d", split[0], split[1]), func(b *testing.B) {
			var pairs, tokens int64
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			for i := range b.N {
				sum, err := Rerank(context.Background(), RerankOptions{Options: Options{Inputs: []string{in}, Model: model,
					Out: filepath.Join(dir, fmt.Sprintf("out-%d-%d.arrow", split[0], i)), BatchTokens: 2048,
					Workers: split[0], Threads: split[1], Worker: []string{bin, "worker"}, Env: []string{"SYNAPSE_LLAMA_LIB=" + lib}}})
				if err != nil {
					b.Fatal(err)
				}
				pairs, tokens = pairs+sum.Job.Items, tokens+sum.Job.Tokens
			}
			if want := int64(len(texts) * 10 * b.N); pairs != want {
				b.Fatalf("%d pairs scored; want %d", pairs, want)
			}
			reportPairs(b, int(pairs), int(tokens), time.Since(start), cpuTime()-cpu0)
		})
	}
}

func reportPairs(b *testing.B, pairs, tokens int, wall, cpu time.Duration) {
	b.ReportMetric(float64(pairs)/wall.Seconds(), "pairs/s")
	report(b, tokens, wall, cpu)
}

// generateBench writes SciFact titles as prompts and returns them.
func generateBench(b *testing.B, dir string) (string, []string) {
	b.Helper()
	n := benchCount("SYNAPSE_BENCH_PROMPTS", 40)
	var rows []map[string]any
	var prompts []string
	readJSONL(b, testenv.Fixture(b, "corpora", "scifact", "corpus.jsonl"), func(m map[string]any) {
		if len(rows) < n {
			rows = append(rows, map[string]any{"id": fmt.Sprint(m["_id"]), "text": fmt.Sprint(m["title"])})
			prompts = append(prompts, fmt.Sprint(m["title"]))
		}
	})
	path := filepath.Join(dir, "prompts.jsonl")
	writeJSONLRows(b, path, rows)
	return path, prompts
}

func generateModel(b *testing.B) string {
	return testmodels.File(b, "small-llama", func(path string) error {
		return modelgen.SmallLlama(modelgen.SPMVocab(testmodels.Words())).Write(path)
	})
}

const benchGenTokens = 32

// BenchmarkGenerateRaw completes the prompts with the engine in this process.
func BenchmarkGenerateRaw(b *testing.B) {
	model, lib := generateModel(b), testenv.LlamaLib(b)
	_, prompts := generateBench(b, b.TempDir())
	tok, err := tokenize.Load(model)
	if err != nil {
		b.Fatal(err)
	}
	for _, threads := range []int{2, 1} {
		b.Run(fmt.Sprintf("t%d", threads), func(b *testing.B) {
			e, ref := rawEngine(b, lib, model, wire.RuntimeConfig{ContextSize: 2048, BatchSize: 512, UBatchSize: 512, Threads: threads})
			defer e.Close()
			var gen, prompt int
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			for range b.N {
				for _, p := range prompts {
					ids := tok.Tokenize(p, tokenize.Options{AddSpecial: true}).IDs()
					g, err := e.Generate(context.Background(), ref, ids, engine.GenerateOptions{MaxTokens: benchGenTokens})
					if err != nil {
						b.Fatal(err)
					}
					gen, prompt = gen+g.NGen, prompt+g.NPrompt
				}
			}
			reportGen(b, gen, prompt, time.Since(start), cpuTime()-cpu0)
		})
	}
}

func BenchmarkGeneratePipeline(b *testing.B) {
	model, lib := generateModel(b), testenv.LlamaLib(b)
	dir := b.TempDir()
	in, _ := generateBench(b, dir)
	bin := testenv.Binary(b)
	for _, split := range [][2]int{{2, 1}, {1, 1}, {1, 2}} {
		b.Run(fmt.Sprintf("%dx%d", split[0], split[1]), func(b *testing.B) {
			var gen, prompt int
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			for i := range b.N {
				out := filepath.Join(dir, fmt.Sprintf("gen-%d-%d-%d.jsonl", split[0], split[1], i))
				_, err := Generate(context.Background(), GenerateOptions{MaxTokens: benchGenTokens, Options: Options{Inputs: []string{in},
					Model: model, Out: out, Workers: split[0], Threads: split[1], Worker: []string{bin, "worker"},
					Env: []string{"SYNAPSE_LLAMA_LIB=" + lib}}})
				if err != nil {
					b.Fatal(err)
				}
				g, p := countGenerated(b, out)
				gen, prompt = gen+g, prompt+p
			}
			reportGen(b, gen, prompt, time.Since(start), cpuTime()-cpu0)
		})
	}
}

// countGenerated sums n_gen and n_prompt over a generate output.
func countGenerated(b *testing.B, path string) (gen, prompt int) {
	readJSONL(b, path, func(m map[string]any) {
		gen += int(m["n_gen"].(float64))
		prompt += int(m["n_prompt"].(float64))
	})
	return gen, prompt
}

func reportGen(b *testing.B, gen, prompt int, wall, cpu time.Duration) {
	b.ReportMetric(float64(gen)/wall.Seconds(), "gen-tok/s")
	b.ReportMetric(float64(prompt)/wall.Seconds(), "prompt-tok/s")
	b.ReportMetric(float64(gen+prompt)/cpu.Seconds(), "tok/cpu-s")
	b.ReportMetric(0, "ns/op")
}
