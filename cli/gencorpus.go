package cli

import (
	"fmt"
	"strings"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/urfave/cli/v2"
)

func genCorpusCommand() *cli.Command {
	return &cli.Command{
		Name:         "gen-corpus",
		Usage:        "write a synthetic Parquet corpus (id, title, text), or a later version of one, for benchmarks (internal)",
		Hidden:       true,
		OnUsageError: flagUsageError,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "rows", Usage: "rows of the original corpus", Value: 100000},
			&cli.Int64Flag{Name: "seed", Usage: "seed of the original corpus", Value: 1},
			&cli.Float64Flag{Name: "changed", Usage: "share of the rows given another title and text (e.g. 0.02)"},
			&cli.Float64Flag{Name: "deleted", Usage: "share of the rows left out"},
			&cli.Float64Flag{Name: "added", Usage: "share of new rows appended (ids synth-new-N)"},
			&cli.Int64Flag{Name: "change-seed", Usage: "seed of which rows change (and of --shuffle)", Value: 2},
			&cli.BoolFlag{Name: "shuffle", Usage: "write the rows in a random order (holds the corpus in memory)"},
			&cli.StringFlag{Name: "out", Usage: "the .parquet file to write (required)"},
		},
		Action: func(c *cli.Context) error {
			s := corpus.Synthetic{Rows: c.Int("rows"), Seed: c.Int64("seed"), Changed: c.Float64("changed"),
				Deleted: c.Float64("deleted"), Added: c.Float64("added"), ChangeSeed: c.Int64("change-seed"), Shuffle: c.Bool("shuffle")}
			switch {
			case !strings.HasSuffix(c.String("out"), ".parquet"):
				return usagef("gen-corpus: --out FILE.parquet is required")
			case s.Rows < 0 || s.Changed < 0 || s.Deleted < 0 || s.Added < 0 || s.Changed+s.Deleted > 1:
				return usagef("gen-corpus: --rows and the shares must not be negative, --changed + --deleted at most 1")
			}
			if err := corpus.WriteSynthetic(c.String("out"), s); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "wrote %s\n", c.String("out"))
			return nil
		},
	}
}
