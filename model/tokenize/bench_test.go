package tokenize

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time this process has used (user + system), which
// unlike wall time is not inflated by other processes on a busy machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTokenize measures one goroutine tokenizing the SciFact corpus
// (title + "\n" + text per document) with each vocabulary in vocabDir, and
// reports MB/s of input and tokens/s, and the same per second of CPU time
// (MB/cpu-s, tokens/cpu-s; these include the garbage collector's work):
//
//	go test ./tokenize -run '^$' -bench Tokenize -benchtime 3x
//
// One iteration is the whole corpus (5,183 documents, about 7.4 MB).
func BenchmarkTokenize(b *testing.B) {
	docs := scifactDocs(b, -1)
	size := 0
	for _, d := range docs {
		size += len(d)
	}
	names, toks := supportedVocabs(b)
	for i, name := range names {
		tok := toks[i]
		label := string(tok.Vocab().Kind) + "/" + strings.TrimSuffix(strings.TrimPrefix(name, "ggml-vocab-"), ".gguf")
		b.Run(label, func(b *testing.B) {
			b.SetBytes(int64(size))
			tokens, iters := 0, 0
			cpu0 := cpuTime()
			for b.Loop() {
				for _, d := range docs {
					tokens += len(tok.Tokenize(d, Options{AddSpecial: true}).Tokens)
				}
				iters++
			}
			cpu := (cpuTime() - cpu0).Seconds()
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
			b.ReportMetric(float64(tokens)/cpu, "tokens/cpu-s")
			b.ReportMetric(float64(size*iters)/1e6/cpu, "MB/cpu-s")
		})
	}
}
