package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/model/wordvec"
)

// genWordVectors learns word vectors from the --train corpus and writes the
// pass-through BERT that averages them (model/wordvec).
func genWordVectors(ctx context.Context, w io.Writer, cfg genModelConfig) error {
	if cfg.train == "" {
		return usagef("gen-model: --kind word-vectors needs --train CORPUS.jsonl")
	}
	if cfg.vocabFrom != "" || cfg.words != "" {
		return usagef("gen-model: --kind word-vectors learns its vocabulary from --train; --vocab-from and --words do not apply")
	}
	texts, err := readTrainTexts(ctx, cfg.train, cfg.textFields)
	if err != nil {
		return err
	}
	b, err := wordvec.Build(texts, cfg.wordvec, "synapse-wordvec")
	if err != nil {
		return usagef("gen-model: %s: %v", cfg.train, err)
	}
	rep := b.Report
	if err := b.Model.Write(cfg.out); err != nil {
		return fmt.Errorf("gen-model: %w", err)
	}
	fmt.Fprintf(w, "wrote %s (word vectors: %d texts, %d tokens, %d words, %d-token vocabulary, %d co-occurring pairs, %d dimensions + 2)\n",
		cfg.out, rep.Texts, rep.Tokens, rep.Words, rep.VocabSize, rep.Pairs, rep.Dims)
	return nil
}

// readTrainTexts reads the texts of the --train corpus through io/corpus, as
// embed reads its inputs: JSON Lines (.gz too) or Parquet, a local path or
// an object URL, the fields joined by a newline. A record embed would report
// as bad (a malformed line, a missing or non-string field, invalid UTF-8, a
// line over the limit) fails the command, naming its file and line (or
// Parquet row): a model learned from part of a corpus would differ silently.
// Only a transient failure to fetch an object exits 1 (retryable).
func readTrainTexts(ctx context.Context, path string, fields []string) ([]string, error) {
	r, err := corpus.Open([]string{path}, corpus.ReadOptions{TextFields: fields, Context: ctx})
	if err != nil {
		return nil, usagef("gen-model: --train: %v", err)
	}
	defer r.Close()
	var texts []string
	for {
		d, err := r.Next()
		if err == io.EOF {
			return texts, nil
		}
		if err != nil {
			return nil, trainError(path, err)
		}
		texts = append(texts, d.Text)
	}
}

// trainError is err from reading the --train corpus: bad data and a file
// that cannot be read are usage errors (exit 2), a transient object-store
// failure is not.
func trainError(path string, err error) error {
	var fe *corpus.FileError
	if errors.As(err, &fe) && objstore.IsURL(path) && !objstore.Permanent(err) {
		return fmt.Errorf("gen-model: --train: %w", err)
	}
	return usagef("gen-model: --train: %w", err)
}
