package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/pipeline/eval"
	"github.com/synapse-embed/synapse/pipeline/job"
)

func evalCommand() *cli.Command {
	return &cli.Command{
		Name:  "eval",
		Usage: "score a run against relevance judgements: nDCG@10, MRR@10, Recall@10 and Recall@100 as trec_eval computes them",
		Description: `--run is a TREC run (qid Q0 docid rank score tag), a BEIR TSV run (query-id corpus-id score), or the
	.arrow, .parquet or .jsonl output of synapse rerank (then both its input order and its reranked order are scored).
	--qrels is TREC qrels (qid 0 docid grade) or BEIR TSV (query-id corpus-id score). Gains are the grades; the averages
	are over the queries of the run that the qrels judge.

	Full reference: docs/rerank.md.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "run", Usage: "the run `FILE` (required)"},
			&cli.StringFlag{Name: "qrels", Usage: "the judgements `FILE` (required)"},
		},
		Action: func(c *cli.Context) error {
			if c.String("run") == "" || c.String("qrels") == "" || c.NArg() > 0 {
				return usagef("eval: give --run FILE and --qrels FILE (and nothing else)")
			}
			if err := checkInputs("eval", []string{c.String("run"), c.String("qrels")}); err != nil {
				return err
			}
			return evaluateOutput(c.App.Writer, c.String("run"), "", c.String("qrels"), 0)
		},
	}
}

// evaluateOutput prints the metrics of a run file or rerank output against
// qrels: for a rerank output with input ranks, the input order beside the
// reranked one; for a TREC output, the first-stage run (firstStage) if given.
func evaluateOutput(w io.Writer, path, firstStage, qrelsPath string, depth int) error {
	qrels, err := eval.ReadQrels(qrelsPath)
	if err != nil {
		return usageError{err}
	}
	reranked, input, err := rankings(path)
	if err != nil {
		return usageError{err}
	}
	if input == nil && firstStage != "" {
		if input, err = eval.ReadRun(firstStage); err != nil {
			return usageError{err}
		}
		// Only the run's top depth candidates were re-ranked: the input is
		// scored at the same depth, so that the columns compare.
		for q, docs := range input {
			if depth > 0 && len(docs) > depth {
				input[q] = docs[:depth]
			}
		}
	}
	names, ms := []string{"run"}, []eval.Metrics{eval.Evaluate(reranked, qrels)}
	if input != nil {
		names, ms = []string{"input", "reranked"}, []eval.Metrics{eval.Evaluate(input, qrels), ms[0]}
	}
	fmt.Fprintln(w)
	if input != nil && firstStage != "" && depth > 0 {
		fmt.Fprintf(w, "both scored over the top %d candidates of each query of %s (--depth)\n", depth, firstStage)
	}
	eval.Report(w, names, ms)
	return nil
}

// rankings reads a run: a TREC or TSV run, or a rerank output (reranked by
// rank, and input by input_rank; nil for a run without input ranks).
func rankings(path string) (reranked, input eval.Ranking, err error) {
	f, ferr := output.FormatOf(path)
	if ferr != nil || f == output.FormatTREC {
		r, err := eval.ReadRun(path)
		return r, nil, err
	}
	rows := map[string][]rankedRow{}
	add := func(r rankedRow) { rows[r.Query] = append(rows[r.Query], r) }
	switch f {
	case output.FormatJSONL:
		err = readJSONLRows(path, add)
	default:
		err = readArrowRows(path, add)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("eval: %s: %w", path, err)
	}
	reranked, input = eval.Ranking{}, eval.Ranking{}
	for q, rs := range rows {
		slices.SortFunc(rs, func(a, b rankedRow) int { return int(a.Rank - b.Rank) })
		for _, r := range rs {
			reranked[q] = append(reranked[q], r.Doc)
		}
		slices.SortFunc(rs, func(a, b rankedRow) int { return int(a.InputRank - b.InputRank) })
		for _, r := range rs {
			input[q] = append(input[q], r.Doc)
		}
	}
	return reranked, input, nil
}

// rankedRow is what evaluation reads of a rerank output row.
type rankedRow struct {
	Query     string `json:"query_id"`
	Doc       string `json:"doc_id"`
	Rank      int32  `json:"rank"`
	InputRank int32  `json:"input_rank"`
}

func readJSONLRows(path string, add func(rankedRow)) error {
	fh, err := files.OpenReader(context.Background(), path)
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 64<<20)
	for line := 1; sc.Scan(); line++ {
		var r rankedRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		add(r)
	}
	return sc.Err()
}

func readArrowRows(path string, add func(rankedRow)) error {
	return output.EachBatch(context.Background(), path, memory.DefaultAllocator, func(rec arrow.RecordBatch) error {
		sc := rec.Schema()
		var cols [4]arrow.Array
		for i, name := range []string{output.ColQueryID, output.ColDocID, output.ColRank, job.ColInputRank} {
			idx := sc.FieldIndices(name)
			if len(idx) == 0 {
				return fmt.Errorf("no %s column: not a rerank output", name)
			}
			cols[i] = rec.Column(idx[0])
		}
		q, d := cols[0].(*array.String), cols[1].(*array.String)
		rank, in := cols[2].(*array.Int32), cols[3].(*array.Int32)
		for i := 0; i < int(rec.NumRows()); i++ {
			add(rankedRow{Query: q.Value(i), Doc: d.Value(i), Rank: rank.Value(i), InputRank: in.Value(i)})
		}
		return nil
	})
}
