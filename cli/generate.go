package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/grammar"
	"github.com/synapse-embed/synapse/pipeline/job"
)

func generateCommand() *cli.Command {
	return &cli.Command{
		Name:  "generate",
		Usage: "complete every row's prompt with a small LLM, constrained by a grammar, a JSON schema or a list of choices",
		Description: `Each row's text (--text-field, with --prefix) is a prompt; with --template chat it is the user's turn in the
	model's own chat template (tokenizer.chat_template; --system adds a system turn). Decoding is greedy, so the same
	input gives the same output for any worker count, unless --temperature samples (each row seeded from --seed and
	its id). --grammar (GBNF), --json-schema (converted to GBNF; every output is checked to validate) or --choices
	constrain every token; a grammar llama.cpp cannot parse is refused before any row is read.
	Rows: id, text, finish_reason (stop: the model ended; grammar: the grammar allowed nothing else; length:
	--max-tokens or the context was reached), n_prompt, n_gen. A prompt longer than the context is an error row
	(prompt_too_long), never cut.

	Full reference: docs/generate.md (common flags: docs/jobs.md).`,
		ArgsUsage: "INPUT... (.parquet, .arrow, .jsonl, .csv, .tsv — the text ones also .gz —, s3://…, or - for JSONL on stdin)",
		Flags:     generateFlags(),
		Action: func(c *cli.Context) error {
			o, err := generateOptionsFrom(c)
			if err != nil {
				return err
			}
			return runJob(c, jobSpec{name: "generate", opts: &o.Options, check: o.Check,
				words: words{verb: "generating", done: "generated", items: "generations", unit: "generations"},
				run:   func(ctx context.Context) (job.Summary, error) { return job.Generate(ctx, o) }})
		},
	}
}

func generateFlags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output `FILE`: .arrow, .parquet or .jsonl", DefaultText: "FIRST_INPUT.generated.arrow"},
	}
	flags = append(flags, readFlags("prompt")...)
	flags = append(flags,
		&cli.StringFlag{Name: "template", Value: "none", Usage: "none: the text as it is; chat: the text as the user's turn in the model's chat template"},
		&cli.StringFlag{Name: "system", Usage: "with --template chat: the system turn's `TEXT`"},
		&cli.IntFlag{Name: "max-tokens", Value: job.DefaultMaxTokens, Usage: "most tokens generated per row"},
		&cli.StringFlag{Name: "grammar", Usage: "GBNF grammar `FILE` (rule root) every output must match"},
		&cli.StringFlag{Name: "json-schema", Usage: "JSON schema `FILE`: outputs are JSON valid under it (objects, arrays, strings, numbers, integers, booleans, enums, required properties)"},
		&cli.StringFlag{Name: "choices", Usage: "comma-separated `LIST`: every output is one of them (classification)"},
		&cli.Float64Flag{Name: "temperature", Usage: "sample at this temperature instead of decoding greedily"},
		&cli.Uint64Flag{Name: "seed", Usage: "with --temperature: the seed each row's own seed is derived from (with its id)"},
		&cli.IntFlag{Name: "context", Usage: "context size of the model in the workers", DefaultText: "the model's, at most 4096"},
	)
	return append(flags, jobFlags("one prompt per request")...)
}

// generateOptionsFrom turns flags into a generate job; mistakes are usage errors.
func generateOptionsFrom(c *cli.Context) (job.GenerateOptions, error) {
	common, err := jobOptionsFrom(c, "generate", ".generated.arrow")
	o := job.GenerateOptions{Options: common, System: c.String("system"), MaxTokens: c.Int("max-tokens"),
		Temperature: float32(c.Float64("temperature")), Seed: c.Uint64("seed"), Context: c.Int("context")}
	if err != nil {
		return o, err
	}
	readOptionsFrom(c, &o.Options)
	switch t := c.String("template"); t {
	case "none":
	case "chat":
		o.Chat = true
	default:
		return o, usagef("generate: --template %q: want none or chat", t)
	}
	switch {
	case o.System != "" && !o.Chat:
		return o, usagef("generate: --system goes with --template chat")
	case o.MaxTokens < 1:
		return o, usagef("generate: --max-tokens %d must be at least 1", o.MaxTokens)
	case o.Temperature < 0:
		return o, usagef("generate: --temperature %g must not be negative", o.Temperature)
	case c.IsSet("seed") && o.Temperature == 0:
		return o, usagef("generate: --seed goes with --temperature (greedy decoding uses no seed)")
	case o.Context < 0:
		return o, usagef("generate: --context %d must not be negative", o.Context)
	}
	return o, constraint(c, &o)
}

// constraint reads the one of --grammar, --json-schema and --choices given.
func constraint(c *cli.Context, o *job.GenerateOptions) error {
	given := 0
	for _, f := range []string{"grammar", "json-schema", "choices"} {
		if c.IsSet(f) {
			given++
		}
	}
	if given > 1 {
		return usagef("generate: give one of --grammar, --json-schema and --choices")
	}
	switch {
	case c.IsSet("grammar"):
		b, err := readlimit.ReadFile(c.String("grammar"), readlimit.Grammar)
		if err != nil {
			return usagef("generate: --grammar: %v", err)
		}
		if err := grammar.CheckGBNF(string(b)); err != nil {
			return usageError{fmt.Errorf("generate: --grammar %s: %w", c.String("grammar"), err)}
		}
		o.Grammar = string(b)
	case c.IsSet("json-schema"):
		b, err := readlimit.ReadFile(c.String("json-schema"), readlimit.Grammar)
		if err != nil {
			return usagef("generate: --json-schema: %v", err)
		}
		s, err := grammar.ParseSchema(b)
		if err != nil {
			return usageError{fmt.Errorf("generate: --json-schema %s: %w", c.String("json-schema"), err)}
		}
		o.Schema, o.Grammar = s, s.GBNF()
	case c.IsSet("choices"):
		var choices []string
		for _, ch := range strings.Split(c.String("choices"), ",") {
			if ch = strings.TrimSpace(ch); ch != "" {
				choices = append(choices, ch)
			}
		}
		if len(choices) == 0 {
			return usagef("generate: --choices %q lists no choice", c.String("choices"))
		}
		o.Grammar = grammar.Choices(choices)
	}
	return nil
}
