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

// TestDebertaPadded: the DeBERTa-v3 cross-encoder (model/convert/testdata/
// deberta-tiny) converted to ONNX gives the same first-token hidden state —
// all its score depends on — for each reference pair whether it runs alone
// or padded with pairs of 7 to 128 tokens in one run: the attention mask
// holds over the c2p and p2c terms and the zeroed padding rows. (RERANK
// runs pairs unpadded; TestDebertaRerank checks those scores against
// CrossEncoder's.)
func TestDebertaPadded(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join("..", "model", "convert", "testdata", "deberta-tiny")
	var ref struct {
		TokenIDs [][]int32 `json:"token_ids"`
	}
	b, err := os.ReadFile(src + ".reference.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
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
	var vecs [2][]float32
	var dims int
	for k, pad := range []int{0, 200} {
		e, err := OpenONNX(ONNXOptions{Lib: testenv.ORTLib(t), PadTokens: pad})
		if err != nil {
			t.Fatal(err)
		}
		info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{Threads: 1, Pooling: PoolingCLS}))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if vecs[k], dims, err = e.Embed(ctx, info.Ref, PoolingCLS, false, ref.TokenIDs); err != nil {
			t.Fatalf("PadTokens %d: Embed: %v", pad, err)
		}
		e.Close()
	}
	worst := 0.0
	for i, v := range vecs[0] {
		worst = max(worst, math.Abs(float64(v-vecs[1][i])))
	}
	t.Logf("deberta-tiny: %d pairs × %d dims, max |padded − alone| %.2g", len(ref.TokenIDs), dims, worst)
	if len(vecs[0]) != len(ref.TokenIDs)*32 || worst > 1e-5 {
		t.Errorf("%d values; max difference %.3g padded against alone; want %d values within 1e-5", len(vecs[0]), worst, len(ref.TokenIDs)*32)
	}
}
