package job

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/model/tokenize"
)

func TestLateChunkingCut(t *testing.T) {
	pre, suf := []int32{100}, []int32{101}
	tests := []struct {
		n, window, overlap, chunk int
		want                      [][3]int // chunk: window number, token start, token end
	}{
		{0, 10, 0, 4, [][3]int{{0, 0, 0}}},
		{3, 10, 0, 4, [][3]int{{0, 0, 3}}},
		{9, 10, 0, 4, [][3]int{{0, 0, 4}, {0, 4, 8}, {0, 8, 9}}},
		// windows [0,10) [6,16) [12,20): each owns the tokens after the last one's end
		{20, 10, 4, 4, [][3]int{{0, 0, 4}, {0, 4, 8}, {0, 8, 10}, {1, 10, 14}, {1, 14, 16}, {2, 16, 20}}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d tokens, window %d, overlap %d, chunk %d", tt.n, tt.window, tt.overlap, tt.chunk), func(t *testing.T) {
			toks := make([]tokenize.Token, tt.n)
			for i := range toks {
				toks[i] = tokenize.Token{ID: int32(i), Start: int32(2 * i), End: int32(2*i + 1)}
			}
			lc := LateChunking{Window: Chunking{Window: tt.window, Overlap: tt.overlap, Prefix: pre, Suffix: suf}, Chunk: tt.chunk}
			var got [][3]int
			for w, lw := range lc.Cut(toks) {
				for j, c := range lw.Chunks {
					got = append(got, [3]int{w, int(c.TokenStart), int(c.TokenEnd)})
					sp := lw.Spans[j]
					if fmt.Sprint(lw.IDs[sp[0]:sp[1]]) != fmt.Sprint(c.IDs) {
						t.Errorf("chunk %d: span %v of the window holds %v; its ids are %v", c.Index, sp, lw.IDs[sp[0]:sp[1]], c.IDs)
					}
					if tt.n > 0 && (c.IDs[0] != int32(c.TokenStart) || len(c.IDs) != int(c.TokenEnd-c.TokenStart)) {
						t.Errorf("chunk %d [%d,%d): ids %v", c.Index, c.TokenStart, c.TokenEnd, c.IDs)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got chunks %v; want %v", got, tt.want)
			}
		})
	}
}

// requestLog is an Observer counting requests and their errors.
type requestLog struct {
	mu   sync.Mutex
	n    int
	errs []error
}

func (l *requestLog) Request(_ time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if err != nil {
		l.errs = append(l.errs, err)
	}
}

func (l *requestLog) ErrorRecord(string) {}

// TestLateChunkingFrame: with a frame limit that holds the states of one
// 24-token window (8 dims) but not two, requests are split to at most 30
// tokens and every answer arrives (none is refused as too large); a
// limit below one window's states refuses the job before any work.
func TestLateChunkingFrame(t *testing.T) {
	lib := testenv.ORTLib(t)
	bin := testenv.Binary(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "enc")
	enc := onnxtest.Tiny()
	enc.Positions, enc.Pooled = 24, false
	if _, err := onnxtest.WriteDir(model, onnxtest.Dir{Encoder: enc}); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "c.jsonl")
	var b strings.Builder
	words := 0
	for d := range 6 {
		n := 10 + 9*d // 10 … 55 words: 1 to 3 windows of 22 with 0 overlap
		words += n
		fmt.Fprintf(&b, "{\"id\":\"d%d\",\"text\":%q}\n", d, strings.TrimSpace(strings.Repeat("cell ", n)))
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	windows := 0
	for d := range 6 {
		windows += (10 + 9*d + 21) / 22
	}
	run := func(maxFrame uint32, log *requestLog) (Summary, error) {
		o := EmbedOptions{Normalize: true, ChunkTokens: 5, LateChunking: true, Options: Options{Inputs: []string{in}, Model: model,
			Out: filepath.Join(dir, fmt.Sprintf("out-%d.arrow", maxFrame)), Read: corpus.ReadOptions{TextFields: []string{"text"}},
			Workers: 1, Threads: 1, Worker: []string{bin, "worker"}, Env: []string{"SYNAPSE_ORT_LIB=" + lib}, Observer: log}}
		o.Pool.MaxFrame = maxFrame
		return Embed(context.Background(), o)
	}
	log := &requestLog{}
	sum, err := run(4*8*30, log)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	if sum.Run.OK != 6 || sum.Run.Failed != 0 || sum.Run.ItemFailures != 0 {
		t.Errorf("got counters %+v; want 6 documents ok, no failure", sum.Run)
	}
	if sum.Run.Items != int64(windows) {
		t.Errorf("got %d windows; want %d", sum.Run.Items, windows)
	}
	// Requests of at most 30 tokens: at least ⌈tokens/30⌉ besides the probe,
	// and more than a run under the default frame makes (4 windows a request).
	wide := &requestLog{}
	if _, err := run(0, wide); err != nil {
		t.Fatalf("Embed: %v", err)
	}
	if min := int(sum.Run.Tokens+29)/30 + 1; len(log.errs) != 0 || log.n < min || log.n <= wide.n {
		t.Errorf("got %d requests (errors %v) under the small frame, %d under the default; want at least %d and more than %d, none failed",
			log.n, log.errs, wide.n, min, wide.n)
	}
	_, err = run(4*8*20, &requestLog{})
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "does not fit the 640-byte frame limit") {
		t.Errorf("got %v; want a ConfigError saying the window does not fit", err)
	}
}
