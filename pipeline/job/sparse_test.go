package job

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/pipeline"
)

// TestSparseLimits: the caps keep every request and its largest possible
// answer (8 bytes a kept term per item) within the frame, so that batches
// the token budget alone would make too large are split; a frame that
// holds no one item's answer is refused.
func TestSparseLimits(t *testing.T) {
	tests := []struct {
		maxFrame              uint32
		vocab, topK, batch    int
		wantTokens, wantItems int
		wantRefused           bool
	}{
		{64 << 20, 30522, 0, 2048, 2048, 274, false}, // the default frame: 274 × 244,176 B answers
		{64 << 20, 30522, 128, 2048, 2048, 65536, false},
		{4000, 124, 0, 2048, 1000, 4, false},   // 4 × 992 B answers; 1000 ids
		{4000, 124, 200, 2048, 1000, 4, false}, // top_k above the vocabulary: the vocabulary bounds it
		{4000, 124, 10, 2048, 1000, 50, false},
		{900, 124, 0, 2048, 0, 0, true}, // one 992-byte answer does not fit
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d-%d-%d", tt.maxFrame, tt.vocab, tt.topK), func(t *testing.T) {
			tokens, items, err := sparseLimits(tt.maxFrame, tt.vocab, tt.topK, tt.batch)
			var ce *ConfigError
			if tt.wantRefused {
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), "does not fit the 900-byte frame limit") {
					t.Fatalf("got %v; want a ConfigError saying the answer does not fit", err)
				}
				return
			}
			if err != nil || tokens != tt.wantTokens || items != tt.wantItems {
				t.Fatalf("got %d tokens, %d items, %v; want %d, %d", tokens, items, err, tt.wantTokens, tt.wantItems)
			}
		})
	}
	// 40 chunks of 10 tokens under a 4,000-byte frame: the budget alone
	// packs 40 to a request (answers of up to 39,680 bytes); the caps split
	// them into requests of at most 4 chunks, every answer within 3,968 bytes.
	chunks := make([]int, 40)
	for i := range chunks {
		chunks[i] = 10
	}
	id := func(n int) int { return n }
	if wide := pipeline.Pack([][]int{chunks}, id, pipeline.Config{BatchTokens: 2048}); len(wide) != 1 {
		t.Fatalf("the token budget alone: %d requests; want 1", len(wide))
	}
	tokens, items, _ := sparseLimits(4000, 124, 0, 2048)
	split := pipeline.Pack([][]int{chunks}, id, pipeline.Config{BatchTokens: tokens, MaxItems: items})
	n := 0
	for _, b := range split {
		n += len(b)
		if ans, req := 8*124*len(b), 4*10*len(b); ans > 4000 || req > 4000 {
			t.Errorf("a request of %d chunks: %d-byte answer, %d-byte ids; want both ≤ 4000", len(b), ans, req)
		}
	}
	if n != len(chunks) || len(split) != 10 {
		t.Errorf("got %d requests holding %d chunks; want 10 holding %d", len(split), n, len(chunks))
	}
}

// TestSparseFrame: under a frame that holds the answers of two chunks
// (every weight kept: 124 terms × 8 bytes each), a sparse run splits its
// requests and every answer arrives (none refused as too large); a frame
// below one answer is refused before any work.
func TestSparseFrame(t *testing.T) {
	lib := testenv.ORTLib(t)
	bin := testenv.Binary(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "mlm")
	enc := onnxtest.Tiny()
	enc.Positions, enc.Pooled, enc.NoHidden, enc.MLM = 24, false, true, true
	enc, err := onnxtest.WriteDir(model, onnxtest.Dir{Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "c.jsonl")
	var b strings.Builder
	for d := range 6 {
		fmt.Fprintf(&b, "{\"id\":\"d%d\",\"text\":%q}\n", d, strings.TrimSpace(strings.Repeat("cell protein gene ", 3+d)))
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	frame := uint32(8*enc.Vocab*2 + 16)
	run := func(maxFrame uint32, log *requestLog) (Summary, error) {
		o := EmbedOptions{Vectors: VectorsSparse, ChunkTokens: 4, Options: Options{Inputs: []string{in}, Model: model,
			Out: filepath.Join(dir, fmt.Sprintf("out-%d.arrow", maxFrame)), Read: corpus.ReadOptions{TextFields: []string{"text"}},
			Workers: 1, Threads: 1, Worker: []string{bin, "worker"}, Env: []string{"SYNAPSE_ORT_LIB=" + lib}, Observer: log}}
		o.Pool.MaxFrame = maxFrame
		return Embed(context.Background(), o)
	}
	log := &requestLog{}
	sum, err := run(frame, log)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	if sum.Run.OK != 6 || sum.Run.Failed != 0 || sum.Run.ItemFailures != 0 || len(log.errs) != 0 {
		t.Errorf("got counters %+v, request errors %v; want 6 documents ok, no failure", sum.Run, log.errs)
	}
	if min := int(sum.Run.Items+1)/2 + 1; log.n < min {
		t.Errorf("got %d requests for %d chunks; want at least %d (2 chunks a request, and the probe)", log.n, sum.Run.Items, min)
	}
	_, err = run(uint32(8*enc.Vocab-1), &requestLog{})
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "does not fit the") {
		t.Errorf("got %v; want a ConfigError saying one answer does not fit", err)
	}
}
