package engine

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/wire"
)

// TestRerankPairLayouts checks the cross-encoder input the worker builds
// from plain ids: a RERANK score must be, bit for bit, the rank-pooled
// output of the pair laid out as the model family expects, and differ from
// the other layout. BERT (WordPiece, a generated reranker): [CLS] q [SEP] d
// [SEP], also checked against transformers in TestRerankReference; XLM-R (a "t5" unigram
// vocabulary on a BERT encoder, as bge-reranker-v2-m3): <s> q </s></s> d </s>,
// on a reranker written with the opus-mt unigram vocabulary (<s> = 1,
// </s> = 2).
func TestRerankPairLayouts(t *testing.T) {
	e := testEngine(t)
	for _, tc := range []struct {
		name        string
		model       func(t *testing.T) string // loaded model ref
		q, d        []int32
		layout, not func(q, d []int32) []int32
	}{
		{"xlm-r", func(t *testing.T) string { return loadXLMR(t, e) }, []int32{120, 45, 9000}, []int32{77, 3000, 15, 15, 400},
			func(q, d []int32) []int32 { return join([]int32{1}, q, []int32{2, 2}, d, []int32{2}) },
			func(q, d []int32) []int32 { return join([]int32{1}, q, []int32{2}, d, []int32{2}) }},
		{"bert", func(t *testing.T) string { return loadFixture(t, genRerank, embedConfig).Ref }, []int32{1592, 1088}, []int32{1023, 1003, 1037, 1231},
			func(q, d []int32) []int32 { return join([]int32{101}, q, []int32{102}, d, []int32{102}) },
			func(q, d []int32) []int32 { return join([]int32{101}, q, []int32{102, 102}, d, []int32{102}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := tc.model(t)
			scores, err := e.Rerank(context.Background(), ref, []RerankGroup{{Query: tc.q, Candidates: [][]int32{tc.d}}})
			if err != nil {
				t.Fatal(err)
			}
			var out [2]float32
			for i, ids := range [][]int32{tc.layout(tc.q, tc.d), tc.not(tc.q, tc.d)} {
				// One sequence per call, as RERANK had: rounding depends on the batch.
				v, dims, err := e.Embed(context.Background(), ref, "", false, [][]int32{ids})
				if err != nil || dims != 1 {
					t.Fatalf("rank-pooled embed: dims %d, %v; want 1 classifier output", dims, err)
				}
				out[i] = v[0]
			}
			if math.Float32bits(scores[0]) != math.Float32bits(out[0]) {
				t.Errorf("RERANK score %v; the expected layout scores %v", scores[0], out[0])
			}
			if out[1] == out[0] {
				t.Errorf("the other layout scores the same (%v): the test cannot tell them apart", out[1])
			}
		})
	}
}

// loadXLMR loads a BERT reranker written with the opus-mt unigram fixture
// vocabulary (modelgen cannot generate a unigram one) and unloads it at the
// end of the test.
func loadXLMR(t *testing.T, e *Llama) string {
	t.Helper()
	v, err := modelgen.VocabFromGGUF(testenv.Fixture(t, "vocab", "ggml-vocab-opus-mt-en-ugm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "xlmr-rerank.gguf")
	m := modelgen.BERT{Layers: 1, Width: 32, Heads: 2, FFN: 64, Context: 128, Pooling: modelgen.PoolingRank, Seed: 7, Vocab: v}
	if err := m.Write(path); err != nil {
		t.Fatal(err)
	}
	xlmr, err := e.Load(context.Background(), LoadRequest{Path: path, Digest: fileDigest(t, path), Format: "gguf", Config: embedConfig})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if code := wire.CodeOf(e.Unload(context.Background(), xlmr.Ref)); code != "" {
			t.Errorf("unload: %v", code)
		}
	})
	return xlmr.Ref
}

func join(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
