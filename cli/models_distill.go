package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/model/ingest"
)

func modelsDistillCommand() *cli.Command {
	return &cli.Command{
		Name:      "distill",
		Usage:     "make a static model (Model2Vec layout) from an embedder: each token of its vocabulary through the model, PCA, Zipf weighting",
		ArgsUsage: "MODEL (an ONNX directory, a Hugging Face directory with safetensors weights, or a cached model's name)",
		Description: `Model2Vec's distill (model2vec 0.10): the vocabulary is rebuilt without
BERT's [unusedN] tokens and the special tokens other than the unknown and
padding ones; every kept token goes through the model alone, between its
special tokens ([CLS] t [SEP]), in a worker, and its vector is the mean of
the three tokens' last hidden states (before the model's Normalize module);
the vectors are centred and reduced by PCA to --dims, and the i-th kept
token's row is weighted by sif / (sif + p_i), p_i Zipf's frequency of rank
i. The directory (-o, a new one) holds config.json, model.safetensors and
the rebuilt tokenizer.json, and runs with -m DIR through synapse's static
engine (and with model2vec). Full reference: docs/models.md.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "the new model `DIR` (must not exist)"},
			&cli.IntFlag{Name: "dims", Usage: "the rows' width after PCA", DefaultText: "256, or the model's width when smaller"},
			&cli.Float64Flag{Name: "sif", Value: 1e-4, Usage: "the SIF coefficient of the Zipf weighting, in (0, 1)"},
			&cli.IntFlag{Name: "threads", Usage: "ONNX Runtime intra-op threads in the worker", DefaultText: "all cores"},
			modelsDirFlag(),
			llamaLibFlag(), ortLibFlag(),
		},
		Action: modelsDistill,
	}
}

func modelsDistill(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("models distill: want one MODEL argument, got %d", c.NArg())
	}
	out := c.String("output")
	if _, err := os.Lstat(out); err == nil {
		return usagef("models distill: -o %s exists; name a new directory", out)
	}
	if sif := c.Float64("sif"); sif <= 0 || sif >= 1 {
		return usagef("models distill: --sif %g: want a coefficient in (0, 1)", sif)
	}
	if c.Int("dims") < 0 || c.Int("threads") < 0 {
		return usagef("models distill: --dims and --threads must not be negative")
	}
	if st, err := os.Stat(filepath.Dir(filepath.Clean(out))); err != nil || !st.IsDir() {
		return usagef("models distill: -o %s: its parent is not a directory", out)
	}
	s, err := openStore(c)
	if err != nil {
		return err
	}
	ref := c.Args().First()
	o, err := ingestOptions(c, s, ref, c.App.ErrWriter)
	if err != nil {
		return err
	}
	res, err := ingest.Distill(c.Context, ref, ingest.DistillOptions{Out: out, Dims: c.Int("dims"), SIF: c.Float64("sif")}, o)
	if err != nil {
		return addError(err)
	}
	fmt.Fprintf(c.App.Writer, "distilled %s into %s: %d tokens × %d dims (%d unused and special tokens left out; PCA from %d, %.1f%% of the variance kept), Zipf weighted\n",
		ref, out, res.Tokens, res.Dims, res.Removed, res.Width, 100*res.Explained)
	return nil
}
