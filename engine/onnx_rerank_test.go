//go:build cgo

package engine

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/wire"
)

var rankConfig = wire.RuntimeConfig{Pooling: PoolingRank, Threads: 1}

// writeCross writes a generated cross-encoder directory.
func writeCross(t testing.TB, d onnxtest.CrossDir) (string, onnxtest.CrossEncoder) {
	t.Helper()
	if d.CrossEncoder.Hidden == 0 {
		d.CrossEncoder = onnxtest.CrossEncoder{Hidden: 8, Positions: 32, Labels: 1, Seed: 3}
	}
	dir := filepath.Join(t.TempDir(), "cross")
	c, err := onnxtest.WriteCrossDir(dir, d)
	if err != nil {
		t.Fatal(err)
	}
	return dir, c
}

// rerankGroups are queries with candidates of mixed lengths, some pairs of
// equal length (they share a run) and a document repeated across groups.
var rerankGroups = []RerankGroup{
	{Query: []int32{5, 6}, Candidates: [][]int32{{7, 8, 9}, {10}, {9, 8, 7}, {11, 12, 13, 14, 15}}},
	{Query: []int32{12}, Candidates: [][]int32{{7, 8, 9, 10}, {13}}},
	{Query: []int32{14, 15, 16}, Candidates: [][]int32{{7, 8, 9}}},
}

var (
	robertaPost = map[string]any{"type": "RobertaProcessing", "sep": []any{"[SEP]", 3}, "cls": []any{"[CLS]", 2},
		"trim_offsets": true, "add_prefix_space": false}
	bertPost = map[string]any{"type": "BertProcessing", "sep": []any{"[SEP]", 3}, "cls": []any{"[CLS]", 2}}
)

// TestONNXRerankGenerated: RERANK on a generated cross-encoder gives, for
// every pair, the logits computed independently (float64) over the pair as
// the tokenizer.json post-processor lays it out, ids and token types, in
// runs of equal-length pairs or one pair per run; and differs from the
// other layouts.
func TestONNXRerankGenerated(t *testing.T) {
	e := openONNX(t)
	ctx := context.Background()
	type layout func(q, d []int32) (ids, types []int32)
	bert := func(q, d []int32) ([]int32, []int32) {
		return join([]int32{2}, q, []int32{3}, d, []int32{3}), join(make([]int32, len(q)+2), ones(len(d)+1))
	}
	roberta := func(q, d []int32) ([]int32, []int32) {
		ids := join([]int32{2}, q, []int32{3, 3}, d, []int32{3})
		return ids, make([]int32, len(ids))
	}
	for _, tc := range []struct {
		name   string
		dir    onnxtest.CrossDir
		want   layout
		others []layout
	}{
		{"template bert, 1 label", onnxtest.CrossDir{}, bert, []layout{roberta, typesZero(bert)}},
		{"bert processing, 1 label", onnxtest.CrossDir{Post: bertPost}, bert, []layout{roberta}},
		// The same graph as the first case (seed 3): its ref must differ, as its pair layout does.
		{"roberta processing, 1 label", onnxtest.CrossDir{Post: robertaPost}, roberta, []layout{bert}},
		{"template bert, 2 labels", onnxtest.CrossDir{CrossEncoder: onnxtest.CrossEncoder{Hidden: 8, Positions: 32, Labels: 2, Seed: 4}}, bert, nil},
		{"2 labels named", onnxtest.CrossDir{CrossEncoder: onnxtest.CrossEncoder{Hidden: 8, Positions: 32, Labels: 2, Seed: 5},
			Labels: []string{"not_relevant", "relevant"}}, bert, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, c := writeCross(t, tc.dir)
			score := func(l layout, q, d []int32) float64 {
				lg := c.Logits(l(q, d))
				if c.Labels == 2 {
					return lg[1] - lg[0]
				}
				return lg[0]
			}
			for _, seqMax := range []int{0, 1} {
				info, err := e.Load(ctx, onnxLoad(t, dir, wire.RuntimeConfig{Pooling: PoolingRank, SeqMax: seqMax, Threads: 1}))
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if info.Dims != c.Labels {
					t.Errorf("dims %d; want %d labels", info.Dims, c.Labels)
				}
				scores, err := e.Rerank(ctx, info.Ref, rerankGroups)
				if err != nil {
					t.Fatalf("Rerank: %v", err)
				}
				i := 0
				for _, g := range rerankGroups {
					for _, d := range g.Candidates {
						if want := score(tc.want, g.Query, d); math.Abs(float64(scores[i])-want) > 1e-5 {
							t.Errorf("seq_max %d pair %d: score %v; want %v", seqMax, i, scores[i], want)
						}
						for _, o := range tc.others {
							if math.Abs(score(o, g.Query, d)-score(tc.want, g.Query, d)) < 1e-3 {
								t.Errorf("pair %d: another layout scores the same: the test cannot tell them apart", i)
							}
						}
						i++
					}
				}
				if i != len(scores) {
					t.Errorf("%d scores; want %d", len(scores), i)
				}
			}
		})
	}
}

func ones(n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func typesZero(l func(q, d []int32) ([]int32, []int32)) func(q, d []int32) ([]int32, []int32) {
	return func(q, d []int32) ([]int32, []int32) { ids, _ := l(q, d); return ids, make([]int32, len(ids)) }
}

// TestONNXRerankRefused: what the engine cannot score is refused at LOAD or
// per request with the protocol's codes, naming the reason.
func TestONNXRerankRefused(t *testing.T) {
	e := openONNX(t)
	ctx := context.Background()
	cross, _ := writeCross(t, onnxtest.CrossDir{})
	three, _ := writeCross(t, onnxtest.CrossDir{CrossEncoder: onnxtest.CrossEncoder{Hidden: 8, Positions: 32, Labels: 3, Seed: 1}})
	unnamed, _ := writeCross(t, onnxtest.CrossDir{CrossEncoder: onnxtest.CrossEncoder{Hidden: 8, Positions: 32, Labels: 2, Seed: 1},
		Labels: []string{"relevant", "irrelevant"}})
	oneType, _ := writeCross(t, onnxtest.CrossDir{Post: bertPost})
	patchJSON(t, filepath.Join(oneType, "config.json"), "type_vocab_size", 1)
	noB, _ := writeCross(t, onnxtest.CrossDir{Post: map[string]any{"type": "TemplateProcessing", "single": []any{"$A"}, "pair": []any{"$A"}, "special_tokens": map[string]any{}}})
	embedder, _ := writeEncoder(t, onnxtest.Tiny())
	for _, tc := range []struct {
		name, dir string
		rc        wire.RuntimeConfig
		code      wire.Code
		says      string
	}{
		{"3 labels", three, rankConfig, wire.CodeUnsupported, "3 labels"},
		{"2 labels, label 1 not positive", unnamed, rankConfig, wire.CodeUnsupported, `"irrelevant"`},
		{"type 1 without a type 1 row", oneType, rankConfig, wire.CodeArtifactInvalid, "type_vocab_size"},
		{"pair template without $B", noB, rankConfig, wire.CodeUnsupported, "no $B"},
		{"an embedder with pooling rank", embedder, rankConfig, wire.CodeUnsupported, "logits"},
		{"a cross-encoder loaded to embed", cross, wire.RuntimeConfig{Threads: 1}, wire.CodeUnsupported, "cross-encoder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Load(ctx, onnxLoad(t, tc.dir, tc.rc))
			if wire.CodeOf(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Load: %v; want %s saying %q", err, tc.code, tc.says)
			}
		})
	}
	info, err := e.Load(ctx, onnxLoad(t, cross, rankConfig))
	if err != nil {
		t.Fatal(err)
	}
	emb, err := e.Load(ctx, onnxLoad(t, embedder, wire.RuntimeConfig{Threads: 1}))
	if err != nil {
		t.Fatal(err)
	}
	_, _, errEmbed := e.Embed(ctx, info.Ref, "", false, [][]int32{{2, 5, 3}})
	_, errRerank := e.Rerank(ctx, emb.Ref, []RerankGroup{{Query: []int32{5}, Candidates: [][]int32{{6}}}})
	long := make([]int32, 40)
	_, errLong := e.Rerank(ctx, info.Ref, []RerankGroup{{Query: []int32{5}, Candidates: [][]int32{long}}})
	_, errVocab := e.Rerank(ctx, info.Ref, []RerankGroup{{Query: []int32{5}, Candidates: [][]int32{{6}, {99999}}}})
	for name, c := range map[string]struct {
		err  error
		code wire.Code
	}{
		"EMBED_BATCH on a cross-encoder": {errEmbed, wire.CodeUnsupported}, "RERANK on an embedder": {errRerank, wire.CodeUnsupported},
		"a pair over n_ctx": {errLong, wire.CodeBadRequest}, "a token outside the vocabulary": {errVocab, wire.CodeBadRequest},
	} {
		if wire.CodeOf(c.err) != c.code {
			t.Errorf("%s: %v; want %s", name, c.err, c.code)
		}
	}
	if errVocab != nil && !strings.Contains(errVocab.Error(), "candidate 1") {
		t.Errorf("the vocabulary error does not name the candidate: %v", errVocab)
	}
}

func patchJSON(t testing.TB, path, key string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m[key] = v
	b, _ = json.Marshal(m)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestONNXRerankReference: the ONNX form of ref-bert-rerank.gguf reproduces
// transformers' scores (reference/rerank.json) to 1e-4, query by query.
func TestONNXRerankReference(t *testing.T) {
	var ref rerankRef
	readJSON(t, &ref, "reference", "rerank.json")
	e := openONNX(t)
	info, err := e.Load(context.Background(), onnxLoad(t, testenv.Fixture(t, "models", "ref-bert-rerank-onnx"), rankConfig))
	if err != nil {
		t.Fatal(err)
	}
	scores, err := e.Rerank(context.Background(), info.Ref, rerankRefGroups(t, ref))
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range ref.Items {
		if math.Abs(float64(scores[i]-it.Score)) > 1e-4 {
			t.Errorf("item %d: score %.6f; want %.6f ± 1e-4", i, scores[i], it.Score)
		}
	}
}
