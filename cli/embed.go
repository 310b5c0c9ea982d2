package cli

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/pipeline/job"
)

func embedCommand() *cli.Command {
	return &cli.Command{
		Name:        "embed",
		Usage:       "embed every document of Parquet, Arrow, JSONL, CSV or TSV files into a Parquet (or Arrow, JSONL) file of vectors, one row a chunk",
		ArgsUsage:   "INPUT... (.parquet, .arrow, .jsonl, .csv, .tsv — the text ones also .gz —, s3://…, or - for JSONL on stdin)",
		Description: "Full reference: docs/embed.md (common flags: docs/jobs.md; the inputs and the output: docs/formats.md).",
		Flags:       embedFlags(),
		Action: func(c *cli.Context) error {
			o, err := embedOptionsFrom(c)
			if err != nil {
				return err
			}
			items := o.ItemWords() // late chunking's are windows, each pooled into its chunks
			w := words{verb: "embedding", done: "embedded", items: items, unit: items}
			return runJob(c, jobSpec{name: "embed", opts: &o.Options, check: o.Check,
				words: w,
				run:   func(ctx context.Context) (job.Summary, error) { return job.Embed(ctx, o) }})
		},
	}
}

func embedFlags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output `FILE`: .parquet, .arrow (Arrow IPC) or .jsonl (columns: docs/formats.md); or a PostgreSQL table with pgvector, postgresql://USER@HOST/DB?table=NAME (libpq URL; PG* variables fill what it omits; see docs/postgres.md)", DefaultText: "FIRST_INPUT.vectors.parquet"},
	}
	flags = append(flags, readFlags("text")...)
	flags = append(flags,
		&cli.IntFlag{Name: "chunk-tokens", Usage: "tokens per chunk, special tokens excluded", DefaultText: "the model's context minus its special tokens"},
		&cli.IntFlag{Name: "overlap", Usage: "tokens shared by consecutive chunks of a document"},
		&cli.BoolFlag{Name: "truncate", Usage: "one vector per document, from its first chunk only, as sentence-transformers and TEI truncate at max_seq_length (the rest of a longer document is not embedded; the summary counts those cut)"},
		&cli.BoolFlag{Name: "late-chunking", Usage: "embed each window of up to the model's context once (consecutive windows share --overlap tokens) and pool every --chunk-tokens chunk of it from the window's token states (Jina's late chunking), so chunks carry their document's context; models with mean pooling (ONNX last_hidden_state, GGUF per-token embeddings); docs/token-outputs.md"},
		&cli.StringFlag{Name: "vectors", Value: job.VectorsDense, Usage: "the output's vectors: dense (one pooled vector a chunk, the embedding column), sparse (SPLADE weights over the vocabulary from an ONNX masked-LM's logits: sparse_indices and sparse_values columns) or tokens (ColBERT: a unit vector per token through the model's projection, the token_vectors column; PyLate models); docs/token-outputs.md"},
		&cli.BoolFlag{Name: "as-query", Usage: "with --vectors tokens: encode the input as ColBERT queries (the model's query marker and query_length, [MASK] expansion, no skiplist) instead of documents"},
		&cli.IntFlag{Name: "sparse-top-k", Usage: "with --vectors sparse: keep each chunk's N largest weights (a PostgreSQL output needs N ≤ 16000)", DefaultText: "every non-zero weight"},
		&cli.StringFlag{Name: "pooling", Usage: "mean, cls or last", DefaultText: "the model's own"},
		&cli.StringFlag{Name: "prompt-name", Usage: "put the prompt `NAME` (e.g. query, document) of the model's config_sentence_transformers.json in front of every document, as sentence-transformers' prompt_name does; not with --prefix", DefaultText: "the model's default_prompt_name, unless --prefix is given"},
		&cli.BoolFlag{Name: "no-normalize", Usage: "keep vectors as pooled instead of L2-normalizing them"},
		&cli.IntFlag{Name: "dims", Usage: "keep the first K dimensions of each vector and re-normalize (Matryoshka models)", DefaultText: "all"},
		&cli.StringSliceFlag{Name: "previous", Usage: "incremental run: copy the chunks of documents whose id and text are unchanged from this earlier output `FILE` (.arrow or .parquet; repeat it for the part files of a sharded run) instead of embedding them"},
		&cli.BoolFlag{Name: "previous-any", Usage: "with --previous made under other settings (model, chunking, pooling, dims, prefix, text fields): embed everything instead of refusing it"},
		&cli.StringFlag{Name: "deleted", Usage: "with --previous: write the ids of its documents that are no longer in the input to `FILE`, one a line"},
		&cli.StringFlag{Name: "dtype", Value: "float32", Usage: "the embedding column's type: float32, float16, int8, uint8 (per-dimension ranges from a calibration), binary or ubinary (sign bits, 8 a byte), as sentence-transformers' quantize_embeddings"},
		&cli.StringSliceFlag{Name: "calibration", Usage: "int8/uint8: take the ranges from this earlier output `FILE` of the same model and settings (its stored ranges, or the minimum and maximum of its float vectors; repeat it for the parts of a sharded run)", DefaultText: "the --previous output's ranges, else the first --calibration-docs documents of the input"},
		&cli.IntFlag{Name: "calibration-docs", Value: job.DefaultCalibrationDocs, Usage: "int8/uint8 without --calibration: embed the first N documents of the whole input first (every shard the same ones) and fix the ranges from their vectors"},
		&cli.BoolFlag{Name: "sync", Usage: "with -o postgresql://…: the table is the previous output: unchanged documents (same id and doc_hash) are kept, changed and new ones written, ids no longer in the input deleted, all published in one transaction"},
		&cli.BoolFlag{Name: "with-text", Usage: "write each chunk's text (the embedded text's bytes [byte_start, byte_end)) in a text column, so that a row stands alone: id, chunk_id, offsets in bytes and code points, text, embedding"},
		&cli.BoolFlag{Name: "dedup", Value: true, Usage: fmt.Sprintf("embed identical texts once and copy their vectors (within a packing group of %d records, so resumed and sharded runs give the same rows); --dedup=false embeds each", corpus.GroupRecords)},
	)
	return append(flags, jobFlags("4 × the chunk size")...)
}

// embedOptionsFrom turns flags into a job; flag mistakes are usage errors.
func embedOptionsFrom(c *cli.Context) (job.EmbedOptions, error) {
	common, err := jobOptionsFrom(c, "embed", ".vectors.parquet")
	o := job.EmbedOptions{Options: common, ChunkTokens: c.Int("chunk-tokens"), Overlap: c.Int("overlap"),
		Pooling: c.String("pooling"), Normalize: !c.Bool("no-normalize"), Dims: c.Int("dims"),
		Previous: c.StringSlice("previous"), PreviousAny: c.Bool("previous-any"), Deleted: c.String("deleted"), Dedup: c.Bool("dedup"), Sync: c.Bool("sync"),
		PromptName: c.String("prompt-name"), Truncate: c.Bool("truncate"), LateChunking: c.Bool("late-chunking"), WithText: c.Bool("with-text"),
		Vectors: c.String("vectors"), SparseTopK: c.Int("sparse-top-k"), AsQuery: c.Bool("as-query")}
	if err != nil {
		return o, err
	}
	if o.Previous, err = expandObjects(c.Context, "embed: --previous", o.Previous); err != nil {
		return o, err
	}
	readOptionsFrom(c, &o.Options)
	o.CalibrationDocs = c.Int("calibration-docs")
	if o.Calibration, err = expandObjects(c.Context, "embed: --calibration", c.StringSlice("calibration")); err != nil {
		return o, err
	}
	if o.Dtype, err = vector.ParseDtype(c.String("dtype")); err != nil {
		return o, usagef("embed: --%v", err)
	}
	switch o.Pooling {
	case "", "mean", "cls", "last":
	default:
		return o, usagef("embed: --pooling %q: want mean, cls or last", o.Pooling)
	}
	if err := o.CheckLateFlags(); err != nil {
		return o, usageError{fmt.Errorf("embed: %w", err)}
	}
	if o.Truncate && o.Overlap > 0 {
		return o, usagef("embed: --overlap with --truncate: a truncated document has one chunk, nothing to overlap")
	}
	for name, v := range map[string]int{"chunk-tokens": o.ChunkTokens, "overlap": o.Overlap, "dims": o.Dims, "sparse-top-k": o.SparseTopK} {
		if v < 0 {
			return o, usagef("embed: --%s %d must not be negative", name, v)
		}
	}
	return o, nil
}
