package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/wordvec"
)

func genModelCommand() *cli.Command {
	return &cli.Command{
		Name:         "gen-model",
		Usage:        "write a small random-weight GGUF model for tests, benchmarks and the demo (internal)",
		Hidden:       true,
		OnUsageError: flagUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "kind", Usage: "bert-embed, bert-rerank, llama, minilm, minilm-rerank, bert-base, gemma-embedding or word-vectors (learned from --train)", Value: "bert-embed"},
			&cli.StringFlag{Name: "vocab-from", Usage: "copy the tokenizer from this GGUF file (default: a generated vocabulary)"},
			&cli.StringFlag{Name: "words", Usage: "word list (one per line) for the generated vocabulary (default: a built-in list)"},
			&cli.Uint64Flag{Name: "seed", Usage: "weight seed", Value: modelgen.DefaultSeed},
			&cli.StringFlag{Name: "weights", Usage: "BERT kinds: type of the embedding and matrix tensors, f16, f32 or q8_0 ", DefaultText: "the preset's"},
			&cli.StringFlag{Name: "out", Usage: "where to write the model (required)"},
			&cli.StringFlag{Name: "train", Usage: "word-vectors: the corpus to learn the vectors from (JSON Lines, .jsonl.gz, Parquet, CSV or TSV, as embed reads them)"},
			&cli.StringSliceFlag{Name: "text-field", Usage: "word-vectors: the fields of --train to learn from (repeatable)", Value: cli.NewStringSlice("title", "text")},
			&cli.IntFlag{Name: "dims", Usage: "word-vectors: content dimensions (the model is 2 wider)", Value: wordvec.DefaultDims},
			&cli.IntFlag{Name: "window", Usage: "word-vectors: context tokens on each side", Value: wordvec.DefaultWindow},
			&cli.IntFlag{Name: "min-count", Usage: "word-vectors: occurrences a word needs to enter the vocabulary", Value: wordvec.DefaultMinCount},
			&cli.IntFlag{Name: "max-words", Usage: "word-vectors: most frequent words kept", Value: wordvec.DefaultMaxWords},
		},
		Action: func(c *cli.Context) error {
			if c.String("out") == "" {
				return usagef("gen-model: --out FILE is required")
			}
			uses := slices.Concat(files.Reads("--vocab-from", c.String("vocab-from")), files.Reads("--words", c.String("words")),
				files.Reads("--train", c.String("train")), files.Writes("--out", c.String("out")))
			if err := files.CheckPaths(uses); err != nil {
				return usageError{fmt.Errorf("gen-model: %w", err)}
			}
			return genModel(c.Context, c.App.Writer, genModelConfig{
				kind: c.String("kind"), vocabFrom: c.String("vocab-from"), words: c.String("words"),
				seed: c.Uint64("seed"), out: c.String("out"), weights: c.String("weights"),
				train: c.String("train"), textFields: c.StringSlice("text-field"),
				wordvec: wordvec.Config{Dims: c.Int("dims"), Window: c.Int("window"), MinCount: c.Int("min-count"),
					MaxWords: c.Int("max-words"), Seed: c.Uint64("seed")},
			})
		},
	}
}

type genModelConfig struct {
	kind, vocabFrom, words, out, weights string
	seed                                 uint64
	train                                string   // word-vectors: the corpus
	textFields                           []string // word-vectors: its fields
	wordvec                              wordvec.Config
}

// weightTypes are gen-model's --weights values.
var weightTypes = map[string]gguf.GGMLType{"f16": gguf.GGMLTypeF16, "f32": gguf.GGMLTypeF32, "q8_0": gguf.GGMLTypeQ8_0}

// genModel writes the model cfg describes and reports it on w.
func genModel(ctx context.Context, w io.Writer, cfg genModelConfig) error {
	if cfg.kind == "word-vectors" {
		return genWordVectors(ctx, w, cfg)
	}
	vocab, err := genModelVocab(cfg)
	if err != nil {
		return err
	}
	var write func(string) error
	switch cfg.kind {
	case "bert-embed", "bert-rerank", "minilm", "minilm-rerank", "bert-base":
		c := modelgen.TinyEmbedder(vocab)
		switch cfg.kind {
		case "bert-rerank":
			c = modelgen.TinyReranker(vocab)
		case "minilm":
			c = modelgen.MiniLM(vocab)
		case "minilm-rerank":
			c = modelgen.MiniLMReranker(vocab)
		case "bert-base":
			c = modelgen.BERTBase(vocab)
		}
		c.Seed = cfg.seed
		if cfg.weights != "" {
			wt, ok := weightTypes[strings.ToLower(cfg.weights)]
			if !ok {
				return usagef("gen-model: --weights %q: want f16, f32 or q8_0", cfg.weights)
			}
			c.WeightType = wt
		}
		write = c.Write
	case "llama":
		c := modelgen.TinyLlama(vocab)
		c.Seed = cfg.seed
		write = c.Write
	case "gemma-embedding": // embeddinggemma-300m's shape, for benchmarks
		c := modelgen.EmbeddingGemma300M(vocab)
		c.Seed = cfg.seed
		write = c.Write
	default:
		return usagef("gen-model: --kind %q: want bert-embed, bert-rerank, llama, minilm, minilm-rerank, bert-base, gemma-embedding or word-vectors", cfg.kind)
	}
	if err := write(cfg.out); err != nil {
		return fmt.Errorf("gen-model: %w", err)
	}
	fmt.Fprintf(w, "wrote %s (%s, %d-token %s vocabulary)\n", cfg.out, cfg.kind, vocab.Size(), vocab.Model())
	return nil
}

// genModelVocab copies the vocabulary from --vocab-from or builds one from
// --words (or the built-in list): WordPiece for BERT kinds, SentencePiece for llama.
func genModelVocab(cfg genModelConfig) (modelgen.Vocab, error) {
	if cfg.vocabFrom != "" {
		if cfg.words != "" {
			return modelgen.Vocab{}, usagef("gen-model: --vocab-from and --words exclude each other")
		}
		v, err := modelgen.VocabFromGGUF(cfg.vocabFrom)
		if err != nil {
			return modelgen.Vocab{}, inputError(fmt.Errorf("gen-model: --vocab-from: %w", err))
		}
		return v, nil
	}
	words := modelgen.DemoWords
	if cfg.words != "" {
		var err error
		if words, err = readWords(cfg.words); err != nil {
			return modelgen.Vocab{}, inputError(fmt.Errorf("gen-model: --words: %w", err))
		}
	}
	if cfg.kind == "llama" || cfg.kind == "gemma-embedding" {
		return modelgen.SPMVocab(words), nil
	}
	return modelgen.WordPieceVocab(words), nil
}

// readWords reads one word per line, skipping blank lines; a line over
// readlimit.Line is refused.
func readWords(path string) ([]string, error) {
	fh, err := readlimit.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var words []string
	r := bufio.NewReaderSize(fh, 1<<16)
	for line := 1; ; line++ {
		b, err := readlimit.ReadLine(r, fmt.Sprintf("%s:%d", path, line), readlimit.Line)
		if w := strings.TrimSpace(string(b)); w != "" {
			words = append(words, w)
		}
		if errors.Is(err, io.EOF) {
			return words, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
}

// inputError marks a failure to read --vocab-from or --words as a usage
// error (exit 2) unless it is an I/O failure that may pass: a missing,
// unreadable or non-regular file, one that is not GGUF or has no
// vocabulary, or a line over its limit fails the same way again.
func inputError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && !artifact.Unusable(err) {
		return err
	}
	return usageError{err}
}
