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
)

// TestTokensFrame: with a frame limit that holds the token vectors of two
// 16-token chunks (16 dims) but not four, requests are split to at most 40
// tokens and every answer arrives (none is refused as too large); a limit
// below one chunk's vectors refuses the job before any work.
func TestTokensFrame(t *testing.T) {
	lib := testenv.ORTLib(t)
	bin := testenv.Binary(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "colbert")
	enc := onnxtest.Tiny()
	enc.Positions, enc.Pooled = 24, false
	if _, err := onnxtest.WriteDir(model, onnxtest.Dir{Encoder: enc}); err != nil {
		t.Fatal(err)
	}
	if _, err := onnxtest.WriteST(model, onnxtest.ST{Dense: []onnxtest.Dense{{In: 8, Out: 16, NoBias: true, Activation: "torch.nn.modules.linear.Identity", Seed: 1}}}); err != nil {
		t.Fatal(err)
	}
	cfg := `{"query_prefix": "", "document_prefix": "", "query_length": 8, "document_length": 16}`
	if err := os.WriteFile(filepath.Join(model, "config_sentence_transformers.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "c.jsonl")
	var b strings.Builder
	for d := range 6 {
		fmt.Fprintf(&b, "{\"id\":\"d%d\",\"text\":%q}\n", d, strings.TrimSpace(strings.Repeat("cell ", 10+9*d))) // 1 to 4 chunks of 14
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(maxFrame uint32, log *requestLog) (Summary, error) {
		o := EmbedOptions{Normalize: true, Vectors: VectorsTokens, Options: Options{Inputs: []string{in}, Model: model,
			Out: filepath.Join(dir, fmt.Sprintf("out-%d.arrow", maxFrame)), Read: corpus.ReadOptions{TextFields: []string{"text"}},
			Workers: 1, Threads: 1, Worker: []string{bin, "worker"}, Env: []string{"SYNAPSE_ORT_LIB=" + lib}, Observer: log}}
		o.Pool.MaxFrame = maxFrame
		return Embed(context.Background(), o)
	}
	log := &requestLog{}
	sum, err := run(4*16*40, log)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	chunks := 0
	for d := range 6 {
		chunks += (10 + 9*d + 13) / 14
	}
	if sum.Run.OK != 6 || sum.Run.Failed != 0 || sum.Run.ItemFailures != 0 || sum.Run.Items != int64(chunks) {
		t.Errorf("got counters %+v; want 6 documents ok in %d chunks, no failure", sum.Run, chunks)
	}
	wide := &requestLog{}
	if _, err := run(0, wide); err != nil {
		t.Fatalf("Embed: %v", err)
	}
	if min := int(sum.Run.Tokens+39)/40 + 1; len(log.errs) != 0 || log.n < min || log.n <= wide.n {
		t.Errorf("got %d requests (errors %v) under the small frame, %d under the default; want at least %d and more than %d, none failed",
			log.n, log.errs, wide.n, min, wide.n)
	}
	_, err = run(4*16*10, &requestLog{})
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "does not fit the 640-byte frame limit") {
		t.Errorf("got %v; want a ConfigError saying the chunk does not fit", err)
	}
}
