package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/synapse-embed/synapse/engine/testenv"
)

// `synapse embed -m DIR` on static models: random-weight Model2Vec and
// sentence-transformers StaticEmbedding directories against the vectors
// model2vec computes (examples/models/reference_static.py wrote both into
// testdata/static).

type staticReference struct {
	Texts   []string               `json:"texts"`
	Vectors map[string][][]float64 `json:"vectors"`
}

func readStaticReference(t *testing.T) staticReference {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "static", "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref staticReference
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Vectors) != 4 {
		t.Fatalf("reference.json has %d models; want 4", len(ref.Vectors))
	}
	return ref
}

func staticDocs(t *testing.T, path string, texts []string) {
	t.Helper()
	var docs []map[string]any
	for i, s := range texts {
		docs = append(docs, map[string]any{"id": fmt.Sprint(i), "text": s})
	}
	writeJSONL(t, path, docs)
}

// checkStatic compares every output row with the reference vector of its
// text; a zero reference (no token left) wants a zero vector. It returns
// the lowest cosine and the largest |‖got‖/‖want‖ − 1|.
func checkStatic(t *testing.T, out string, want [][]float64) (worst, scale float64) {
	t.Helper()
	_, rows := readOutput(t, out)
	if len(rows) != len(want) {
		t.Fatalf("%s: %d rows for %d texts", out, len(rows), len(want))
	}
	worst = 1
	for _, r := range rows {
		var i int
		fmt.Sscan(r.ID, &i)
		w := make([]float32, len(want[i]))
		var wn float64
		for d, v := range want[i] {
			w[d], wn = float32(v), wn+v*v
		}
		if len(r.Emb) != len(w) {
			t.Fatalf("doc %s: %d dims; want %d", r.ID, len(r.Emb), len(w))
		}
		if wn == 0 {
			if n := norm(r.Emb); n != 0 {
				t.Errorf("doc %s (%q): norm %v; want a zero vector (no token left)", r.ID, r.ID, n)
			}
			continue
		}
		worst = min(worst, testenv.Cosine(r.Emb, w))
		scale = max(scale, math.Abs(norm(r.Emb)/math.Sqrt(wn)-1))
	}
	return worst, scale
}

// TestEmbedStatic: each static layout gives the library's vectors (cosine
// ≥ 0.9999), to Parquet; model2vec's normalize false and --no-normalize
// give its unnormalized means (same length), a Normalize module normalizes
// whatever --no-normalize says; --dtype float16 stays within its precision.
func TestEmbedStatic(t *testing.T) {
	ref := readStaticReference(t)
	work := t.TempDir()
	in := filepath.Join(work, "in.jsonl")
	staticDocs(t, in, ref.Texts)
	// st-static-sub is st-static in the Hub's static-retrieval-mrl-en-v1
	// layout (0_StaticEmbedding/): the same vectors.
	models := map[string]string{"m2v-f32": "m2v-f32", "m2v-weighted": "m2v-weighted", "m2v-int8": "m2v-int8",
		"st-static": "st-static", "st-static-sub": "st-static"}
	for name, refName := range models {
		want := ref.Vectors[refName]
		t.Run(name, func(t *testing.T) {
			model := filepath.Join("testdata", "static", name)
			out := filepath.Join(work, name+".parquet")
			res := runSynapse(t, nil, "embed", in, "-m", model, "-o", out)
			res.wantCode(t, exitOK)
			if c, _ := checkStatic(t, out, want); c < 0.9999 {
				t.Errorf("lowest cosine %.7f to the reference; want ≥ 0.9999", c)
			}
		})
	}
	raw := filepath.Join(work, "raw.parquet")
	runSynapse(t, nil, "embed", in, "-m", filepath.Join("testdata", "static", "m2v-weighted"), "-o", raw, "--no-normalize").wantCode(t, exitOK)
	if c, s := checkStatic(t, raw, ref.Vectors["m2v-weighted"]); c < 0.9999 || s > 1e-3 {
		t.Errorf("m2v-weighted --no-normalize: cosine %.7f, length off by %.2g; want ≥ 0.9999 and ≤ 1e-3 (model2vec's normalize false)", c, s)
	}
	// A Normalize module (or Model2Vec's normalize true) is the model's:
	// applied whatever --no-normalize says, as for an ONNX model's chain.
	stRaw := filepath.Join(work, "st-raw.parquet")
	runSynapse(t, nil, "embed", in, "-m", filepath.Join("testdata", "static", "st-static"), "-o", stRaw, "--no-normalize").wantCode(t, exitOK)
	if c, s := checkStatic(t, stRaw, ref.Vectors["st-static"]); c < 0.9999 || s > 1e-4 {
		t.Errorf("st-static --no-normalize: cosine %.7f, length off by %.2g; want the Normalize module applied", c, s)
	}
	f16 := filepath.Join(work, "f16.parquet")
	runSynapse(t, nil, "embed", in, "-m", filepath.Join("testdata", "static", "m2v-f32"), "-o", f16, "--dtype", "float16").wantCode(t, exitOK)
	if vecs := readFloat16(t, f16); len(vecs) != len(ref.Texts) {
		t.Errorf("--dtype float16: %d rows; want %d", len(vecs), len(ref.Texts))
	} else {
		for id, v := range vecs {
			var i int
			fmt.Sscan(id, &i)
			w := ref.Vectors["m2v-f32"][i]
			wf := make([]float32, len(w))
			for d := range w {
				wf[d] = float32(w[d])
			}
			if norm(wf) > 0 && testenv.Cosine(v, wf) < 0.999 {
				t.Errorf("--dtype float16: doc %s cosine %.6f; want ≥ 0.999", id, testenv.Cosine(v, wf))
			}
		}
	}
}

// readFloat16 reads a float16 Parquet output's vectors by id.
func readFloat16(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tbl, err := pqarrow.ReadTable(context.Background(), f, nil, pqarrow.ArrowReadProperties{}, memory.NewGoAllocator())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 1000)
	defer tr.Release()
	out := map[string][]float32{}
	for tr.Next() {
		rec := tr.RecordBatch()
		ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.String)
		emb := rec.Column(rec.Schema().FieldIndices("embedding")[0]).(*array.FixedSizeList)
		vals := emb.ListValues().(*array.Float16)
		n := int(emb.DataType().(*arrow.FixedSizeListType).Len())
		for i := range int(rec.NumRows()) {
			v := make([]float32, n)
			for d := range v {
				v[d] = vals.Value(i*n + d).Float32()
			}
			out[ids.Value(i)] = v
		}
	}
	return out
}

// TestEmbedStaticPreviousAndShards: --previous copies the unchanged
// documents' rows, and two shards merged give the single run's rows.
func TestEmbedStaticPreviousAndShards(t *testing.T) {
	ref := readStaticReference(t)
	work := t.TempDir()
	model := filepath.Join("testdata", "static", "m2v-int8")
	in := filepath.Join(work, "in.jsonl")
	staticDocs(t, in, ref.Texts)
	first := filepath.Join(work, "first.arrow")
	runSynapse(t, nil, "embed", in, "-m", model, "-o", first).wantCode(t, exitOK)
	_, firstRows := readOutput(t, first)

	changed := append([]string(nil), ref.Texts...)
	changed[2] = "a new text about the gene"
	in2 := filepath.Join(work, "in2.jsonl")
	staticDocs(t, in2, changed)
	second := filepath.Join(work, "second.arrow")
	res := runSynapse(t, nil, "embed", in2, "-m", model, "-o", second, "--previous", first)
	res.wantCode(t, exitOK)
	if m := previousRE.FindStringSubmatch(res.stdout); m == nil || m[1] != fmt.Sprint(len(ref.Texts)-1) || m[2] != "1" {
		t.Errorf("--previous: summary %q; want %d unchanged, 1 changed", m, len(ref.Texts)-1)
	}
	if c, _ := checkStatic(t, first, ref.Vectors["m2v-int8"]); c < 0.9999 {
		t.Errorf("int8 embeddings: cosine %.7f; want ≥ 0.9999", c)
	}

	sharded := filepath.Join(work, "sharded.arrow")
	for i := range 2 {
		runSynapse(t, nil, "embed", in, "-m", model, "-o", sharded, "--shard", fmt.Sprintf("%d/2", i)).wantCode(t, exitOK)
	}
	merged := filepath.Join(work, "merged.arrow")
	runSynapse(t, nil, "merge", sharded, "-o", merged).wantCode(t, exitOK)
	_, mergedRows := readOutput(t, merged)
	sameRows(t, "2 shards merged vs one run", mergedRows, firstRows)
}

// TestInspectStatic: inspect names the architecture and the route.
func TestInspectStatic(t *testing.T) {
	for name, want := range map[string]string{"m2v-weighted": "model2vec", "st-static": "StaticEmbedding"} {
		res := runSynapse(t, nil, "inspect", filepath.Join("testdata", "static", name))
		res.wantCode(t, exitOK)
		for _, s := range []string{"architecture  " + want, "static engine", "mean of the token rows"} {
			if !strings.Contains(res.stdout, s) {
				t.Errorf("inspect %s: no %q in\n%s", name, s, res.stdout)
			}
		}
	}
}

// TestModelsAddStaticRefused: models add names a static model and the way
// to run it (exit 2), rather than trying to convert it.
func TestModelsAddStaticRefused(t *testing.T) {
	res := runSynapse(t, []string{"SYNAPSE_MODELS=" + t.TempDir(), "SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}, "models", "add", filepath.Join("testdata", "static", "m2v-f32"))
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "a static model") || !strings.Contains(res.stderr, "-m testdata/static/m2v-f32") {
		t.Errorf("models add of a static model: %s", res.stderr)
	}
}
