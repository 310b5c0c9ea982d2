package engine

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/testmodels"
	"github.com/synapse-embed/synapse/wire"
)

// TestRerankLabels: a GGUF reranker whose classifier has two outputs,
// label 1 the positive class, scores logits[1] − logits[0]. The independent
// computation is two one-output rerankers with the same weights, whose
// classifier is output 0's row and bias, or output 1's: each scores its
// logit through the one-label path, and the two-label score must be their
// difference (not the first output, which is what llama.cpp's rank pooling
// puts first).
func TestRerankLabels(t *testing.T) {
	e := testEngine(t)
	ctx := context.Background()
	load := func(path string, rc wire.RuntimeConfig) (ModelInfo, error) {
		return e.Load(ctx, LoadRequest{Path: path, Digest: fileDigest(t, path), Format: "gguf", Config: rc})
	}
	two, err := load(testmodels.LabelledReranker(t, "LABEL_0", "LABEL_1"), embedConfig)
	if err != nil {
		t.Fatal(err)
	}
	if two.Dims != 2 {
		t.Errorf("two-label reranker: dims %d; want 2 classifier outputs", two.Dims)
	}
	var single [2]ModelInfo
	for k := range single {
		if single[k], err = load(testmodels.OutputReranker(t, k), embedConfig); err != nil {
			t.Fatal(err)
		}
	}
	docs := testmodels.Corpus(8)
	tok := func(s string) []int32 {
		ids, err := e.Tokenize(ctx, two.Ref, s, false, false)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	groups := []RerankGroup{{Query: tok(docs[0].Title)}, {Query: tok(docs[1].Title)}}
	for i, d := range docs[2:] {
		groups[i%2].Candidates = append(groups[i%2].Candidates, tok(d.Text))
	}
	got, err := e.Rerank(ctx, two.Ref, groups)
	if err != nil {
		t.Fatal(err)
	}
	var logits [2][]float32
	for k := range logits {
		if logits[k], err = e.Rerank(ctx, single[k].Ref, groups); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range got {
		want := logits[1][i] - logits[0][i]
		if math.Abs(float64(s-want)) > 1e-4 {
			t.Errorf("pair %d: score %.6f; want logits[1] - logits[0] = %.6f - %.6f = %.6f", i, s, logits[1][i], logits[0][i], want)
		}
		if math.Abs(float64(s-logits[0][i])) < 0.05 {
			t.Errorf("pair %d: score %.6f is within 0.05 of logits[0] %.6f: the test cannot tell the rules apart", i, s, logits[0][i])
		}
	}
}

// TestRerankLabelsRefused: labels that do not name class 1 the positive
// one, and three labels, are refused when the model is loaded with rank
// pooling and when a model loaded for embedding is asked to rerank.
func TestRerankLabelsRefused(t *testing.T) {
	e := testEngine(t)
	ctx := context.Background()
	for _, labels := range [][]string{{"relevant", "irrelevant"}, {"contradiction", "entailment", "neutral"}} {
		path := testmodels.LabelledReranker(t, labels...)
		req := LoadRequest{Path: path, Digest: fileDigest(t, path), Format: "gguf", Config: embedConfig}
		_, err := e.Load(ctx, req)
		if wire.CodeOf(err) != wire.CodeUnsupported || !strings.Contains(err.Error(), labels[0]) {
			t.Errorf("%q: LOAD with rank pooling: %v; want %s naming the labels", labels, err, wire.CodeUnsupported)
		}
		req.Config.Pooling = "mean"
		info, err := e.Load(ctx, req)
		if err != nil {
			t.Fatalf("%q: LOAD with mean pooling: %v", labels, err)
		}
		_, err = e.Rerank(ctx, info.Ref, []RerankGroup{{Query: []int32{5}, Candidates: [][]int32{{6}}}})
		if wire.CodeOf(err) != wire.CodeUnsupported || !strings.Contains(err.Error(), "cannot rerank") {
			t.Errorf("%q: RERANK: %v; want %s", labels, err, wire.CodeUnsupported)
		}
		if err := e.Unload(ctx, info.Ref); err != nil {
			t.Error(err)
		}
	}
}
