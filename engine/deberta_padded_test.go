//go:build cgo

package engine

import (
	"context"
	"math"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/wire"
)

// TestDebertaPadded: the DeBERTa cross-encoders (model/convert/testdata/
// deberta-tiny, DeBERTa-v3's flags, and deberta-v2-tiny, token types and
// clamped relative positions) converted to ONNX gives the same first-token hidden state —
// all its score depends on — for each reference pair whether it runs alone
// or padded with pairs of 7 to 128 tokens in one run: the attention mask
// holds over the c2p and p2c terms and the zeroed padding rows. (RERANK
// runs pairs unpadded; TestDebertaRerank checks those scores against
// CrossEncoder's.)
func TestDebertaPadded(t *testing.T) {
	for _, name := range []string{"deberta-tiny", "deberta-v2-tiny"} {
		checkDebertaPadded(t, name)
	}
}

func checkDebertaPadded(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	var ref struct {
		TokenIDs [][]int32 `json:"token_ids"`
	}
	dir := convertedTestdata(t, name, &ref)
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
			t.Fatalf("%s, PadTokens %d: Embed: %v", name, pad, err)
		}
		e.Close()
	}
	worst := 0.0
	for i, v := range vecs[0] {
		worst = max(worst, math.Abs(float64(v-vecs[1][i])))
	}
	t.Logf("%s: %d pairs × %d dims, max |padded − alone| %.2g", name, len(ref.TokenIDs), dims, worst)
	if len(vecs[0]) != len(ref.TokenIDs)*32 || worst > 1e-5 {
		t.Errorf("%s: %d values; max difference %.3g padded against alone; want %d values within 1e-5", name, len(vecs[0]), worst, len(ref.TokenIDs)*32)
	}
}
