package job

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
// calibrated on from their kept vectors (one pass). Against the two passes
// synapse made before (twoPass: the calibration's documents embedded again
// by the run), with documents inside and past the calibration, --truncate
// and --dedup (repeated texts) on: the same ranges and metadata, the same
// rows, and codes that differ by at most one step, in at most 1 of 500.
// Not byte for byte: llama.cpp rounds a sequence by its place in its batch
// (pipeline.pack), and the calibration's batches are not the run's, so a
// value within an ulp of a code's boundary may fall either side (2 of the
// 2,880 codes here).
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
	mdOne, rowsOne, codesOne := int8Output(t, one)
	mdTwo, rowsTwo, codesTwo := int8Output(t, two)
	if !mdOne.Equal(mdTwo) {
		t.Errorf("metadata: one pass\n%v\ntwo passes\n%v", mdOne, mdTwo)
	}
	if !slices.Equal(rowsOne, rowsTwo) || len(codesOne) != len(codesTwo) {
		t.Fatalf("rows: one pass %d, two passes %d; want the same rows", len(rowsOne), len(rowsTwo))
	}
	differ := 0
	for i := range codesOne {
		if d := int(int8(codesOne[i])) - int(int8(codesTwo[i])); d != 0 {
			differ++
			if d < -1 || d > 1 {
				t.Errorf("code %d: one pass %d, two passes %d; want at most one step apart", i, int8(codesOne[i]), int8(codesTwo[i]))
			}
		}
	}
	if differ*500 > len(codesOne) {
		t.Errorf("%d of %d codes differ between one pass and two; want at most 1 in 500", differ, len(codesOne))
	}
	t.Logf("%d of %d int8 codes differ by one step between one pass and two", differ, len(codesOne))
	var line string
	for _, l := range sum.Lines {
		if l.Label == "calibration" {
			line = l.Text
		}
	}
	if !strings.Contains(line, "written from those vectors") || strings.Contains(line, "(0 chunks)") {
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
