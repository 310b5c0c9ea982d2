package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/dataio"
)

func init() {
	register(&cli.Command{
		Name:   "gen-corpus",
		Usage:  "write a synthetic Parquet corpus (id, title, text) for benchmarks (internal)",
		Hidden: true,
		Description: `synapse gen-corpus --rows N --out FILE.parquet writes N rows of pseudo-words: id "synth-N", a title and a text
of 8 to 200 words (1,000 to 3,000 for one row in 50), ` + fmt.Sprint(dataio.SyntheticRowGroup) + ` rows per row group, snappy compressed.
The same --seed gives the same file. Memory use is one row group, whatever N is.`,
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "rows", Usage: "number of rows", Value: 1_000_000},
			&cli.Int64Flag{Name: "seed", Usage: "the rows' seed", Value: 1},
			&cli.StringFlag{Name: "out", Usage: "the Parquet `FILE` to write (required)"},
		},
		Action: func(c *cli.Context) error {
			out := c.String("out")
			switch {
			case out == "" || !strings.HasSuffix(out, ".parquet"):
				return usagef("gen-corpus: --out FILE.parquet is required")
			case c.Int("rows") < 0:
				return usagef("gen-corpus: --rows %d: want 0 or more", c.Int("rows"))
			}
			if err := dataio.WriteSyntheticParquet(out, c.Int("rows"), c.Int64("seed")); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "%s: %d rows\n", out, c.Int("rows"))
			return nil
		},
	})
}
