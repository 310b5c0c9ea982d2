package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/tokenize"
)

func tokenizeCommand() *cli.Command {
	return &cli.Command{
		Name:  "tokenize",
		Usage: "tokenize JSON Lines from stdin ({\"text\": ...}) with a model's tokenizer: a GGUF's vocabulary as llama.cpp does, an ONNX model's tokenizer.json as Hugging Face tokenizers does",
		Description: `Each input line is a JSON object with a "text" string; each output line is
	{"ids": [...]} for it, in order (with --pieces also "tokens", the vocabulary
	strings, and "offsets", the [start, end) byte spans in the text). Blank lines
	are skipped. A line that is not such an object is reported on stderr with its
	line number and produces no output line; the other lines are still processed
	and the command exits with status 3.

	Full reference: docs/commands.md.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "GGUF `FILE` whose vocabulary to use (tensor data is not read), ONNX model directory or .onnx file, tokenizer.json, a cached model's name or digest prefix, or a Hugging Face id ORG/NAME[@REVISION] (pulled, or in the Hugging Face cache)"},
			&cli.BoolFlag{Name: "special", Usage: "add the model's BOS/CLS and EOS/SEP tokens as its GGUF flags say"},
			&cli.BoolFlag{Name: "parse-special", Usage: "treat control-token text in the input (\"[CLS]\", \"<s>\") as those tokens"},
			&cli.BoolFlag{Name: "pieces", Usage: "add each token's vocabulary string and byte offsets"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return usagef("tokenize: unexpected arguments %q (input comes from stdin)", c.Args().Slice())
			}
			path := c.String("model")
			if path == "" {
				return usagef("tokenize: -m MODEL.gguf is required")
			}
			path, err := artifact.Resolve(path, artifact.Options{AllowDegraded: true}) // its vocabulary only
			if err != nil {
				return usageError{fmt.Errorf("tokenize: %w", err)}
			}
			tok, err := loadTokenizer(path)
			if artifact.Unusable(err) {
				return usageError{fmt.Errorf("tokenize: %w", err)}
			}
			if err != nil {
				return fmt.Errorf("tokenize: %w", err)
			}
			opt := tokenize.Options{AddSpecial: c.Bool("special"), ParseSpecial: c.Bool("parse-special")}
			return tokenizeLines(tok, opt, c.Bool("pieces"), c.App.Reader, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// loadTokenizer reads the tokenizer of a GGUF file (no tensor data, no
// digest), of an ONNX model (directory or .onnx file: its tokenizer.json)
// or of a tokenizer.json.
func loadTokenizer(path string) (tokenize.Tokenizer, error) {
	if strings.HasSuffix(path, ".json") {
		tok, err := tokenize.LoadHF(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%s: %w: %w", path, artifact.ErrInvalid, err)
		}
		return tok, err
	}
	if hfmodel.IsONNX(path) {
		a, err := artifact.Open(path)
		if err != nil {
			return nil, err
		}
		return a.Tokenizer, nil
	}
	f, err := artifact.ReadGGUF(path)
	if err != nil {
		return nil, err
	}
	v, err := tokenize.VocabFromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w: %w", path, artifact.ErrInvalid, err)
	}
	return tokenize.New(v)
}

// tokenizeLines reads JSON Lines {"text": ...} from in and writes one line of
// ids per valid input line to out. Bad lines are reported on errOut; if there
// were any, the result is a partialError after all lines are processed.
func tokenizeLines(tok tokenize.Tokenizer, opt tokenize.Options, pieces bool, in io.Reader, out, errOut io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<16)
	w := bufio.NewWriterSize(out, 1<<16)
	var buf []byte
	bad := 0
	for lineNo := 1; ; lineNo++ {
		line, err := readlimit.ReadLine(r, "input", readlimit.Line)
		if errors.Is(err, readlimit.ErrTooLarge) {
			return usageError{fmt.Errorf("tokenize: line %d: %w", lineNo, err)}
		}
		if len(line) > 0 {
			var lineErr error
			buf, lineErr = tokenizeLine(buf[:0], tok, opt, pieces, line)
			switch {
			case lineErr != nil:
				bad++
				fmt.Fprintf(errOut, "synapse tokenize: line %d: %v\n", lineNo, lineErr)
			case len(buf) > 0:
				if _, werr := w.Write(buf); werr != nil {
					return fmt.Errorf("tokenize: write: %w", werr)
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("tokenize: read: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("tokenize: write: %w", err)
	}
	if bad > 0 {
		return partialError{fmt.Sprintf("tokenize: %d bad input line(s), listed above", bad)}
	}
	return nil
}

// tokenizeLine appends the output line for one input line to dst; a blank
// line gives nothing.
func tokenizeLine(dst []byte, tok tokenize.Tokenizer, opt tokenize.Options, pieces bool, line []byte) ([]byte, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return dst, nil
	}
	var rec struct {
		Text *string `json:"text"`
	}
	if line[0] != '{' {
		return dst, errors.New(`not a JSON object (want {"text": "..."})`)
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		return dst, fmt.Errorf("invalid JSON: %w", err)
	}
	if rec.Text == nil {
		return dst, errors.New(`no "text" string`)
	}
	res := tok.Tokenize(*rec.Text, opt)
	dst = append(dst, `{"ids":[`...)
	for i, t := range res.Tokens {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(t.ID), 10)
	}
	dst = append(dst, ']')
	if pieces {
		dst = appendPieces(dst, tok.Vocab(), res)
	}
	return append(dst, "}\n"...), nil
}

func appendPieces(dst []byte, v *tokenize.Vocab, res tokenize.Result) []byte {
	dst = append(dst, `,"tokens":[`...)
	for i, t := range res.Tokens {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, v.Tokens[t.ID])
	}
	dst = append(dst, `],"offsets":[`...)
	for i, t := range res.Tokens {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = strconv.AppendInt(dst, int64(t.Start), 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, int64(t.End), 10)
		dst = append(dst, ']')
	}
	dst = append(dst, ']')
	if res.Replaced > 0 {
		dst = append(dst, `,"replaced":`...)
		dst = strconv.AppendInt(dst, int64(res.Replaced), 10)
	}
	return dst
}

// appendJSONString appends s as a JSON string, without HTML escaping.
func appendJSONString(dst []byte, s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(dst, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
}
