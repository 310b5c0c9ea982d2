package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/convert"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/ingest"
	"github.com/synapse-embed/synapse/model/modelcache"
	"github.com/synapse-embed/synapse/model/onnx"
	"github.com/synapse-embed/synapse/pipeline/job"
)

func modelsCommand() *cli.Command {
	subs := []*cli.Command{modelsAddCommand(), modelsLsCommand(), modelsPullCommand(), modelsRmCommand(), modelsVerifyCommand(), modelsDistillCommand()}
	for _, c := range subs {
		c.OnUsageError = flagUsageError
	}
	return &cli.Command{
		Name:  "models",
		Usage: "the model cache: add (and quantize) models once, pull them from the Hugging Face Hub, list, verify and remove them",
		Description: `Models are kept once, under their SHA-256, in $SYNAPSE_MODELS, else
$XDG_CACHE_HOME/synapse/models (~/.cache/synapse/models); models pulled from
the Hub are kept in its hub/ directory. -m in every command takes, in this
order: a file or directory that exists; a cached model's name or digest
prefix; a Hugging Face hub id (ORG/NAME[@REVISION]) pulled into the model
cache, else found in the Hugging Face cache ($HF_HUB_CACHE, else
$HF_HOME/hub, else ~/.cache/huggingface/hub).

Full reference: docs/model-cache.md and docs/models.md.`,
		Subcommands: subs,
	}
}

// modelsDirFlag selects the store.
func modelsDirFlag() cli.Flag {
	return &cli.StringFlag{Name: "models-dir", Usage: "the model cache `DIR`", EnvVars: []string{modelcache.EnvDir}}
}

func openStore(c *cli.Context) (*modelcache.Store, error) {
	s, err := modelcache.Open(c.String("models-dir"))
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	return s, nil
}

func modelsAddCommand() *cli.Command {
	return &cli.Command{
		Name:      "add",
		Usage:     "validate a GGUF model, an ONNX model directory or a Hugging Face directory with safetensors weights (converted to ONNX) (in the module and in a worker) and add it to the cache; --quantize also makes a quantized variant and measures it",
		ArgsUsage: "FILE.gguf|ONNX-DIR|FILE.onnx|HF-DIR, or s3://BUCKET/KEY.gguf / s3://BUCKET/PREFIX/ (copied locally first) (with --quantize, also a cached NAME)",
		Description: `An ONNX model directory is stored as its graph (model.onnx, hard-linked or
copied) with the directory's tokenizer.json, config.json, other top-level
.json/.txt files and sentence-transformers module directories copied beside it.

A Hugging Face directory with config.json and model.safetensors (or its
shards) and no ONNX graph — BertModel, BertForMaskedLM,
BertForSequenceClassification, RobertaModel, XLMRobertaModel, DistilBertModel, MPNetModel, ModernBertModel,
ModernBertForSequenceClassification, DebertaV2ForSequenceClassification — is
converted by synapse to an ONNX graph (--format onnx, the default), stored
with the same files beside it, or to a GGUF file (--format gguf: BERT
encoders without Dense modules, pooled mean or cls). A Qwen3 decoder
embedder (Qwen3Model, Qwen3ForCausalLM: Qwen3-Embedding) converts to GGUF,
run by llama.cpp. pytorch_model.bin alone is refused (get
model.safetensors). See docs/models.md.

--quantize makes a variant: a GGUF file type (q8_0, q4_k_m, …) for a GGUF
model, written by llama.cpp's quantizer; int8 for an ONNX model, the
dynamically quantized graph onnxruntime's quantize_dynamic writes (int8
MatMul/Gemm weights, activations quantized at run time), written by
synapse's own ONNX writer. Both run in a worker, and both variants are
measured against their source on --sample (cosines, speed ratio). A
reranker (cross-encoder) is measured on scores: the sample's first 4 texts
as queries against every sample text, the correlation of the variant's
scores with the source's for each query standing in for the cosine.

A cross-encoder is added only when synapse can read its outputs as one
score: one label, or two whose label 1 is the positive class (ONNX:
config.json's id2label; GGUF: classifier.output_labels); anything else is
refused before the cache is touched.

Full reference: docs/model-cache.md.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "name", Usage: "the cached model's name (default: the model's general.name, else the file name)"},
			&cli.StringFlag{Name: "format", Usage: "what a Hugging Face safetensors directory is converted to: `onnx`, or gguf (BERT encoders with mean or cls pooling, run by llama.cpp)", DefaultText: "onnx; gguf for a Qwen3 decoder"},
			&cli.StringFlag{Name: "quantize", Usage: "also make a variant of this `TYPE`: int8 for an ONNX model; for a GGUF model a file type: " + strings.Join(gguf.FileTypeNames(), ", ")},
			&cli.StringFlag{Name: "sample", Usage: "JSON Lines `FILE` ({\"text\": …}, e.g. your corpus) to measure the variant on (default: built-in texts)"},
			&cli.IntFlag{Name: "sample-texts", Value: ingest.DefaultSampleTexts, Usage: "texts to take from --sample"},
			&cli.Float64Flag{Name: "min-cosine", Usage: "a variant whose vectors' cosine to the source's falls below this on any sample text (a reranker: the correlation of its scores to the source's for any sample query) is kept but marked degraded", DefaultText: fmt.Sprintf("%g; %g for ONNX int8", ingest.DefaultMinCosine, ingest.DefaultMinCosineINT8)},
			&cli.IntFlag{Name: "rounds", Value: 3, Usage: "timed passes over the sample per variant (the speed is their median)"},
			&cli.IntFlag{Name: "threads", Usage: "llama.cpp (or ONNX Runtime intra-op) threads in the worker", DefaultText: "all cores"},
			modelsDirFlag(),
			llamaLibFlag(), ortLibFlag(), chaosFlag(),
		},
		Action: modelsAdd,
	}
}

// ingestOptions are the worker and store settings of a models command on
// the model ref: its workers get llama.cpp's library for GGUF, ONNX
// Runtime's for ONNX (a Hugging Face directory: its --format's).
func ingestOptions(c *cli.Context, s *modelcache.Store, ref string, stderr io.Writer) (ingest.Options, error) {
	w, err := workersFor(c, addFormat(c, s, ref))
	if err != nil {
		return ingest.Options{}, err
	}
	if w.chaos != "" {
		fmt.Fprintf(stderr, "synapse: chaos drills armed in the workers: %s\n", w.chaos)
	}
	return ingest.Options{Store: s, Worker: w.command, Env: w.env, Chaos: w.chaos, Threads: c.Int("threads"), Version: version,
		Progress: func(line string) { fmt.Fprintf(stderr, "synapse: %s\n", line) }}, nil
}

// addFormat is the format of the model models add caches for ref: a
// Hugging Face directory's is its --format's (converted to GGUF, it is
// validated and quantized by llama.cpp).
func addFormat(c *cli.Context, s *modelcache.Store, ref string) string {
	if convert.IsSource(ref) && sourceFormat(c, ref) == convert.FormatGGUF {
		return artifact.FormatGGUF
	}
	return ingest.FormatOf(s, ref)
}

// sourceFormat is what a Hugging Face directory converts to: --format when
// given, else its architecture's route (GGUF for a decoder, ONNX for an
// encoder; Open's refusal of the directory comes later, from the
// conversion itself).
func sourceFormat(c *cli.Context, ref string) string {
	if c.IsSet("format") {
		return c.String("format")
	}
	if src, err := convert.Open(ref); err == nil {
		return src.Route()
	}
	return convert.FormatONNX
}

// checkAddFlags checks models add's flags before anything is touched.
func checkAddFlags(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("models add: want one FILE.gguf, ONNX model directory, FILE.onnx or Hugging Face directory argument, got %d", c.NArg())
	}
	if c.Int("threads") < 0 || c.Int("rounds") < 1 || c.Int("sample-texts") < 1 {
		return usagef("models add: --threads must not be negative; --rounds and --sample-texts must be at least 1")
	}
	if mc := c.Float64("min-cosine"); c.IsSet("min-cosine") && (mc <= -1 || mc > 1) {
		return usagef("models add: --min-cosine %g: want a cosine in (-1, 1]", mc)
	}
	if c.String("quantize") == "" && (c.IsSet("sample") || c.IsSet("min-cosine") || c.IsSet("rounds")) {
		return usagef("models add: --sample, --min-cosine and --rounds measure a quantized variant: give --quantize")
	}
	if f := c.String("format"); c.IsSet("format") && f != convert.FormatONNX && f != convert.FormatGGUF {
		return usagef("models add: --format %q: want onnx or gguf", f)
	}
	return checkChaos(c, "models add")
}

func modelsAdd(c *cli.Context) error {
	if err := checkAddFlags(c); err != nil {
		return err
	}
	s, err := openStore(c)
	if err != nil {
		return err
	}
	ref, cleanup, err := fetchModel(c.Context, c.Args().First()) // s3://: a local copy (objects.go)
	if err != nil {
		return err
	}
	defer cleanup()
	w := c.App.Writer
	o, err := ingestOptions(c, s, ref, c.App.ErrWriter)
	if err != nil {
		return err
	}
	o.Format = c.String("format") // "": the directory's route
	if c.String("quantize") == "" {
		e, existed, err := ingest.Add(c.Context, ref, c.String("name"), o)
		if err != nil {
			return addError(err)
		}
		printAdded(w, e, existed)
		if existed && c.IsSet("name") && e.Name != c.String("name") {
			fmt.Fprintf(c.App.ErrWriter, "synapse: %s is cached already as %s; --name %s is not used (`synapse models rm %s` first to rename it)\n", ref, e.Name, c.String("name"), e.Name)
		}
		return nil
	}
	q, err := quantizeOptions(c, addFormat(c, s, ref))
	if err != nil {
		return err
	}
	added := false
	if c.IsSet("name") {
		if _, statErr := os.Stat(ref); statErr == nil {
			_, existed, err := ingest.Add(c.Context, ref, c.String("name"), o)
			if err != nil {
				return addError(err)
			}
			added = !existed
		}
	}
	res, err := ingest.EnsureQuantized(c.Context, ref, q, o)
	if err != nil {
		return addError(err)
	}
	printAdded(w, res.Source, !(added || res.SourceAdded))
	printVariant(w, c.App.ErrWriter, res)
	return nil
}

// quantizeOptions reads --quantize and the measurement flags.
func quantizeOptions(c *cli.Context, format string) (ingest.QuantizeOptions, error) {
	q := ingest.QuantizeOptions{FType: c.String("quantize"), MinCosine: c.Float64("min-cosine"), Rounds: c.Int("rounds")}
	if _, err := ingest.ParseTarget(format, q.FType); err != nil {
		return q, usagef("models add: --quantize: %v", err)
	}
	if path := c.String("sample"); path != "" {
		sample, err := ingest.ReadSample(path, c.Int("sample-texts"))
		if err != nil {
			return q, usageError{fmt.Errorf("models add: --sample: %w", err)}
		}
		q.Sample = sample
	}
	return q, nil
}

// addError marks what running again unchanged cannot fix as a usage error
// (exit 2): a name taken, a missing, unusable or unquantizable model.
func addError(err error) error {
	if errors.Is(err, modelcache.ErrNameTaken) || errors.Is(err, modelcache.ErrBadName) || errors.Is(err, ingest.ErrCannotQuantize) || errors.Is(err, ingest.ErrInvalid) ||
		artifact.Unusable(err) {
		return usageError{err}
	}
	return err
}

func printAdded(w io.Writer, e modelcache.Entry, existed bool) {
	verb := "added"
	if existed {
		verb = "cached"
	}
	fmt.Fprintf(w, "%-9s %s  sha256:%s  %s  %s %s, %d dims, context %d, %s (%s from %s)\n", verb, e.Name, e.Short(),
		humanBytes(e.Size), e.Architecture, e.Kind, e.Dims, e.Context, e.Quantization, e.Stored, e.SourcePath)
}

// printVariant reports a variant and its quality report; a degraded one
// also gets a warning on stderr saying what was measured.
func printVariant(w, stderr io.Writer, res ingest.Result) {
	v := res.Variant
	verb := "quantized"
	if !res.Made {
		verb = "cached"
	}
	if v.Digest == res.Source.Digest {
		fmt.Fprintf(w, "%-9s %s is %s already; nothing to quantize\n", verb, v.Name, v.Quantization)
		return
	}
	fmt.Fprintf(w, "%-9s %s  sha256:%s  %s  %s\n", verb, v.Name, v.Short(), humanBytes(v.Size), v.Quantization)
	q := v.Quality
	if q == nil {
		return
	}
	if q.Measure == modelcache.MeasureScores {
		fmt.Fprintf(w, "quality   score correlation to %s per query: min %.6f, mean %.6f; largest score difference %.4f over %d pairs of %d %s texts (%d tokens)\n",
			res.Source.Quantization, q.MinCosine, q.MeanCosine, q.MaxScoreDiff, q.Pairs, q.Texts, q.Sample, q.Tokens)
	} else {
		fmt.Fprintf(w, "quality   cosine to %s: min %.6f, mean %.6f over %d %s texts (%d tokens)\n",
			res.Source.Quantization, q.MinCosine, q.MeanCosine, q.Texts, q.Sample, q.Tokens)
	}
	fmt.Fprintf(w, "speed     %.2f× the source's tokens/s (%.0f vs %.0f, %d threads, median of %d rounds)\n",
		q.SpeedRatio, q.TokensPerSec, q.SourceTokensPerSec, q.Threads, q.Rounds)
	if q.CPU != "" {
		holds := "the class the figures were measured on"
		if q.Graph == onnx.QuantForm {
			holds = "the graph's result is the same on every CPU class"
		}
		fmt.Fprintf(w, "cpu       %s (%s)\n", q.CPU, holds)
	}
	if q.Degraded {
		fmt.Fprintf(stderr, "synapse: warning: %s is degraded: its worst %s %.6f is below --min-cosine %g; it is kept, and -m %s uses it only with --allow-degraded\n",
			v.Name, measureName(q), q.MinCosine, q.MinCosineRequired, v.Name)
	}
}

func modelsLsCommand() *cli.Command {
	return &cli.Command{
		Name:        "ls",
		Usage:       "list the cached models, and the models pulled from the Hugging Face Hub",
		Description: "Full reference: docs/model-cache.md.",
		Flags:       []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print a JSON array of entries (pulled models are not among them)"}, modelsDirFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return usagef("models ls: unexpected arguments %q", c.Args().Slice())
			}
			s, err := openStore(c)
			if err != nil {
				return err
			}
			entries, listErr := s.Entries()
			if c.Bool("json") {
				err = printEntriesJSON(c.App.Writer, entries)
			} else if err = printEntries(c.App.Writer, s, entries); err == nil {
				err = printPulled(c.App.Writer, s) // models_pull.go
			}
			if listErr != nil {
				return fmt.Errorf("models ls: %w", listErr)
			}
			return err
		},
	}
}

// entryJSON is an entry with its path, as ls --json prints it.
type entryJSON struct {
	modelcache.Entry
	Path string `json:"path"`
}

func printEntriesJSON(w io.Writer, entries []modelcache.Entry) error {
	out := make([]entryJSON, len(entries))
	for i, e := range entries {
		out[i] = entryJSON{Entry: e, Path: e.Path()}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func printEntries(w io.Writer, s *modelcache.Store, entries []modelcache.Entry) error {
	if len(entries) == 0 {
		fmt.Fprintf(w, "no models in %s\n", s.Root)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDIGEST\tSIZE\tKIND\tDIMS\tCTX\tQUANT\tQUALITY\tADDED")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", e.Name, e.Short(), humanBytes(e.Size), e.Kind,
			e.Dims, e.Context, e.Quantization, qualityColumn(e), e.Added.Format("2006-01-02"))
	}
	return tw.Flush()
}

// measureName is what a quality report's MinCosine compares.
func measureName(q *modelcache.Quality) string {
	if q.Measure == modelcache.MeasureScores {
		return "score correlation"
	}
	return "cosine"
}

// qualityColumn summarises a variant's quality report.
func qualityColumn(e modelcache.Entry) string {
	q := e.Quality
	switch {
	case q == nil:
		return "-"
	case q.Degraded:
		return fmt.Sprintf("DEGRADED min %.6f", q.MinCosine)
	}
	return fmt.Sprintf("min %.6f, %.2f×", q.MinCosine, q.SpeedRatio)
}

func modelsRmCommand() *cli.Command {
	return &cli.Command{
		Name:        "rm",
		Usage:       "remove cached models (a hard-linked model's original file stays), or pulled ones by their hub id",
		ArgsUsage:   "NAME|DIGEST-PREFIX|ORG/NAME...",
		Description: "Full reference: docs/model-cache.md.",
		Flags:       []cli.Flag{modelsDirFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usagef("models rm: give the NAME or digest prefix of the models to remove")
			}
			s, err := openStore(c)
			if err != nil {
				return err
			}
			for _, ref := range c.Args().Slice() {
				e, err := s.Lookup(ref)
				removed, rmErr := removePulled(c, s, ref, err) // models_pull.go
				if rmErr != nil {
					return rmErr
				}
				if removed {
					continue
				}
				if err != nil {
					return lookupError("models rm", err)
				}
				if err := s.Remove(e); err != nil {
					return fmt.Errorf("models rm: %w", err)
				}
				fmt.Fprintf(c.App.Writer, "removed %s (sha256:%s)\n", e.Name, e.Short())
			}
			return nil
		},
	}
}

// lookupError makes an unknown name or an ambiguous digest prefix a usage
// error.
func lookupError(cmd string, err error) error {
	var ae *modelcache.AmbiguousError
	if errors.Is(err, modelcache.ErrNotFound) || errors.As(err, &ae) {
		return usageError{fmt.Errorf("%s: %w", cmd, err)}
	}
	return fmt.Errorf("%s: %w", cmd, err)
}

func modelsVerifyCommand() *cli.Command {
	return &cli.Command{
		Name:        "verify",
		Usage:       "hash cached models again and report any whose file changed",
		ArgsUsage:   "[NAME|DIGEST-PREFIX...] (default: every model)",
		Description: "Full reference: docs/model-cache.md.",
		Flags:       []cli.Flag{modelsDirFlag()},
		Action:      modelsVerify,
	}
}

func modelsVerify(c *cli.Context) error {
	s, err := openStore(c)
	if err != nil {
		return err
	}
	entries, listErr := s.Entries()
	if c.NArg() > 0 {
		entries, listErr = nil, nil
		for _, ref := range c.Args().Slice() {
			e, err := s.Lookup(ref)
			if err != nil {
				return lookupError("models verify", err)
			}
			entries = append(entries, e)
		}
	}
	bad := 0
	for _, e := range entries {
		if err := s.Verify(e); err != nil {
			bad++
			fmt.Fprintf(c.App.Writer, "FAILED  %s  sha256:%s  %v\n", e.Name, e.Short(), err)
			continue
		}
		fmt.Fprintf(c.App.Writer, "ok      %s  sha256:%s\n", e.Name, e.Short())
	}
	if listErr != nil {
		return fmt.Errorf("models verify: %d of %d entries failed, and some could not be read: %w", bad, len(entries), listErr)
	}
	if bad > 0 {
		return fmt.Errorf("models verify: %d of %d cached models failed verification (remove them with `synapse models rm` and add them again)", bad, len(entries))
	}
	return nil
}

// modelCacheFlags are the model cache's flags of commands that run a model
// (embed; rerank and generate to come).
func modelCacheFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "quantize", Usage: "run a `TYPE` variant of -m (q8_0, q4_k_m, … for GGUF; int8 for ONNX), made and measured on first use and cached (see `synapse models`)"},
		&cli.Float64Flag{Name: "min-cosine", Usage: "with --quantize: a variant whose cosine to the source falls below this is degraded", DefaultText: fmt.Sprintf("%g; %g for ONNX int8", ingest.DefaultMinCosine, ingest.DefaultMinCosineINT8)},
		&cli.BoolFlag{Name: "allow-degraded", Usage: "run a quantized variant even though its measured quality is below its threshold"},
	}
}

// checkModelFlags checks the model cache flags of a job command.
func checkModelFlags(c *cli.Context, name string) error {
	if q := c.String("quantize"); q != "" && !strings.EqualFold(q, onnx.FTypeInt8) { // int8 is for ONNX models, checked with the model
		if _, err := gguf.ParseFileType(q); err != nil {
			return usagef("%s: --quantize: %v (or int8 for an ONNX model)", name, err)
		}
	}
	if mc := c.Float64("min-cosine"); mc <= -1 || mc > 1 {
		return usagef("%s: --min-cosine %g: want a cosine in (-1, 1]", name, mc)
	}
	if c.IsSet("min-cosine") && c.String("quantize") == "" {
		return usagef("%s: --min-cosine measures the variant --quantize makes: give --quantize", name)
	}
	return nil
}

// quantized applies --quantize to the model m a job command opened: it
// returns m itself without --quantize, else its variant of that type,
// added to the cache and made and measured if the cache does not have it
// yet (workers from o.Worker and o.Env, armed with o.Chaos). A degraded
// variant is a usage error unless --allow-degraded.
func quantized(c *cli.Context, m *artifact.Artifact, o *job.Options) (*artifact.Artifact, error) {
	if c.String("quantize") == "" {
		return m, nil
	}
	q := ingest.QuantizeOptions{FType: c.String("quantize"), MinCosine: c.Float64("min-cosine")}
	if _, err := ingest.ParseTarget(m.Format, q.FType); err != nil {
		return nil, usagef("--quantize: %s is an %s model: %v", o.Model, m.Format, err)
	}
	s, err := modelcache.Open("")
	if err != nil {
		return nil, err
	}
	workers := ingest.Options{Store: s, Worker: o.Worker, Env: o.Env, Chaos: o.Chaos, Threads: c.Int("threads"), Version: version,
		Progress: func(line string) { fmt.Fprintf(c.App.ErrWriter, "synapse: %s\n", line) }}
	res, err := ingest.EnsureQuantized(c.Context, o.Model, q, workers)
	if err != nil {
		return nil, addError(err)
	}
	v := res.Variant
	if qa := v.Quality; qa != nil {
		fmt.Fprintf(c.App.ErrWriter, "synapse: running %s (%s of %s, sha256:%s): cosine to the source min %.6f, mean %.6f; %.2f× its tokens/s when measured\n",
			v.Name, v.Quantization, res.Source.Name, v.Short(), qa.MinCosine, qa.MeanCosine, qa.SpeedRatio)
	}
	if v.Degraded() && !c.Bool("allow-degraded") {
		return nil, usagef("%s is degraded: its vectors' cosine to %s's is %.6f at worst, below --min-cosine %g; pass --allow-degraded to run it anyway",
			v.Name, res.Source.Name, v.Quality.MinCosine, v.Quality.MinCosineRequired)
	}
	return openModel(true, v.Path())
}
