//go:build cgo

package convert_test

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/convert"
	"github.com/synapse-embed/synapse/model/convert/reftest"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// TestRealMiniLM converts all-MiniLM-L6-v2's safetensors into a model
// cache, embeds the reference's 1,000 SciFact texts with the converted
// graph (ONNX Runtime run by the test, mean pooling and normalization as
// its modules.json says, truncated at its max_seq_length) and compares
// them with sentence-transformers' own vectors: min cosine ≥ 0.9999.
// The cli's TestRealConvertMiniLM runs the same through `synapse embed`.
func TestRealMiniLM(t *testing.T) {
	dir := testenv.RealModel(t, "all-MiniLM-L6-v2")
	ref, err := reftest.Read("all-MiniLM-L6-v2")
	if err != nil {
		t.Fatal(err)
	}
	initORT(t)
	st, err := modelcache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := convert.Cached(context.Background(), st, dir, convert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.LoadHF(filepath.Join(res.Entry.Dir(), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	ids, texts := corpusTexts(t, ref.Count)
	pre, suf := tok.Affixes()
	var seqs [][]int32
	for _, text := range texts {
		body := tok.Tokenize(text, tokenize.Options{}).IDs()
		body = body[:min(len(body), ref.Pipeline.MaxSeqLength-len(pre)-len(suf))]
		seqs = append(seqs, append(append(append([]int32{}, pre...), body...), suf...))
	}
	got := map[string][]float32{}
	const batch = 16
	for i := 0; i < len(seqs); i += batch {
		hidden := runGraph(t, res.Entry.Path(), "last_hidden_state", seqs[i:min(i+batch, len(seqs))])
		for k, h := range hidden {
			got[ids[i+k]] = meanNormalized(h)
		}
	}
	a := ref.Compare(got)
	t.Logf("converted all-MiniLM-L6-v2 against sentence-transformers: min cosine %.8f (id %s), mean %.8f over %d texts", a.Min, a.Worst, a.Mean, ref.Count-a.Missing)
	if a.Missing > 0 || a.Min < 0.9999 {
		t.Errorf("min cosine %.6f, %d missing; want min ≥ 0.9999, none missing", a.Min, a.Missing)
	}
}

// corpusTexts reads the first n SciFact documents' ids and texts as the
// reference embedded them: (title + " " + text), trimmed.
func corpusTexts(t *testing.T, n int) (ids, texts []string) {
	t.Helper()
	f, err := os.Open(testenv.Fixture(t, "corpora", "scifact", "corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for len(ids) < n && sc.Scan() {
		var d struct {
			ID    string `json:"_id"`
			Title string `json:"title"`
			Text  string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		ids, texts = append(ids, d.ID), append(texts, strings.TrimSpace(d.Title+" "+d.Text))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ids, texts
}

// meanNormalized is the mean of the rows, scaled to unit length.
func meanNormalized(h [][]float64) []float32 {
	v := make([]float64, len(h[0]))
	for _, row := range h {
		for d, x := range row {
			v[d] += x / float64(len(h))
		}
	}
	var s float64
	for _, x := range v {
		s += x * x
	}
	out := make([]float32, len(v))
	for d, x := range v {
		out[d] = float32(x / math.Sqrt(s))
	}
	return out
}
