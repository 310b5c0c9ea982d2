package cli

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/pgstore"
	"github.com/synapse-embed/synapse/pipeline/job"
)

func mergeCommand() *cli.Command {
	return &cli.Command{
		Name:  "merge",
		Usage: "put the parts of a sharded run together: one output and one errors file, as a single run writes them",
		Description: `synapse merge OUT.arrow reads the manifests OUT.shard-I-of-N.json of a run made with --shard I/N -o OUT.arrow,
	checks that all N shards are done (exit 1 naming the missing ones: run them again), that they are parts of one job
	(the same command, model, settings, inputs and N) and that their parts cover the inputs without gap or overlap
	(exit 2 otherwise), that each manifest's counts agree with each other and with its part and errors file (rows
	read = done + in errors = the records of its inputs; its output_rows and error_records are the part's; exit 2
	naming the manifest and the numbers otherwise), then streams the parts in order into OUT.arrow (or -o, whose extension picks the format:
	.arrow, .parquet, .jsonl, .trec) and their errors files into one, with the single run's row indexes and lines.
	An id that two parts hold (an output row's id, rerank's query_id) is refused with exit 2 naming the id and both
	manifests, before anything is published: a single run would have made the later document a duplicate_id row.
	The ids are kept as hashes, at most 64 bytes each.
	Parts can also be named explicitly: synapse merge PART... -o OUT.

	synapse merge postgresql://…?table=T publishes the shards of a run made with --shard I/N -o postgresql://…?table=T,
	each in its table T_synapse_shard_I_of_N with its manifest in its row of synapse_state: the same checks (exit 1
	naming the shards not done, a running one among them; exit 2 for shards of another job or shard count, counts
	that disagree with a shard's errors file or table, an id in two shards), the shards' errors files merged into
	--errors (default T.errors.jsonl), then one transaction replaces T by the union of the shards' tables and drops
	them and their rows: a reader sees the old table or the new one. No -o: the table is the output.

	Full reference: docs/resume-and-shards.md; tables: docs/postgres.md.`,
		ArgsUsage: "OUT.EXT | PART... | postgresql://…?table=T",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "the merged `FILE`", DefaultText: "OUT.EXT"},
			&cli.StringFlag{Name: "errors", Usage: "the merged errors `FILE`", DefaultText: "OUTPUT.errors.jsonl; of a table: T.errors.jsonl"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no summary"},
			&cli.Float64Flag{Name: "max-error-rate", Usage: "exit 0 instead of 3 when the rows in the merged errors file are at most this share of the rows read"},
		},
		Action: func(c *cli.Context) error {
			rate, err := maxErrorRate(c, "merge")
			if err != nil {
				return err
			}
			o := output.MergeOptions{Out: c.String("output"), Errors: c.String("errors"), Context: c.Context}
			switch args := c.Args().Slice(); {
			case len(args) == 0:
				return usagef("merge: give the sharded run's output (OUT.arrow, or the table postgresql://…?table=T) or its part files")
			case len(args) == 1 && job.ParseDest(args[0]).IsTable():
				return mergeTable(c, args[0], rate)
			case len(args) == 1 && !shardPart.MatchString(args[0]):
				o.Base = args[0]
			default:
				if o.Parts, err = expandObjects(c.Context, "merge", args); err != nil {
					return err
				}
			}
			for _, p := range []string{o.Out, o.Errors, o.Base} {
				if err := checkObjectBucket(c.Context, "merge", p); err != nil {
					return err
				}
			}
			sum, err := output.Merge(o)
			if err != nil {
				return mergeError(err)
			}
			return mergeOutcome(c, sum, rate)
		},
	}
}

// mergeTable publishes the shards of a PostgreSQL table (pgstore.Merge).
func mergeTable(c *cli.Context, out string, rate float64) error {
	if c.IsSet("output") {
		return usagef("merge: -o with a PostgreSQL table (%s): its shards are published into the table itself", pgstore.Redact(out))
	}
	t, err := pgstore.Parse(out)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	errPath := cmp.Or(c.String("errors"), pgstore.ErrorsPath(out))
	if err := checkObjectBucket(c.Context, "merge", errPath); err != nil {
		return err
	}
	ps, err := pgstore.Merge(c.Context, t, errPath)
	if err != nil {
		return mergeError(err)
	}
	return mergeOutcome(c, output.MergeSummary{Shards: ps.Shards, Rows: ps.Rows, OutputRows: ps.OutputRows,
		ErrorRecords: ps.ErrorRecords, Out: t.String(), Errors: ps.Errors}, rate)
}

// mergeError is a failed merge's error: parts that are not one job's,
// disagree with their manifests or share an id are usage errors (exit 2);
// missing shards (exit 1) may be run again.
func mergeError(err error) error {
	switch {
	case errors.Is(err, output.ErrForeignShard), errors.Is(err, output.ErrManifestMismatch), errors.Is(err, output.ErrIDInTwoShards),
		errors.Is(err, output.ErrUnknownFormat), objstore.Permanent(err):
		return usageError{fmt.Errorf("merge: %w", err)}
	}
	return fmt.Errorf("merge: %w", err)
}

// mergeOutcome prints a merge's summary and exits as the single run would
// have: 3 with rows in errors, unless --max-error-rate tolerates them.
func mergeOutcome(c *cli.Context, sum output.MergeSummary, rate float64) error {
	r := sum.Rows
	if !c.Bool("quiet") {
		fmt.Fprintf(c.App.Writer, "shards         %d\nrows read      %d = %d done + %d in errors", sum.Shards, r.Read, r.OK, r.Failed)
		if r.Partial > 0 {
			fmt.Fprintf(c.App.Writer, " (%d of them in part: %d items written, %d in errors)", r.Partial, r.Items, r.ItemFailures)
		}
		fmt.Fprintln(c.App.Writer)
		fmt.Fprintf(c.App.Writer, "output         %s (%d rows)\nerrors         %s (%d records)\n", sum.Out, sum.OutputRows, sum.Errors, sum.ErrorRecords)
	}
	switch {
	case withinErrorRate(r.Read, r.Failed, r.FileErrors, rate):
		fmt.Fprintf(c.App.ErrWriter, "synapse: %d of %d rows in the errors file (%s), within --max-error-rate %g\n", r.Failed, r.Read, sum.Errors, rate)
	case r.Failed > 0 || r.FileErrors > 0:
		return partialError{fmt.Sprintf("merge: %d of %d rows are in the errors file and %d input files failed; see %s", r.Failed, r.Read, r.FileErrors, sum.Errors)}
	}
	return nil
}

// shardPart matches a part file's name.
var shardPart = regexp.MustCompile(`\.shard-\d+-of-\d+\.[a-z]+$`)
