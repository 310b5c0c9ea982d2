package ingest

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/wire"
)

// The Q8_0 variant of ref-bert-embed.gguf, through a worker, stays at
// cosine ≥ 0.999 to the transformers reference vectors of the F32 weights.
func TestQuantizeReference(t *testing.T) {
	model := testenv.Fixture(t, "models", "ref-bert-embed.gguf")
	var ref struct {
		Items []struct {
			IDs       []int32   `json:"ids"`
			Embedding []float32 `json:"embedding"`
		} `json:"items"`
	}
	b, err := os.ReadFile(testenv.Fixture(t, "reference", "embed.json"))
	if err != nil {
		t.Skipf("reference: %v", err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	o := testOptions(t, "")
	ctx := context.Background()
	res, err := EnsureQuantized(ctx, model, QuantizeOptions{FType: "q8_0", Rounds: 1}, o)
	if err != nil {
		t.Fatal(err)
	}
	v := res.Variant
	t.Logf("%s: quality report min %.6f mean %.6f (vs its %s source), speed ×%.2f", v.Name, v.Quality.MinCosine, v.Quality.MeanCosine, res.Source.Quantization, v.Quality.SpeedRatio)

	s, err := newSession(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	loaded, err := s.load(ctx, v.Path(), v.Digest, v.Format(), runtimeConfig(modelcache.KindEmbed, 512, 1))
	if err != nil {
		t.Fatal(err)
	}
	req := &wire.EmbedBatch{ModelRef: loaded.ModelRef, Normalize: true}
	for i, it := range ref.Items {
		req.Items = append(req.Items, wire.Item{ID: uint64(i), NTokens: len(it.IDs)})
		req.IDs = append(req.IDs, it.IDs...)
	}
	resp, err := s.pool.Do(ctx, req, 0)
	if err != nil {
		t.Fatal(err)
	}
	vecs := resp.(*wire.Vectors)
	worst := 1.0
	for i, it := range ref.Items {
		c := testenv.Cosine(vecs.Data[i*vecs.Dims:(i+1)*vecs.Dims], it.Embedding)
		worst = min(worst, c)
		if c < 0.999 {
			t.Errorf("item %d (%d ids): cosine to the reference %.6f; want ≥ 0.999", i, len(it.IDs), c)
		}
	}
	t.Logf("Q8_0 vs transformers reference: worst cosine %.6f over %d items", worst, len(ref.Items))
}
