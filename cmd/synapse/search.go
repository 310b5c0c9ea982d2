package main

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/internal/dataio"
	"github.com/synapse-embed/synapse/internal/eval"
	"github.com/synapse-embed/synapse/internal/job"
	"github.com/synapse-embed/synapse/internal/search"
)

func init() {
	register(&cli.Command{
		Name:  "search",
		Usage: "exact top-k search of embedded queries over an embedded corpus (outputs of synapse embed, any dtype): a first-stage run for rerank and eval",
		Description: `--queries and --corpus are outputs of synapse embed (.arrow or .parquet; repeat a flag for the parts of a
sharded run) of one model, pooling, normalisation and dims. A document's score is its best chunk's: the dot product
(the cosine of normalized vectors) for a float32 or float16 corpus; the integer dot product of the codes for int8 and
uint8 (float queries are quantized with the corpus's stored ranges); dims minus the Hamming distance for binary and
ubinary. Ties go to the smaller document id. The corpus is streamed once per --block queries, never held whole.`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "queries", Usage: "the embedded queries `FILE` (one chunk per query; required)"},
			&cli.StringSliceFlag{Name: "corpus", Usage: "the embedded corpus `FILE` (required)"},
			&cli.IntFlag{Name: "k", Aliases: []string{"top-k"}, Value: search.DefaultK, Usage: "documents kept per query"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "the run `FILE`: " + search.RunFormats + " (required)"},
			&cli.IntFlag{Name: "rescore", Usage: "binary, int8 or uint8 corpus: keep the best N × k documents and re-score them with the float queries against --rescore-with (else the corpus's own codes), as sentence-transformers does"},
			&cli.StringSliceFlag{Name: "rescore-with", Usage: "with --rescore: the higher-precision embedding `FILE` of the same corpus (e.g. its float32 or int8 output)"},
			&cli.StringFlag{Name: "qrels", Usage: "print nDCG@10, MRR@10, Recall@10 and Recall@100 of the run against these judgements `FILE`, as synapse eval does"},
			&cli.IntFlag{Name: "block", Value: search.DefaultBlock, Usage: "queries searched per pass over the corpus (memory: their vectors, their k × rescore hits and 1 KiB of scores each)"},
			&cli.IntFlag{Name: "threads", Usage: "goroutines scoring the block's queries", DefaultText: "the cores"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no summary"},
		},
		Action: runSearch,
	})
}

func runSearch(c *cli.Context) error {
	o, out, err := searchOptionsFrom(c)
	if err != nil {
		return err
	}
	var qrels eval.Qrels
	if p := c.String("qrels"); p != "" {
		if qrels, err = eval.ReadQrels(p); err != nil {
			return usagef("search: --qrels: %v", err)
		}
	}
	tag := o.Corpus.Model + "." + o.Corpus.Dtype.String()
	w, err := search.CreateRun(out, map[string]string{dataio.MetaRunTag: tag, "synapse.version": version,
		"synapse.search_k": strconv.Itoa(o.K), "synapse.search_rescore": strconv.Itoa(o.Rescore)})
	if err != nil {
		return err
	}
	ranking := eval.Ranking{}
	start := time.Now()
	st, err := search.Run(c.Context, o, func(q string, hits []search.Hit) error {
		if qrels != nil {
			ranking[q] = evalOrder(hits)
		}
		return w.Put(q, hits)
	})
	if err != nil {
		w.Abort()
		return err
	}
	if err := w.Commit(); err != nil {
		return err
	}
	if !c.Bool("quiet") {
		el := time.Since(start)
		fmt.Fprintf(c.App.Writer, "searched       %d queries × %d chunks (%s, %d passes) in %s: %.3g similarities/s\nwrote          %s\n",
			st.Queries, st.Chunks, o.Corpus.Dtype, st.Passes, el.Round(time.Millisecond), float64(st.Pairs)/el.Seconds(), out)
	}
	if qrels != nil {
		eval.Report(c.App.Writer, []string{"run"}, []eval.Metrics{eval.Evaluate(ranking, qrels)})
	}
	return nil
}

// evalOrder is the hits' documents in the order synapse eval reads a run
// file: by score, ties by document id descending (trec_eval's rule), so
// that --qrels prints what eval prints for the written run.
func evalOrder(hits []search.Hit) []string {
	hs := slices.Clone(hits)
	slices.SortStableFunc(hs, func(a, b search.Hit) int {
		switch {
		case a.Score != b.Score:
			if a.Score > b.Score {
				return -1
			}
			return 1
		case a.Doc > b.Doc:
			return -1
		case a.Doc < b.Doc:
			return 1
		}
		return 0
	})
	docs := make([]string, len(hs))
	for i, h := range hs {
		docs[i] = h.Doc
	}
	return docs
}

// searchOptionsFrom checks the flags and opens the inputs' schemas.
func searchOptionsFrom(c *cli.Context) (search.Options, string, error) {
	o := search.Options{K: c.Int("k"), Rescore: c.Int("rescore"), Block: c.Int("block"), Threads: c.Int("threads")}
	out := c.String("output")
	switch {
	case c.NArg() > 0:
		return o, "", usagef("search: unexpected arguments %v (give --queries, --corpus and -o)", c.Args().Slice())
	case len(c.StringSlice("queries")) == 0 || len(c.StringSlice("corpus")) == 0 || out == "":
		return o, "", usagef("search: give --queries FILE, --corpus FILE and -o RUN")
	case o.K <= 0 || o.Block <= 0 || o.Rescore < 0 || o.Threads < 0:
		return o, "", usagef("search: -k and --block must be positive, --rescore and --threads not negative")
	case o.Rescore == 1:
		return o, "", usagef("search: --rescore 1 keeps k candidates: nothing to re-score (give N > 1)")
	}
	inputs := slices.Concat(c.StringSlice("queries"), c.StringSlice("corpus"), c.StringSlice("rescore-with"))
	if err := checkInputs("search", inputs); err != nil {
		return o, "", err
	}
	if err := search.CheckRunPath(out); err != nil {
		return o, "", err
	}
	if err := job.CheckWritable("-o", out, inputs); err != nil {
		return o, "", err
	}
	var err error
	if o.Queries, err = search.OpenVectors("--queries", c.StringSlice("queries")); err != nil {
		return o, "", err
	}
	if o.Corpus, err = search.OpenVectors("--corpus", c.StringSlice("corpus")); err != nil {
		return o, "", err
	}
	if p := c.StringSlice("rescore-with"); len(p) > 0 {
		if o.RescoreWith, err = search.OpenVectors("--rescore-with", p); err != nil {
			return o, "", err
		}
	}
	return o, out, search.Check(&o)
}
