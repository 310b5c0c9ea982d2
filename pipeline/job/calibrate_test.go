package job

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/testmodels"
)

// TestCalibrateOnePass: int8 calibrated on the input writes the chunks it
// calibrated on from the answers to its requests (one pass), and its
// output is byte for byte that of the two passes synapse made before
// (twoPass: the calibration's documents embedded again by the run), with
// documents inside and past the calibration, --truncate and --dedup
// (repeated texts) on. llama.cpp rounds a sequence by its place in its
// batch: the calibration sends the run's own requests, so the bytes agree.
func TestCalibrateOnePass(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	var b bytes.Buffer
	for i, d := range testmodels.Corpus(90) {
		text := d.Title + " " + d.Text
		if i%10 == 9 {
			text = d.Title // some short documents, and repeats of them below
		}
		if i%17 == 16 {
			text = testmodels.Corpus(9)[8].Title
		}
		line, _ := json.Marshal(map[string]any{"id": d.ID, "text": text})
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	model := testmodels.Model(t, "tiny", func(modelgen.Vocab) modelgen.BERT {
		return modelgen.BERT{Name: "synapse-embed-test", Layers: 1, Width: 32, Heads: 2, FFN: 64, Context: 512,
			Pooling: modelgen.PoolingMean, WeightType: gguf.GGMLTypeF32, Seed: 7, Vocab: testmodels.Vocab()}
	})
	run := func(name string, twoPass bool) (string, Summary) {
		out := filepath.Join(dir, name)
		sum, err := Embed(context.Background(), EmbedOptions{Normalize: true, Dtype: vector.Int8, CalibrationDocs: 40, ChunkTokens: 64, Truncate: true,
			Dedup: true, twoPass: twoPass, Options: Options{Inputs: []string{in}, Model: model, Out: out, BatchTokens: 400,
				Workers: 2, Threads: 1, Worker: []string{testenv.Binary(t), "worker"}, Env: []string{"SYNAPSE_LLAMA_LIB=" + testenv.LlamaLib(t)}}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return out, sum
	}
	one, sum := run("one.arrow", false)
	two, _ := run("two.arrow", true)
	a, err := os.ReadFile(one)
	if err != nil {
		t.Fatal(err)
	}
	c, err := os.ReadFile(two)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, c) {
		_, _, codesOne := int8Output(t, one)
		_, _, codesTwo := int8Output(t, two)
		differ := 0
		for i := range min(len(codesOne), len(codesTwo)) {
			if codesOne[i] != codesTwo[i] {
				differ++
			}
		}
		t.Errorf("one pass: %d bytes; two passes: %d bytes, not the same bytes (%d of %d codes differ)", len(a), len(c), differ, len(codesOne))
	}
	var line string
	for _, l := range sum.Lines {
		if l.Label == "calibration" {
			line = l.Text
		}
	}
	if !strings.Contains(line, "chunks it embedded written from them") || strings.Contains(line, "(0 of ") {
		t.Errorf("calibration line %q: want the chunks written from the calibration's vectors", line)
	}
}

// int8Output is an int8 output's metadata, its rows (all but the vector)
// and its codes, one vector after another.
func int8Output(t *testing.T, path string) (arrow.Metadata, []string, []byte) {
	t.Helper()
	var md arrow.Metadata
	var rows []string
	var codes []byte
	err := output.EachBatch(context.Background(), path, nil, func(rec arrow.RecordBatch) error {
		md = rec.Schema().Metadata()
		emb := rec.Schema().FieldIndices(output.ColEmbedding)[0]
		col, err := vector.ColumnOf(rec.Column(emb), vector.Int8, 32)
		if err != nil {
			return err
		}
		codes = append(codes, col.Data...)
		for i := range int(rec.NumRows()) {
			var row []string
			for c := range int(rec.NumCols()) {
				if c != emb {
					row = append(row, rec.Column(c).ValueStr(i))
				}
			}
			rows = append(rows, strings.Join(row, "|"))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return md, rows, codes
}
