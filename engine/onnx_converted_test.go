//go:build cgo

package engine

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/convert"
	"github.com/synapse-embed/synapse/wire"
)

// TestONNXConvertedPadded: the random-weight DistilBERT, MPNet and
// ModernBERT checkpoints (model/convert/testdata, made by transformers, saved by
// sentence-transformers) converted to ONNX give sentence-transformers'
// vectors (cosine ≥ 0.9999, mean pooled) unpadded, and in padded runs, where
// texts of 3 to 128 tokens share one run, masked: MPNet's relative position
// bias and ModernBERT's local window must hold with padding behind a text.
func TestONNXConvertedPadded(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		max  int // sentence-transformers' max_seq_length (tokenizer_config.json's model_max_length)
	}{{"distilbert-tiny", 64}, {"mpnet-tiny", 128}, {"modernbert-tiny", 128}} {
		name := tc.name
		var ref struct {
			TokenIDs [][]int32   `json:"token_ids"`
			Vectors  [][]float64 `json:"vectors"`
		}
		dir := convertedTestdata(t, name, &ref)
		seqs := make([][]int32, len(ref.TokenIDs))
		for i, ids := range ref.TokenIDs {
			if len(ids) > tc.max { // truncated as sentence-transformers does: the first tokens, then the last (special) one
				ids = append(ids[:tc.max-1:tc.max-1], ids[len(ids)-1])
			}
			seqs[i] = ids
		}
		for _, pad := range []int{0, 200} {
			e, err := OpenONNX(ONNXOptions{Lib: testenv.ORTLib(t), PadTokens: pad})
			if err != nil {
				t.Fatal(err)
			}
			info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{Threads: 1}))
			if err != nil {
				t.Fatalf("%s: Load: %v", name, err)
			}
			vecs, dims, err := e.Embed(ctx, info.Ref, PoolingMean, true, seqs)
			if err != nil {
				t.Fatalf("%s: Embed: %v", name, err)
			}
			worst := 1.0
			for i, want := range ref.Vectors {
				var dot, nn float64
				for k, w := range want {
					dot += float64(vecs[i*dims+k]) * w
					nn += w * w
				}
				worst = min(worst, dot/math.Sqrt(nn))
			}
			t.Logf("%s, PadTokens %d: min cosine %.7f to sentence-transformers", name, pad, worst)
			if worst < 0.9999 {
				t.Errorf("%s, PadTokens %d: min cosine %.6f; want ≥ 0.9999", name, pad, worst)
			}
			e.Close()
		}
	}
}

// convertedTestdata reads model/convert/testdata/name.reference.json into
// ref and returns a copy of the checkpoint's directory with its converted
// model.onnx beside its files.
func convertedTestdata(t *testing.T, name string, ref any) string {
	t.Helper()
	src := filepath.Join("..", "model", "convert", "testdata", name)
	b, err := os.ReadFile(src + ".reference.json")
	if err == nil {
		err = json.Unmarshal(b, ref)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := convert.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteONNX(filepath.Join(dir, "model.onnx")); err != nil {
		t.Fatal(err)
	}
	return dir
}
