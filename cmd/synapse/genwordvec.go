package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/synapse-embed/synapse/internal/wordvec"
)

// maxTrainLine bounds one line of a --train corpus.
const maxTrainLine = 16 << 20

// genWordVectors learns word vectors from the --train corpus and writes the
// pass-through BERT that averages them (internal/wordvec).
func genWordVectors(w io.Writer, cfg genModelConfig) error {
	if cfg.train == "" {
		return usagef("gen-model: --kind word-vectors needs --train CORPUS.jsonl")
	}
	if cfg.vocabFrom != "" || cfg.words != "" {
		return usagef("gen-model: --kind word-vectors learns its vocabulary from --train; --vocab-from and --words do not apply")
	}
	texts, err := readTrainTexts(cfg.train, cfg.textFields)
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

// readTrainTexts reads the string fields of each JSON Lines record of path,
// joined by a newline.
func readTrainTexts(path string, fields []string) ([]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, usagef("gen-model: --train: %v", err)
	}
	defer fh.Close()
	var texts []string
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), maxTrainLine)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, usagef("gen-model: %s:%d: %v", path, line, err)
		}
		var parts []string
		for _, f := range fields {
			if s, ok := rec[f].(string); ok && s != "" {
				parts = append(parts, s)
			}
		}
		texts = append(texts, strings.Join(parts, "\n"))
	}
	if err := sc.Err(); err != nil {
		return nil, usagef("gen-model: %s: %v (lines are limited to %d MiB)", path, err, maxTrainLine>>20)
	}
	return texts, nil
}
