package cli

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/pipeline/job"
)

func rerankCommand() *cli.Command {
	return &cli.Command{
		Name:  "rerank",
		Usage: "score query–candidate lists with a cross-encoder into a ranked Arrow, Parquet, JSONL or TREC run file",
		Description: `Inputs, Parquet or JSONL (- for stdin, .gz):
	  grouped      one row per query: {"query_id", "query", "candidates": [{"id", "text", "title"?, "score"?}, …]}
	  flat pairs   one row per pair: {"query_id", "query", "doc_id", "text", "title"?, "score"?};
	               consecutive rows with the same query_id form one list
	or a first-stage run with --run RUN --queries QUERIES --corpus CORPUS (BEIR layout: _id, text, corpus title):
	the top --depth candidates of each query are scored.

	The worker builds each pair with the model's own layout; a pair longer than the context keeps the whole query and
	cuts the document (truncated: true). Every candidate is scored; --top-n only trims what is written. Rows: query_id,
	doc_id, score, rank (1 = best; ties by doc_id), input_rank, input_score, truncated. A .trec/.run output is
	"qid Q0 docid rank score tag" by rank, the tag being the model's name.

	Full reference: docs/rerank.md (common flags: docs/jobs.md).`,
		ArgsUsage: "[INPUT...] (or --run with --queries and --corpus)",
		Flags:     rerankFlags(),
		Action: func(c *cli.Context) error {
			o, err := rerankOptionsFrom(c)
			if err != nil {
				return err
			}
			err = runJob(c, jobSpec{name: "rerank", opts: &o.Options, check: o.Check,
				words: words{rows: "records", verb: "reranking", done: "scored", items: "pairs scored", unit: "pairs"},
				run:   func(ctx context.Context) (job.Summary, error) { return job.Rerank(ctx, o) }})
			if q := c.String("qrels"); q != "" && (err == nil || exitCode(c.Context, err) == exitPartial) {
				if eerr := evaluateOutput(c.App.Writer, o.Out, o.Run.Run, q, o.Run.Depth); eerr != nil {
					return eerr
				}
			}
			return err
		},
	}
}

func rerankFlags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output `FILE`: .arrow, .parquet, .jsonl or .trec", DefaultText: "FIRST_INPUT.rerank.arrow"},
		&cli.StringFlag{Name: "query-id-field", Value: "query_id", Usage: "field of the query id"},
		&cli.StringFlag{Name: "query-field", Value: "query", Usage: "field of the query text"},
		&cli.StringFlag{Name: "candidates-field", Value: "candidates", Usage: "field of a grouped row's candidate list"},
		&cli.StringFlag{Name: "doc-id-field", Usage: "field of a candidate's id", DefaultText: "id in a list, doc_id in a flat row"},
		&cli.StringSliceFlag{Name: "doc-text-field", Usage: "field(s) of a candidate's text, joined with a newline", DefaultText: "title when present, then text"},
		&cli.StringFlag{Name: "score-field", Value: "score", Usage: "field of a candidate's input score (optional in the rows)"},
		&cli.StringFlag{Name: "run", Usage: "a first-stage run `FILE` to re-rank: TREC (qid Q0 docid rank score tag) or TSV (query-id corpus-id score)"},
		&cli.StringSliceFlag{Name: "queries", Usage: "with --run: queries `FILE`(s), JSONL or Parquet with _id and text"},
		&cli.StringSliceFlag{Name: "corpus", Usage: "with --run: corpus `FILE`(s), JSONL or Parquet with _id, text and title; read once, only the documents the run names are kept"},
		&cli.IntFlag{Name: "depth", Value: corpus.DefaultDepth, Usage: "with --run: candidates scored per query, the run's best first"},
		&cli.BoolFlag{Name: "sigmoid", Usage: "write 1/(1+e^-score), in [0, 1], instead of the model's raw score"},
		&cli.IntFlag{Name: "top-n", Usage: "write only the N best candidates of each query (all are scored)", DefaultText: "all"},
		&cli.StringFlag{Name: "qrels", Usage: "relevance judgements `FILE` (TREC qrels or BEIR TSV): print nDCG@10, MRR@10, Recall@10/100 of the input order and of the reranked order (with --run, both over the top --depth candidates)"},
	}
	return append(flags, jobFlags("4 × the model's context")...)
}

// rerankOptionsFrom turns flags into a rerank job; mistakes are usage errors.
func rerankOptionsFrom(c *cli.Context) (job.RerankOptions, error) {
	var o job.RerankOptions
	run := corpus.RunOptions{Run: c.String("run"), Queries: c.StringSlice("queries"), Corpus: c.StringSlice("corpus"), Depth: c.Int("depth")}
	inputs := c.Args().Slice()
	switch {
	case run.Run != "" && len(inputs) > 0:
		return o, usagef("rerank: give input files or --run, not both")
	case run.Run != "" && (len(run.Queries) == 0 || len(run.Corpus) == 0):
		return o, usagef("rerank: --run needs --queries and --corpus")
	case run.Run == "" && (len(run.Queries) > 0 || len(run.Corpus) > 0 || c.IsSet("depth")):
		return o, usagef("rerank: --queries, --corpus and --depth go with --run")
	case run.Depth < 1:
		return o, usagef("rerank: --depth %d must be at least 1", run.Depth)
	case c.Int("top-n") < 0:
		return o, usagef("rerank: --top-n %d must not be negative", c.Int("top-n"))
	}
	if run.Run != "" {
		inputs = job.RunInputs(run)
	}
	common, err := jobOptionsWith(c, inputs, "rerank", ".rerank.arrow")
	o = job.RerankOptions{Options: common, Run: run, Sigmoid: c.Bool("sigmoid"), TopN: c.Int("top-n"),
		Queries: corpus.QueryOptions{QueryIDField: c.String("query-id-field"), QueryField: c.String("query-field"),
			CandidatesField: c.String("candidates-field"), DocIDField: c.String("doc-id-field"),
			DocTextFields: c.StringSlice("doc-text-field"), ScoreField: c.String("score-field")}}
	if err != nil {
		return o, err
	}
	if q := c.String("qrels"); q != "" {
		if err := checkInputs("rerank", []string{q}); err != nil {
			return o, fmt.Errorf("%w (--qrels)", err)
		}
	}
	return o, nil
}
