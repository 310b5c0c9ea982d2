package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/pipeline/eval"
	"github.com/synapse-embed/synapse/pipeline/job"
	"github.com/synapse-embed/synapse/pipeline/search"
)

func searchCommand() *cli.Command {
	return &cli.Command{
		Name:  "search",
		Usage: "exact top-k search of embedded queries over an embedded corpus (outputs of synapse embed, any dtype): a first-stage run for rerank and eval",
		Description: `--queries and --corpus are outputs of synapse embed (.arrow or .parquet; repeat a flag for the parts of a
sharded run) of one model, pooling, normalisation and dims. A document's score is its best chunk's: the dot product
(the cosine of normalized vectors) for a float32 or float16 corpus; the integer dot product of the codes for int8 and
uint8 (float queries are quantized with the corpus's stored ranges); dims minus the Hamming distance for binary and
ubinary; the exact sparse dot product for --vectors sparse outputs; ColBERT's MaxSim (the sum over the query's tokens
of the best dot product with one of the chunk's) for --vectors tokens outputs, the queries embedded with --as-query.
Ties go to the smaller document id. The corpus is streamed once per --block queries, never held whole; a
-k above the corpus's documents keeps them all, in the memory they need. A NaN or infinite value in a float query or
corpus vector is refused (exit 2, naming the file, row and id). The similarity kernels are chosen by the CPU
(AVX-512, VNNI and VPOPCNTDQ, or AVX2; Go elsewhere); the summary names them.
Every path may be an s3:// object (--queries, --corpus and --rescore-with also a glob or a prefix of the parts).

Full reference: docs/search.md.`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "queries", Usage: "the embedded queries `FILE` (one chunk per query; required)"},
			&cli.StringSliceFlag{Name: "corpus", Usage: "the embedded corpus `FILE` (required)"},
			&cli.IntFlag{Name: "k", Aliases: []string{"top-k"}, Value: search.DefaultK, Usage: "documents kept per query"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "the run `FILE`: " + search.RunFormats + "; - writes a TREC run to stdout (the summary then goes to stderr) (required)"},
			&cli.IntFlag{Name: "rescore", Usage: "binary, int8 or uint8 corpus: keep the best N × k documents and re-score them with the float queries against --rescore-with (else the corpus's own codes), as sentence-transformers does"},
			&cli.StringSliceFlag{Name: "rescore-with", Usage: "with --rescore: the higher-precision embedding `FILE` of the same corpus (e.g. its float32 or int8 output)"},
			&cli.StringFlag{Name: "qrels", Usage: "print nDCG@10, MRR@10, Recall@10 and Recall@100 of the run against these judgements `FILE`, as synapse eval does"},
			&cli.IntFlag{Name: "block", Value: search.DefaultBlock, Usage: "queries searched per pass over the corpus (memory: their vectors, their k × rescore hits and 1 KiB of scores each)"},
			&cli.IntFlag{Name: "threads", Usage: "goroutines scoring the block's queries", DefaultText: "the cores"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no summary"},
		},
		Action: runSearch,
	}
}

func runSearch(c *cli.Context) error {
	f, err := searchFlagsFrom(c)
	if err != nil {
		return err
	}
	o, qrels, err := f.open(c.Context)
	if err != nil {
		return err
	}
	tag := o.Corpus.Model + "." + o.Corpus.Dtype.String()
	w, err := search.CreateRun(c.Context, f.out, map[string]string{output.MetaRunTag: tag, "synapse.version": version,
		"synapse.search_k": strconv.Itoa(o.K), "synapse.search_rescore": strconv.Itoa(o.Rescore)}, c.App.Writer)
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
	report, wrote := c.App.Writer, f.out
	if f.out == search.Stdout { // stdout is the run's
		report, wrote = c.App.ErrWriter, "the run to stdout"
	}
	if !f.quiet {
		el := time.Since(start)
		passes := fmt.Sprintf("%d passes", st.Passes)
		if st.Passes == 1 {
			passes = "1 pass"
		}
		fmt.Fprintf(report, "searched       %d queries × %d chunks (%s, %s, %s kernels) in %s: %.3g similarities/s\nwrote          %s\n",
			st.Queries, st.Chunks, o.Corpus.Dtype, passes, st.Kernels, el.Round(time.Millisecond), float64(st.Pairs)/el.Seconds(), wrote)
		printObjectStore(report)
	}
	if qrels != nil {
		eval.Report(report, []string{"run"}, []eval.Metrics{eval.Evaluate(ranking, qrels)})
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

// searchFlags are a search's flags, read and checked without touching a
// file (see open for what is checked against the files).
type searchFlags struct {
	o                            search.Options
	queries, corpus, rescoreWith []string
	out, qrels                   string
	quiet                        bool
}

// searchFlagsFrom reads and checks the flags.
func searchFlagsFrom(c *cli.Context) (searchFlags, error) {
	f := searchFlags{o: search.Options{K: c.Int("k"), Rescore: c.Int("rescore"), Block: c.Int("block"), Threads: c.Int("threads")},
		queries: c.StringSlice("queries"), corpus: c.StringSlice("corpus"), rescoreWith: c.StringSlice("rescore-with"),
		out: c.String("output"), qrels: c.String("qrels"), quiet: c.Bool("quiet")}
	o := f.o
	switch {
	case c.NArg() > 0:
		return f, usagef("search: unexpected arguments %v (give --queries, --corpus and -o)", c.Args().Slice())
	case len(f.queries) == 0 || len(f.corpus) == 0 || f.out == "":
		return f, usagef("search: give --queries FILE, --corpus FILE and -o RUN")
	case o.K <= 0 || o.Block <= 0 || o.Rescore < 0 || o.Threads < 0:
		return f, usagef("search: -k and --block must be positive, --rescore and --threads not negative")
	case o.Rescore == 1:
		return f, usagef("search: --rescore 1 keeps k candidates: nothing to re-score (give N > 1)")
	case len(f.rescoreWith) > 0 && o.Rescore == 0:
		return f, usagef("search: --rescore-with needs --rescore N (N > 1)")
	}
	if err := search.CheckRunPath(f.out); err != nil {
		return f, err
	}
	for _, p := range slices.Concat(f.queries, f.corpus, f.rescoreWith, []string{f.out, f.qrels}) {
		if err := objstore.CheckScheme(p); p != "" && err != nil {
			return f, usagef("search: %v", err)
		}
	}
	return f, nil
}

// open checks the search against its files before any work: the inputs
// exist (objects named by a glob or prefix are expanded), the output can
// be written and is none of them, the qrels are read, and the queries and
// corpus were embedded alike.
func (f *searchFlags) open(ctx context.Context) (search.Options, eval.Qrels, error) {
	o := f.o
	var err error
	for _, in := range []*[]string{&f.queries, &f.corpus, &f.rescoreWith} {
		if *in, err = expandObjects(ctx, "search", *in); err != nil {
			return o, nil, err
		}
	}
	read := slices.Concat(f.queries, f.corpus, f.rescoreWith)
	if f.qrels != "" {
		if _, err := expandObjects(ctx, "search: --qrels", []string{f.qrels}); err != nil {
			return o, nil, err
		}
		read = append(read, f.qrels)
	}
	if err := checkInputs("search", read); err != nil {
		return o, nil, err
	}
	if f.out != search.Stdout {
		if err := job.CheckWritable("-o", f.out, read); err != nil {
			return o, nil, err
		}
	}
	paths := slices.Concat(files.Reads("--queries", f.queries...), files.Reads("--corpus", f.corpus...),
		files.Reads("--rescore-with", f.rescoreWith...), files.Reads("--qrels", f.qrels), files.Writes("-o", f.out))
	if err := files.CheckPaths(paths); err != nil {
		return o, nil, usageError{fmt.Errorf("search: %w", err)}
	}
	var qrels eval.Qrels
	if f.qrels != "" {
		if qrels, err = eval.ReadQrels(f.qrels); err != nil {
			return o, nil, usagef("search: --qrels: %v", err)
		}
	}
	if o.Queries, err = search.OpenVectors(ctx, "--queries", f.queries); err != nil {
		return o, nil, err
	}
	if o.Corpus, err = search.OpenVectors(ctx, "--corpus", f.corpus); err != nil {
		return o, nil, err
	}
	if len(f.rescoreWith) > 0 {
		if o.RescoreWith, err = search.OpenVectors(ctx, "--rescore-with", f.rescoreWith); err != nil {
			return o, nil, err
		}
	}
	return o, qrels, search.Check(&o)
}
