package cli

import (
	"bytes"
	"compress/gzip"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/testmodels"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/model/wordvec"
)

// TestWordVectorModel: the model gen-model learns from a corpus runs in
// llama.cpp, and what llama.cpp computes for a text is what the package
// says it is: the SIF-weighted mean of the text's token vectors, normalized
// (computed here from the learned vectors, in float64).
func TestWordVectorModel(t *testing.T) {
	dir := t.TempDir()
	in, model, out := filepath.Join(dir, "c.jsonl"), filepath.Join(dir, "wv.gguf"), filepath.Join(dir, "v.arrow")
	docs := testmodels.Corpus(200)
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.Text
	}
	writeJSONL(t, in, testCorpus(len(docs)))
	const dims = 30
	runSynapse(t, nil, "gen-model", "--kind", "word-vectors", "--train", in, "--text-field", "text",
		"--dims", "30", "--out", model).wantCode(t, 0)
	runSynapse(t, nil, "embed", in, "-m", model, "--text-field", "text", "-o", out).wantCode(t, 0)

	built, err := wordvec.Build(texts, wordvec.Config{Dims: dims, Seed: 1}, "x")
	if err != nil {
		t.Fatal(err)
	}
	_, rows := readOutput(t, out)
	byID := rowsByID(rows)
	checked := 0
	for i, d := range docs {
		chunks := byID[d.ID]
		if len(chunks) != 1 {
			continue // a long text is cut into windows; the single-chunk ones suffice
		}
		want := sifMean(built, texts[i])
		emb := chunks[0].Emb
		if len(emb) != dims+2 || emb[dims] != 0 || emb[dims+1] != 0 {
			t.Fatalf("doc %s: %d dims ending %v; want %d + 2 sink dims that are zero", d.ID, len(emb), emb[dims:], dims)
		}
		if c := testenv.Cosine(emb[:dims], want); c < 0.9999 {
			t.Errorf("doc %s: cosine %.6f to the SIF-weighted mean of its word vectors; want ≥ 0.9999", d.ID, c)
		}
		checked++
	}
	if checked < 50 {
		t.Fatalf("only %d single-chunk documents checked", checked)
	}
}

// sifMean is Σ weight·vector over the tokens of text, normalized.
func sifMean(b *wordvec.Built, text string) []float32 {
	sum := make([]float64, len(b.Vectors.Unit[0]))
	for _, id := range b.Tokenizer.Tokenize(text, tokenize.Options{}).IDs() {
		w := float64(b.Vectors.Weight[id])
		for j, x := range b.Vectors.Unit[id] {
			sum[j] += w * float64(x)
		}
	}
	var ss float64
	for _, x := range sum {
		ss += x * x
	}
	out := make([]float32, len(sum))
	for j, x := range sum {
		out[j] = float32(x / math.Sqrt(ss))
	}
	return out
}

// TestWordVectorTrainInput: gen-model --train reads its corpus as embed
// does (io/corpus): Parquet and .jsonl.gz give the model the JSON
// Lines file gives, and a bad record fails the command (exit 2) naming the
// file, the line and the reason.
func TestWordVectorTrainInput(t *testing.T) {
	dir := t.TempDir()
	docs := testmodels.Corpus(60)
	ids, texts := make([]string, len(docs)), make([]string, len(docs))
	rows := make([]map[string]any, len(docs))
	for i, d := range docs {
		ids[i], texts[i] = d.ID, d.Text
		rows[i] = map[string]any{"id": d.ID, "text": d.Text}
	}
	jsonl, pq, gz := filepath.Join(dir, "c.jsonl"), filepath.Join(dir, "c.parquet"), filepath.Join(dir, "c.jsonl.gz")
	writeJSONL(t, jsonl, rows)
	writeParquet(t, pq, ids, texts)
	plain, err := os.ReadFile(jsonl)
	if err != nil {
		t.Fatal(err)
	}
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(plain)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gz, zb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	gen := func(in, out string, fields ...string) (int, string) {
		args := []string{"gen-model", "--kind", "word-vectors", "--train", in, "--min-count", "1", "--dims", "8", "--out", out}
		for _, f := range fields {
			args = append(args, "--text-field", f)
		}
		code, _, stderr := runCLI(t, args...)
		return code, stderr
	}
	want := filepath.Join(dir, "jsonl.gguf")
	if code, stderr := gen(jsonl, want, "text"); code != 0 {
		t.Fatalf("gen-model from %s: exit %d (%s); want 0", jsonl, code, stderr)
	}
	for _, in := range []string{pq, gz} {
		out := in + ".gguf"
		if code, stderr := gen(in, out, "text"); code != 0 {
			t.Fatalf("gen-model from %s: exit %d (%s); want 0", in, code, stderr)
		}
		if got, w := sha256File(t, out), sha256File(t, want); got != w {
			t.Errorf("model from %s: %s; want the JSON Lines corpus's %s", filepath.Base(in), got, w)
		}
	}

	lines := strings.SplitAfter(string(plain), "\n")
	for _, tc := range []struct {
		name, line string
		at         int // 1-based line replaced
		fields     []string
		want       string
	}{
		{"malformed", `{"id": "x", "text": "cut`, 3, []string{"text"}, "c.jsonl:3: malformed_json"},
		{"not text", `{"id": "x", "text": 7}`, 5, []string{"text"}, `c.jsonl:5: not_text: field "text" is a JSON number`},
		{"missing field", `{"id": "x", "body": "tides"}`, 2, []string{"text"}, `c.jsonl:2: missing_field: no field "text"`},
		{"second field missing", lines[0], 1, []string{"text", "title"}, `c.jsonl:1: missing_field: no field "title"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := slices.Clone(lines)
			bad[tc.at-1] = strings.TrimSuffix(tc.line, "\n") + "\n"
			in := filepath.Join(t.TempDir(), "c.jsonl")
			if err := os.WriteFile(in, []byte(strings.Join(bad, "")), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "m.gguf")
			code, stderr := gen(in, out, tc.fields...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d naming %q", code, stderr, exitUsage, tc.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("stat %s: %v; want no model written", out, err)
			}
		})
	}
}
