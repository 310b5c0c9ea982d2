// Command randvec writes the inputs of examples/bench/search-faiss.sh:
// embedding outputs of random unit vectors, too many to embed with a model
// here, written by synapse's own output writer with the schema and metadata
// of a real synapse embed output, and the raw vectors of such an output for
// faiss (no Arrow reader is packaged for Debian's Python).
//
//	randvec gen -like REAL.arrow [-n 1000000] [-queries 300] [-seed 1] -out DIR
//	randvec raw FILE.arrow PREFIX
//	randvec convert FILE.arrow OUT.parquet
//
// gen draws n corpus vectors and the queries from one seeded generator
// (each a vector of standard normals, normalised) and writes, in one pass,
// DIR/corpus.float32.arrow, DIR/corpus.int8.arrow, DIR/corpus.binary.arrow
// and DIR/queries.arrow (float32). Every document has one chunk; ids are
// d0000000, d0000001, … in row order (so the row number faiss returns and
// the id synapse writes sort alike) and q000, q001, … for the queries. The
// schema metadata is REAL.arrow's (model, pooling, normalisation, dims,
// settings digest) with the dtype, the int8 ranges and synapse.inputs set
// as synapse embed would set them: the int8 ranges are the minimum and
// maximum of the first 1,000 corpus vectors, as embed calibrates on its
// input's first 1,000 documents.
//
// raw writes PREFIX.vec (the embedding column's bytes as stored, row after
// row: float32 little-endian, int8 codes, or binary's packed bits with the
// top bit flipped), PREFIX.ids (one id a line) and PREFIX.json (dtype,
// dims, rows, ranges).
//
// convert copies an output's record batches, schema and metadata into
// another format (by OUT's extension) through synapse's own table writer,
// the Parquet settings embed writes with: what embed -o OUT.parquet would
// have written (examples/bench/dtype-embed.sh measures Parquet sizes so).
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/pipeline/job"
)

// ctx is the context of the io calls: randvec is not cancelled.
var ctx = context.Background()

// calibrationDocs is how many of the first corpus vectors give the int8
// ranges (job.DefaultCalibrationDocs, embed's default).
const calibrationDocs = job.DefaultCalibrationDocs

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = genCmd(os.Args[2:])
	case "raw":
		if len(os.Args) != 4 {
			usage()
		}
		err = raw(os.Args[2], os.Args[3])
	case "convert":
		if len(os.Args) != 4 {
			usage()
		}
		err = convert(os.Args[2], os.Args[3])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "randvec:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: randvec gen -like REAL.arrow [-n N] [-queries Q] [-seed S] -out DIR\n       randvec raw FILE.arrow PREFIX\n       randvec convert FILE.arrow OUT.parquet")
	os.Exit(2)
}

func genCmd(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	like := fs.String("like", "", "a synapse embed output (float32) whose schema metadata the outputs take")
	n := fs.Int("n", 1_000_000, "corpus vectors (one chunk per document)")
	nq := fs.Int("queries", 300, "query vectors")
	seed := fs.Uint64("seed", 1, "generator seed")
	out := fs.String("out", "", "output directory")
	fs.Parse(args)
	switch {
	case *like == "" || *out == "" || fs.NArg() > 0:
		usage()
	case *n < calibrationDocs || *nq < 1:
		return fmt.Errorf("gen: -n must be at least %d and -queries at least 1", calibrationDocs)
	}
	tmpl, err := output.FileSchema(ctx, *like)
	if err != nil {
		return fmt.Errorf("gen: -like %s: %w", *like, err)
	}
	return gen(tmpl.Metadata(), *n, *nq, *seed, *out)
}

// outFile is one of gen's files being written.
type outFile struct {
	d vector.Dtype
	q *vector.Quantizer
	w *output.Writer
}

func gen(tmpl arrow.Metadata, n, nq int, seed uint64, dir string) error {
	settings, err := vector.SettingsFromMetadata(tmpl.GetValue)
	if err != nil {
		return fmt.Errorf("gen: -like: %w", err)
	}
	dims := settings.Dims
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	first := make([][]float32, calibrationDocs)
	ranges := vector.NewRanges(dims)
	for i := range first {
		first[i] = randomUnit(rng, dims)
		ranges.Observe(first[i])
	}
	inputs := fmt.Sprintf("randvec: %d random unit vectors of %d dims (seed %d)", n, dims, seed)
	var outs []*outFile
	abort := func() {
		for _, o := range outs {
			o.w.Abort()
		}
	}
	for _, d := range []vector.Dtype{vector.Float32, vector.Int8, vector.Binary} {
		var r *vector.Ranges
		if d.Ranged() {
			r = ranges
		}
		o, err := create(filepath.Join(dir, "corpus."+d.String()+".arrow"), tmpl, settings, d, r, inputs)
		if err != nil {
			abort()
			return err
		}
		outs = append(outs, o)
	}
	for i := range n {
		var v []float32
		if i < calibrationDocs {
			v = first[i]
		} else {
			v = randomUnit(rng, dims)
		}
		for _, o := range outs {
			if err := o.put(i, fmt.Sprintf("d%07d", i), v); err != nil {
				abort()
				return err
			}
		}
	}
	for _, o := range outs {
		if err := o.w.Commit(); err != nil {
			return err
		}
	}
	qs, err := create(filepath.Join(dir, "queries.arrow"), tmpl, settings, vector.Float32, nil,
		fmt.Sprintf("randvec: %d random unit query vectors of %d dims (seed %d, after the corpus)", nq, dims, seed))
	if err != nil {
		return err
	}
	for i := range nq {
		if err := qs.put(i, fmt.Sprintf("q%03d", i), randomUnit(rng, dims)); err != nil {
			qs.w.Abort()
			return err
		}
	}
	return qs.w.Commit()
}

// create starts an embedding output of dtype d with the template's
// metadata, its vector settings and dtype keys set as embed sets them.
func create(path string, tmpl arrow.Metadata, s vector.Settings, d vector.Dtype, r *vector.Ranges, inputs string) (*outFile, error) {
	meta := make(map[string]string, tmpl.Len()+4)
	for i, k := range tmpl.Keys() {
		meta[k] = tmpl.Values()[i]
	}
	delete(meta, vector.MetaRanges)
	delete(meta, vector.MetaCalibration)
	s.Dtype, s.Ranges = "", ""
	if d != vector.Float32 {
		s.Dtype = d.String()
	}
	if r != nil {
		s.Ranges = r.Digest()
		meta[vector.MetaRanges] = r.JSON()
		meta[vector.MetaCalibration] = fmt.Sprintf("minimum and maximum of the first %d vectors (randvec)", calibrationDocs)
	}
	for k, v := range s.Metadata() {
		meta[k] = v
	}
	meta[vector.MetaDtype] = d.String()
	meta["synapse.inputs"] = inputs
	q, err := vector.NewQuantizer(d, s.Dims, r)
	if err != nil {
		return nil, err
	}
	w, err := output.Create(path, output.WriterOptions{Schema: output.EmbedSchemaOf(s.Dims, d, meta)})
	if err != nil {
		return nil, err
	}
	return &outFile{d: d, q: q, w: w}, nil
}

// put writes document i, one chunk of vector v.
func (o *outFile) put(i int, id string, v []float32) error {
	row := output.EmbedRow{ID: id, TokenEnd: 128, ByteEnd: 600, CPEnd: 600, NTokens: 128, DocHash: sha256.Sum256([]byte(id))}
	if o.d == vector.Float32 {
		row.Embedding = v
	} else {
		row.Vector = o.q.Append(nil, v)
	}
	return o.w.Put(int64(i), int64(i), output.EmbedRows{row}, nil)
}

// randomUnit is a vector of standard normals, normalised in float64.
func randomUnit(rng *rand.Rand, dims int) []float32 {
	x := make([]float64, dims)
	var s float64
	for i := range x {
		x[i] = rng.NormFloat64()
		s += x[i] * x[i]
	}
	v := make([]float32, dims)
	for i := range x {
		v[i] = float32(x[i] / math.Sqrt(s))
	}
	return v
}

// meta is PREFIX.json.
type meta struct {
	Dtype  vector.Dtype   `json:"dtype"`
	Dims   int            `json:"dims"`
	Rows   int64          `json:"rows"`
	Ranges *vector.Ranges `json:"ranges,omitempty"`
}

// raw writes the vectors and ids of an embedding output for faiss.
func raw(path, prefix string) error {
	sc, err := output.FileSchema(ctx, path)
	if err != nil {
		return err
	}
	s, err := vector.SettingsFromMetadata(sc.Metadata().GetValue)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	d, r, err := vector.FromMetadata(sc.Metadata().GetValue, s.Dims)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	vf, err := os.Create(prefix + ".vec")
	if err != nil {
		return err
	}
	idf, err := os.Create(prefix + ".ids")
	if err != nil {
		vf.Close()
		return err
	}
	vw, iw := bufio.NewWriterSize(vf, 1<<20), bufio.NewWriterSize(idf, 1<<16)
	m := meta{Dtype: d, Dims: s.Dims, Ranges: r}
	err = output.EachBatch(ctx, path, nil, func(rec arrow.RecordBatch) error {
		ids, ok := rec.Column(rec.Schema().FieldIndices(output.ColID)[0]).(*array.String)
		if !ok {
			return errors.New("id column is not a string")
		}
		col, err := vector.ColumnOf(rec.Column(rec.Schema().FieldIndices(output.ColEmbedding)[0]), d, s.Dims)
		if err != nil {
			return err
		}
		vw.Write(col.Data)
		for i := range col.Rows {
			iw.WriteString(ids.Value(i) + "\n")
		}
		m.Rows += int64(col.Rows)
		return nil
	})
	err = errors.Join(err, vw.Flush(), iw.Flush(), vf.Close(), idf.Close())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(prefix+".json", append(b, '\n'), 0o644)
}

// convert writes path's batches to out in out's format.
func convert(path, out string) error {
	sc, err := output.FileSchema(ctx, path)
	if err != nil {
		return err
	}
	f, err := output.FormatOf(out)
	if err != nil {
		return err
	}
	t, err := output.CreateTable(ctx, out, f, sc)
	if err != nil {
		return err
	}
	if err := output.EachBatch(ctx, path, nil, t.Write); err != nil {
		t.Abort()
		return fmt.Errorf("%s: %w", path, err)
	}
	return t.Commit()
}
