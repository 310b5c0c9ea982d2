package ingest

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/testmodels"
	"github.com/synapse-embed/synapse/supervise"
)

// Tests run real `synapse worker` processes (testenv.Binary) on models
// written by gguf/modelgen; only TestQuantizeReference needs the shared
// fixtures.

// testOptions are ingest options for a new store with real workers, one
// llama.cpp thread each, armed with chaos drills if any.
func testOptions(t *testing.T, chaos string) Options {
	t.Helper()
	lib := testenv.LlamaLib(t)
	s, err := modelcache.Open(filepath.Join(t.TempDir(), "models"))
	if err != nil {
		t.Fatal(err)
	}
	return Options{Store: s, Worker: []string{testenv.Binary(t), "worker"},
		Env: []string{"SYNAPSE_LLAMA_LIB=" + lib}, Chaos: chaos, Threads: 1, Version: "test",
		Pool: supervise.Config{RestartBackoff: -1, PingInterval: -1}}
}

// sampleVocab is a WordPiece vocabulary holding every word of the built-in
// sample, so that generated models see real tokens rather than [UNK].
func sampleVocab() modelgen.Vocab {
	seen := map[string]bool{}
	var words []string
	for _, t := range builtinTexts {
		for _, w := range strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			if !seen[w] {
				seen[w] = true
				words = append(words, w)
			}
		}
	}
	return modelgen.WordPieceVocab(words)
}

// writeModel writes a generated BERT model to a new file.
func writeModel(t *testing.T, name string, build func(modelgen.Vocab) modelgen.BERT) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".gguf")
	if err := build(sampleVocab()).Write(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkClean fails if the store holds staging leftovers.
func checkClean(t *testing.T, s *modelcache.Store) {
	t.Helper()
	des, _ := os.ReadDir(filepath.Join(s.Root, "tmp"))
	for _, de := range des {
		t.Errorf("staging leftover: %s", de.Name())
	}
}

func TestAdd(t *testing.T) {
	o := testOptions(t, "")
	path := writeModel(t, "tiny", modelgen.TinyEmbedder)
	e, existed, err := Add(context.Background(), path, "", o)
	if err != nil {
		t.Fatalf("Add: %v", err)
	}
	abs, _ := filepath.Abs(path)
	want := modelcache.Entry{Name: "synapse-tiny-embed", Kind: modelcache.KindEmbed, Architecture: "bert", Dims: 128, Context: 512,
		Quantization: "F16", Stored: modelcache.StoredHardlink, SourcePath: abs, SynapseVersion: "test"}
	got := modelcache.Entry{Name: e.Name, Kind: e.Kind, Architecture: e.Architecture, Dims: e.Dims, Context: e.Context,
		Quantization: e.Quantization, Stored: e.Stored, SourcePath: e.SourcePath, SynapseVersion: e.SynapseVersion}
	if existed || !reflect.DeepEqual(got, want) {
		t.Errorf("Add: got %+v existed %t; want %+v", got, existed, want)
	}
	if _, d, _ := o.Store.Digest(path); e.Digest != d || e.Added.IsZero() {
		t.Errorf("entry digest %s added %v; want %s and a date", e.Digest, e.Added, d)
	}
	again, existed, err := Add(context.Background(), path, "", o)
	if err != nil || !existed || again.Digest != e.Digest {
		t.Errorf("Add again: got %s existed %t, %v; want the existing entry", again.Digest, existed, err)
	}
	checkClean(t, o.Store)
}

// brokenForLlama writes a model the module accepts (header, tokenizer,
// tensor directory, block count) but llama.cpp refuses: its
// feed_forward_length disagrees with its FFN tensors' shapes.
func brokenForLlama(t *testing.T) string {
	t.Helper()
	w, err := modelgen.TinyEmbedder(sampleVocab()).Writer()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Set("bert.feed_forward_length", uint32(256)); err != nil { // the tensors are 512 wide
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "broken.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// A model that fails any check is not added, and leaves nothing behind.
func TestAddRefuses(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text.gguf")
	os.WriteFile(text, []byte("not a model"), 0o644)
	good := writeModel(t, "tiny", modelgen.TinyEmbedder)
	b, _ := os.ReadFile(good)
	truncated := filepath.Join(dir, "truncated.gguf")
	os.WriteFile(truncated, b[:len(b)-100], 0o644)
	tests := []struct {
		name, path string
		chaos      string
		want       string
	}{
		{"not a GGUF", text, "", "not a usable model"},
		{"truncated tensor data", truncated, "", "past the end of the file"},
		{"llama.cpp refuses", brokenForLlama(t), "", "the worker refused load: artifact_invalid"},
		{"the worker crashes", good, "abort-on-type=EMBED_BATCH", "the worker crashed during embed (killed by SIGABRT)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t, tt.chaos)
			_, _, err := Add(context.Background(), tt.path, "", o)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Add: got %v; want ErrInvalid saying %q", err, tt.want)
			}
			if entries, _ := o.Store.Entries(); len(entries) != 0 {
				t.Errorf("entries after a refusal: got %d; want none", len(entries))
			}
			checkClean(t, o.Store)
		})
	}
}

func TestQuantize(t *testing.T) {
	o := testOptions(t, "")
	path := writeModel(t, "tiny", modelgen.TinyEmbedder)
	ctx := context.Background()
	res, err := EnsureQuantized(ctx, path, QuantizeOptions{FType: "q8_0", Rounds: 1}, o)
	if err != nil {
		t.Fatalf("EnsureQuantized: %v", err)
	}
	v, src := res.Variant, res.Source
	if !res.Made || v.Name != "synapse-tiny-embed:q8_0" || v.Quantization != "Q8_0" || v.Of != src.Digest || v.Stored != modelcache.StoredQuantized || v.Size >= src.Size {
		t.Fatalf("variant: got %+v made %t; want synapse-tiny-embed:q8_0, Q8_0, of %s, smaller than %d", v, res.Made, src.Digest, src.Size)
	}
	q := v.Quality
	if q == nil || q.MinCosine < 0.999 || q.MeanCosine < q.MinCosine || q.Degraded || q.Texts != len(builtinTexts) || q.Tokens == 0 ||
		q.SpeedRatio <= 0 || q.SourceTokensPerSec <= 0 || q.MinCosineRequired != DefaultMinCosine || q.QuantizeMS < 0 {
		t.Fatalf("quality: got %+v; want min cosine ≥ 0.999 over the built-in sample, speeds measured", q)
	}
	t.Logf("Q8_0 of TinyEmbedder: min cosine %.6f, mean %.6f, speed ×%.2f", q.MinCosine, q.MeanCosine, q.SpeedRatio)
	// A second run finds the variant; -m resolves it by name.
	again, err := EnsureQuantized(ctx, path, QuantizeOptions{FType: "Q8_0"}, o)
	if err != nil || again.Made || again.Variant.Digest != v.Digest {
		t.Errorf("EnsureQuantized again: got %+v, %v; want the cached variant", again, err)
	}
	a, err := artifact.OpenWith("synapse-tiny-embed:q8_0", artifact.Options{Store: o.Store})
	if err != nil || a.Digest != v.Digest {
		t.Errorf("OpenWith(name): got %v; want the variant %s", err, v.Digest)
	}
	checkClean(t, o.Store)
}

// Quantizing refuses what it cannot measure or would redo.
func TestQuantizeRefuses(t *testing.T) {
	o := testOptions(t, "")
	src, _, err := Add(context.Background(), writeModel(t, "tiny", modelgen.TinyEmbedder), "", o)
	if err != nil {
		t.Fatal(err)
	}
	llama := filepath.Join(t.TempDir(), "llama.gguf")
	if err := modelgen.TinyLlama(modelgen.SPMVocab(testmodels.Words())).Write(llama); err != nil {
		t.Fatal(err)
	}
	gen, _, err := Add(context.Background(), llama, "", o)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		src   modelcache.Entry
		ftype string
		want  string
	}{
		{src, "q9_9", "want one of"},
		{src, "f16", "it is F16 already"},
		{gen, "q8_0", "only embedding models and rerankers"},
	} {
		_, _, err := Quantize(context.Background(), tt.src, QuantizeOptions{FType: tt.ftype}, o)
		if !errors.Is(err, ErrCannotQuantize) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Quantize(%s, %s): got %v; want ErrCannotQuantize saying %q", tt.src.Name, tt.ftype, err, tt.want)
		}
	}
}

// A reranker's variant is measured on scores: the built-in sample's first
// texts as queries against every text, the correlation of the variant's
// scores with the source's per query. TinyReranker's random head scores
// every document of a query within a few thousandths, so Q8_0's rounding
// reorders them and the correlation is low (0.6–0.8): the test checks the
// report's shape and its degraded flag, not a level (the generated ONNX
// cross-encoder in cli, whose scores spread, checks a level).
func TestQuantizeReranker(t *testing.T) {
	o := testOptions(t, "")
	res, err := EnsureQuantized(context.Background(), writeModel(t, "rerank", modelgen.TinyReranker), QuantizeOptions{FType: "q8_0", Rounds: 1}, o)
	if err != nil {
		t.Fatal(err)
	}
	v, q := res.Variant, res.Variant.Quality
	if v.Kind != modelcache.KindRerank || v.Quantization != "Q8_0" {
		t.Errorf("variant: kind %s, %s; want a Q8_0 reranker", v.Kind, v.Quantization)
	}
	n := len(BuiltinSample().Texts)
	if q.Measure != modelcache.MeasureScores || q.Pairs != sampleQueries*n || q.MinCosine > q.MeanCosine || q.MeanCosine > 1 || q.MaxScoreDiff <= 0 ||
		q.Degraded != (q.MinCosine < q.MinCosineRequired) || q.MinCosineRequired != DefaultMinCosine {
		t.Errorf("quality %+v; want scores of %d pairs, min ≤ mean ≤ 1, a non-zero largest difference, degraded iff min < %g", q, sampleQueries*n, DefaultMinCosine)
	}
	t.Logf("Q8_0 of TinyReranker: score correlation min %.6f, mean %.6f, max |Δscore| %.4f over %d pairs, speed ×%.2f", q.MinCosine, q.MeanCosine, q.MaxScoreDiff, q.Pairs, q.SpeedRatio)
	checkClean(t, o.Store)
}

// TestCorrelation: the per-query measure of a reranker's variant.
func TestCorrelation(t *testing.T) {
	a := []float32{1, 2, 4, 8}
	for _, tt := range []struct {
		b    []float32
		want float64
	}{
		{[]float32{1, 2, 4, 8}, 1},
		{[]float32{-3, -1, 3, 11}, 1}, // 2a - 5: the same ranking and spacing
		{[]float32{8, 4, 2, 1}, -0.8434},
		{[]float32{5, 5, 5, 5}, 0},
	} {
		if got := correlation(a, tt.b); math.Abs(got-tt.want) > 1e-4 {
			t.Errorf("correlation(%v, %v) = %.6f; want %.4f", a, tt.b, got, tt.want)
		}
	}
	if got := correlation([]float32{3, 3}, []float32{7, 7}); got != 1 {
		t.Errorf("two constant lists: %v; want 1", got)
	}
}

// A MiniLM-L6-shaped F16 model quantized to Q8_0 keeps cosine ≥ 0.999 to
// its source on the built-in sample.
func TestQuantizeMiniLM(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and quantizes a 6-layer, 384-wide model")
	}
	o := testOptions(t, "")
	res, err := EnsureQuantized(context.Background(), writeModel(t, "minilm", modelgen.MiniLM), QuantizeOptions{FType: "q8_0", Rounds: 1}, o)
	if err != nil {
		t.Fatal(err)
	}
	q := res.Variant.Quality
	if q.MinCosine < 0.999 || q.Degraded {
		t.Errorf("MiniLM Q8_0: min cosine %.6f (mean %.6f); want ≥ 0.999", q.MinCosine, q.MeanCosine)
	}
	t.Logf("Q8_0 of MiniLM: min cosine %.6f, mean %.6f over %d tokens, speed ×%.2f (one round, shared machine)", q.MinCosine, q.MeanCosine, q.Tokens, q.SpeedRatio)
}

// A threshold above what was measured keeps the variant, marked degraded:
// -m by name refuses it unless allowed.
func TestQuantizeDegraded(t *testing.T) {
	o := testOptions(t, "")
	res, err := EnsureQuantized(context.Background(), writeModel(t, "tiny", modelgen.TinyEmbedder), QuantizeOptions{FType: "q4_0", MinCosine: 0.9999999, Rounds: 1}, o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Variant.Degraded() {
		t.Fatalf("variant %+v: want degraded at a 0.9999999 threshold", res.Variant.Quality)
	}
	if _, err := artifact.OpenWith(res.Variant.Name, artifact.Options{Store: o.Store}); !errors.Is(err, artifact.ErrDegraded) {
		t.Errorf("OpenWith(degraded): got %v; want ErrDegraded", err)
	}
	if _, err := artifact.OpenWith(res.Variant.Name, artifact.Options{Store: o.Store, AllowDegraded: true}); err != nil {
		t.Errorf("OpenWith(degraded, allowed): %v", err)
	}
}

// A worker that crashes in the quantizer costs that worker: Quantize fails
// with a clear error and adds nothing; the source stays.
func TestQuantizeWorkerCrash(t *testing.T) {
	o := testOptions(t, "")
	src, _, err := Add(context.Background(), writeModel(t, "tiny", modelgen.TinyEmbedder), "", o)
	if err != nil {
		t.Fatal(err)
	}
	o.Chaos = "abort-on-type=QUANTIZE"
	_, _, err = Quantize(context.Background(), src, QuantizeOptions{FType: "q8_0"}, o)
	var ce *supervise.CrashError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "the worker crashed (killed by SIGABRT); nothing was added") {
		t.Fatalf("Quantize with a crashing worker: got %v; want a crash error saying nothing was added", err)
	}
	entries, _ := o.Store.Entries()
	if len(entries) != 1 || entries[0].Digest != src.Digest {
		t.Errorf("entries after the crash: got %d; want only the source", len(entries))
	}
	checkClean(t, o.Store)
}

// waitLog is a slog handler that closes seen when a record's text holds want.
type waitLog struct {
	want string
	once sync.Once
	seen chan struct{}
}

func (h *waitLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *waitLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if strings.Contains(a.Value.String(), h.want) {
			h.once.Do(func() { close(h.seen) })
		}
		return true
	})
	return nil
}
func (h *waitLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *waitLog) WithGroup(string) slog.Handler      { return h }

// Canceling (Ctrl-C) while the worker quantizes kills the worker and adds
// nothing.
func TestQuantizeInterrupted(t *testing.T) {
	o := testOptions(t, "")
	src, _, err := Add(context.Background(), writeModel(t, "tiny", modelgen.TinyEmbedder), "", o)
	if err != nil {
		t.Fatal(err)
	}
	o.Chaos = "hang-on-type=QUANTIZE"
	h := &waitLog{want: "chaos: hang-on-type", seen: make(chan struct{})}
	o.Pool.Logger = slog.New(h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { _, _, err := Quantize(ctx, src, QuantizeOptions{FType: "q8_0"}, o); errc <- err }()
	select {
	case <-h.seen:
	case <-time.After(time.Minute):
		t.Fatal("the worker never started quantizing")
	}
	cancel()
	select {
	case err = <-errc:
	case <-time.After(time.Minute):
		t.Fatal("Quantize did not return after cancel")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Quantize canceled: got %v; want context.Canceled", err)
	}
	if _, ok, _ := o.Store.Variant(src, "Q8_0"); ok {
		t.Error("a variant entry exists after the interrupted quantize")
	}
	checkClean(t, o.Store)
}

// Drills are armed only by Options.Chaos: SYNAPSE_CHAOS in the module's own
// environment does not reach the workers.
func TestChaosNotInherited(t *testing.T) {
	t.Setenv("SYNAPSE_CHAOS", "abort-on-type=LOAD")
	o := testOptions(t, "")
	if _, _, err := Add(context.Background(), writeModel(t, "tiny", modelgen.TinyEmbedder), "", o); err != nil {
		t.Fatalf("Add with a stray SYNAPSE_CHAOS: %v; want the drill ignored", err)
	}
}
