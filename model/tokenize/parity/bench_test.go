package parity

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// benchDocs is how many corpus documents one benchmark op tokenizes
// (SYNAPSE_BENCH_DOCS overrides it).
const benchDocs = 500

// BenchmarkTokenize times, on one goroutine, the Go tokenizer and
// llama.cpp's own tokenizer (the engine in this process, no IPC) over the
// same corpus documents with AddSpecial. One op tokenizes every document
// once; the Go tokenizer is loaded fresh for each op (untimed), so its word
// cache starts cold as in a real run. MB/s is input bytes; tokens/s counts
// output tokens.
//
//	go test ./model/tokenize/parity -run '^$' -bench Tokenize -benchtime 5x
func BenchmarkTokenize(b *testing.B) {
	docs := benchDocs
	if s := os.Getenv("SYNAPSE_BENCH_DOCS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("SYNAPSE_BENCH_DOCS=%q: want a positive number", s)
		}
		docs = n
	}
	texts, err := Corpus(testenv.Fixture(b, "corpora", "scifact", "corpus.jsonl"), docs)
	if err != nil {
		b.Fatal(err)
	}
	size := 0
	for _, t := range texts {
		size += len(t)
	}
	for _, tg := range targets(b) {
		if !tg.config.VocabOnly {
			continue // the full models repeat bert-bge's and llama-spm's tokenizers
		}
		b.Run(tg.name+"/go", func(b *testing.B) {
			b.SetBytes(int64(size))
			tokens := 0
			for b.Loop() {
				b.StopTimer()
				tok, err := tokenize.Load(tg.path)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for _, t := range texts {
					tokens += len(tok.Tokenize(t, tokenize.Options{AddSpecial: true}).Tokens)
				}
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
		b.Run(tg.name+"/llama.cpp", func(b *testing.B) {
			e, ref := inProcess(b, tg)
			b.SetBytes(int64(size))
			tokens := 0
			for b.Loop() {
				for _, t := range texts {
					ids, err := e.Tokenize(context.Background(), ref, t, true, false)
					if err != nil {
						b.Fatal(err)
					}
					tokens += len(ids)
				}
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkTokenizeHF times, on one goroutine, the tokenizer.json tokenizers
// against the GGUF tokenizer of the same vocabulary (bert-bge WordPiece) over
// the same corpus documents with AddSpecial:
//
//	go test ./model/tokenize/parity -run '^$' -bench TokenizeHF -benchtime 5x
func BenchmarkTokenizeHF(b *testing.B) {
	texts, err := Corpus(testenv.Fixture(b, "corpora", "scifact", "corpus.jsonl"), benchDocs)
	if err != nil {
		b.Fatal(err)
	}
	size := 0
	for _, t := range texts {
		size += len(t)
	}
	load := map[string]func() (tokenize.Tokenizer, error){
		"tokenizer.json": func() (tokenize.Tokenizer, error) {
			return tokenize.LoadHF(testenv.Fixture(b, "models", "ref-bert-embed-onnx", "tokenizer.json"))
		},
		"gguf": func() (tokenize.Tokenizer, error) {
			return tokenize.Load(testenv.Fixture(b, "models", "ref-bert-embed.gguf"))
		},
	}
	for _, name := range []string{"tokenizer.json", "gguf"} {
		b.Run(name, func(b *testing.B) {
			tok, err := load[name]()
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			tokens := 0
			for b.Loop() {
				for _, t := range texts {
					tokens += len(tok.Tokenize(t, tokenize.Options{AddSpecial: true}).Tokens)
				}
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
