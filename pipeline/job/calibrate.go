package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/previous"
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/pipeline"
)

// DefaultCalibrationDocs is EmbedOptions.CalibrationDocs' default.
const DefaultCalibrationDocs = 1000

// quantization is how a run writes its vectors: the quantizer of its dtype
// and, for int8 and uint8, the ranges and where they came from.
type quantization struct {
	q      *vector.Quantizer
	ranges *vector.Ranges
	source string
	// cost says what calibrating on the input took ("" when the ranges
	// came from a file or the previous output); the chunks it embedded
	// are written from its vectors (embedKind.cache), not embedded again.
	cost string
}

// checkDtype refuses, before the model loads, a dtype option that cannot
// work: a calibration file that is no embedding output, or a calibration
// that would have to read an input twice that can be read once. (A
// calibration file that is also an output is refused by Options.Check:
// --calibration is one of the Files.)
func (o *EmbedOptions) checkDtype() error {
	if o.Dtype == "" {
		o.Dtype = vector.Float32
	}
	if !o.Dtype.Ranged() {
		if len(o.Calibration) > 0 {
			return configErrorf("--calibration: only int8 and uint8 have ranges, not --dtype %s", o.Dtype)
		}
		return nil
	}
	for _, p := range o.Calibration {
		if err := statInput(p); err != nil {
			return fmt.Errorf("--calibration: %w", err)
		}
		if _, err := output.FileSchema(context.Background(), p); err != nil {
			return configErrorf("--calibration %s: not an Arrow IPC or Parquet embedding output: %w", p, err)
		}
	}
	switch {
	case o.CalibrationDocs < 0:
		return configErrorf("--calibration-docs %d must not be negative", o.CalibrationDocs)
	case o.CalibrationDocs == 0:
		o.CalibrationDocs = DefaultCalibrationDocs
	}
	if len(o.Calibration) > 0 || len(o.Previous) > 0 {
		return nil
	}
	for _, in := range o.Inputs {
		if objstore.IsURL(in) {
			continue // an object can be read twice
		}
		if st, err := os.Stat(in); in == "-" || (err == nil && !st.Mode().IsRegular()) {
			return configErrorf("--dtype %s calibrates on the first documents of the input, read twice: %s is a stream (give --calibration FILE, an earlier output)", o.Dtype, in)
		}
	}
	return nil
}

// quantization decides the run's quantization once the model is loaded;
// cur are the run's vector settings without the dtype.
func (o *EmbedOptions) quantization(ctx context.Context, r *runner, kind outKind, k *embedKind, s *embedSink, prev *previous.Set, cur vector.Settings) (*quantization, error) {
	qz := &quantization{}
	var err error
	switch {
	case !o.Dtype.Ranged():
	case len(o.Calibration) > 0:
		qz.ranges, qz.source, err = o.calibrationFiles(ctx, cur, s.dims)
	case prev != nil && prev.Dtype() == o.Dtype:
		qz.ranges, err = rangesOf(prev.Metadata(), s.dims)
		qz.source = "the --previous output's ranges"
	default:
		if err := kind.calibrates(o); err != nil {
			return nil, err
		}
		began := time.Now()
		var tokens int
		qz.ranges, qz.source, tokens, err = o.calibrate(ctx, r, k, s)
		if err == nil {
			qz.cost = fmt.Sprintf("%s, embedded first with the rest of their packing group (%d tokens, %.1fs), their answers written once the ranges were fixed, not asked again",
				qz.source, tokens, time.Since(began).Seconds())
		}
		if _, over, _ := k.cache.counts(); err == nil && over > 0 {
			qz.cost += fmt.Sprintf("; %d of their chunks, past the %d MiB kept, are embedded again", over, calibrationKeepBytes>>20)
		}
	}
	if err != nil {
		return nil, err
	}
	if qz.q, err = vector.NewQuantizer(o.Dtype, s.dims, qz.ranges); err != nil {
		return nil, err
	}
	return qz, nil
}

func rangesOf(md arrow.Metadata, dims int) (*vector.Ranges, error) {
	_, r, err := vector.FromMetadata(md.GetValue, dims)
	if err != nil {
		return nil, configErrorf("--previous: %w", err)
	}
	return r, nil
}

// calibrationFiles are the ranges of an earlier output of the same
// settings: its own ranges if it is int8 or uint8, else the minimum and
// maximum of its vectors.
func (o *EmbedOptions) calibrationFiles(ctx context.Context, cur vector.Settings, dims int) (*vector.Ranges, string, error) {
	ranges := vector.NewRanges(dims)
	var stored string
	var rows int64
	for _, p := range o.Calibration {
		sc, err := output.FileSchema(ctx, p)
		if err != nil {
			return nil, "", configErrorf("--calibration %s: %w", p, err)
		}
		d, r, err := o.checkCalibration(p, sc, cur, dims)
		if err != nil {
			return nil, "", err
		}
		switch {
		case r != nil && stored != "" && r.Digest() != stored:
			return nil, "", configErrorf("--calibration %s: its ranges differ from %s's", p, o.Calibration[0])
		case r != nil:
			ranges, stored = r, r.Digest()
			continue
		case !d.Float():
			return nil, "", configErrorf("--calibration %s: a %s output has no ranges: give a float32, float16, int8 or uint8 output", p, d)
		}
		n, err := observeFile(ctx, p, d, dims, ranges)
		if err != nil {
			return nil, "", configErrorf("--calibration %s: %w", p, err)
		}
		rows += n
	}
	if stored != "" {
		return ranges, "the ranges of " + o.Calibration[0], nil
	}
	if ranges.Empty() {
		return nil, "", configErrorf("--calibration %s: no vectors", o.Calibration[0])
	}
	return ranges, fmt.Sprintf("minimum and maximum of the %d vectors of %s", rows, o.Calibration[0]), nil
}

// checkCalibration refuses a calibration file of other vector settings
// (dtype and ranges aside) and returns its dtype and stored ranges.
func (o *EmbedOptions) checkCalibration(p string, sc *arrow.Schema, cur vector.Settings, dims int) (vector.Dtype, *vector.Ranges, error) {
	md := sc.Metadata()
	fs, err := vector.SettingsFromMetadata(md.GetValue)
	if err != nil {
		return "", nil, configErrorf("--calibration %s: %w", p, err)
	}
	fs.Dtype, fs.Ranges, cur.Dtype, cur.Ranges = "", "", "", ""
	if diff := cur.Diff(fs); diff != "" {
		return "", nil, configErrorf("--calibration %s was made with other settings: %s", p, diff)
	}
	d, r, err := vector.FromMetadata(md.GetValue, dims)
	if err != nil {
		return "", nil, configErrorf("--calibration %s: %w", p, err)
	}
	return d, r, nil
}

// observeFile widens ranges by every vector of a float embedding output.
func observeFile(ctx context.Context, p string, d vector.Dtype, dims int, ranges *vector.Ranges) (int64, error) {
	var rows int64
	buf := make([]float32, 0, dims)
	err := output.EachBatch(ctx, p, nil, func(rec arrow.RecordBatch) error {
		idx := rec.Schema().FieldIndices(output.ColEmbedding)
		if len(idx) != 1 {
			return errors.New("no embedding column")
		}
		col, err := vector.ColumnOf(rec.Column(idx[0]), d, dims)
		if err != nil {
			return err
		}
		for i := range col.Rows {
			ranges.Observe(vector.Decode(buf[:0], d, dims, col.Row(i), nil))
		}
		rows += int64(col.Rows)
		return nil
	})
	return rows, err
}

// calibrate embeds the first CalibrationDocs documents of the whole input
// (not of a shard: every shard, and a resumed run, reads the same ones and
// makes the same requests, so their ranges are the single run's) and
// returns the minimum and maximum of their vectors. Rows that are errors
// are left out; they are reported by the run itself.
//
// It runs the pipeline as the run will, packing and all, to the end of the
// packing group of the last of those documents, so that its requests are
// the run's: their answers are kept (k.cache) and the run, meeting the
// same requests, writes them instead of sending them again.
//
// source (kept in the output's metadata) says where the ranges came from;
// tokens are what the calibration sent.
func (o *EmbedOptions) calibrate(ctx context.Context, r *runner, k *embedKind, s *embedSink) (ranges *vector.Ranges, source string, tokens int, err error) {
	ro := o.Read
	ro.Shard, ro.Shards, ro.Parts, ro.StartIndex, ro.Context, ro.UniqueIDs = 0, 0, nil, 0, ctx, true
	rd, err := corpus.Open(o.Inputs, ro)
	if err != nil {
		return nil, "", 0, err
	}
	defer rd.Close()
	src := &calSource{src: &incSource{src: rd, withText: o.WithText}, want: o.CalibrationDocs, last: -1}
	if o.Dedup {
		src.src.window = newWindow[struct{}]()
	}
	sink := &calSink{src: src, emb: s, k: k, ranges: vector.NewRanges(s.dims)}
	cache := newCalCache()
	cfg := r.config(o.BatchTokens, 0)
	cfg.Stats, cfg.Replay = &pipeline.Stats{}, 0
	if err := pipeline.Run(ctx, cfg, pipeline.Kind[doc, Chunk, []float32](&calKind{embedKind: k, cache: cache}), src, sink); err != nil {
		return nil, "", 0, fmt.Errorf("calibration: %w", err)
	}
	if sink.ranges.Empty() {
		return nil, "", 0, configErrorf("--dtype %s: the first %d documents of the input gave no vector to calibrate on (give --calibration FILE)", o.Dtype, o.CalibrationDocs)
	}
	source = fmt.Sprintf("minimum and maximum of the %d chunks of the first %d documents of the input", sink.chunks, min(src.docs, o.CalibrationDocs))
	if !o.twoPass {
		k.cache = cache // the run takes these answers instead of sending the requests again
	}
	return sink.ranges, source, int(cfg.Stats.Tokens.Load()), nil
}

// calSource reads the documents a calibration embeds: the first want,
// then the rest of the packing group of the last of them.
type calSource struct {
	src        *incSource
	want, docs int
	last       int64        // the Index of the want-th document; -1 before it is read
	group      int64        // its packing group
	lastSeen   atomic.Int64 // last, for the sink (another goroutine)
	lastKnown  atomic.Bool
}

func (c *calSource) Next() (doc, error) {
	d, err := c.src.Next()
	if err != nil {
		return d, err
	}
	if c.docs >= c.want && d.Group != c.group {
		return doc{}, io.EOF
	}
	if c.docs++; c.docs == c.want {
		c.last, c.group = d.Index, d.Group
		c.lastSeen.Store(d.Index)
		c.lastKnown.Store(true)
	}
	return d, nil
}

// calibrates tells whether the document of index i is one of the first
// want (the sink sees a document after the source has read it).
func (c *calSource) calibrates(i int64) bool {
	return !c.lastKnown.Load() || i <= c.lastSeen.Load()
}

// calSink widens the ranges by the vectors of the calibration's documents;
// the documents read past them only fill the requests.
type calSink struct {
	src    *calSource
	emb    *embedSink
	k      *embedKind
	ranges *vector.Ranges
	chunks int
}

func (c *calSink) Put(r pipeline.Result[doc, Chunk, []float32]) error {
	if r.File != nil || r.RowErr != nil || !c.src.calibrates(r.Index) {
		return nil
	}
	for _, dn := range r.Done {
		c.ranges.Observe(c.emb.vector(dn.Out))
		c.chunks++
	}
	return nil
}
