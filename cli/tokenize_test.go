package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/testmodels"
	"github.com/synapse-embed/synapse/model/tokenize"
)

func TestTokenizeLines(t *testing.T) {
	path := testenv.Fixture(t, "vocab", "ggml-vocab-gpt-2.gguf")
	tok, err := tokenize.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	in := "{\"text\": \"Hello world\"}\n\n{\"text\": \"\"}\n{\"text\": \" 42\\n\", \"id\": 7}"
	var out, errOut bytes.Buffer
	if err := tokenizeLines(tok, tokenize.Options{}, false, strings.NewReader(in), &out, &errOut); err != nil {
		t.Fatalf("tokenizeLines: %v (stderr %q)", err, errOut.String())
	}
	want := "{\"ids\":[15496,995]}\n{\"ids\":[]}\n{\"ids\":[5433,198]}\n"
	if out.String() != want {
		t.Errorf("got %q; want %q", out.String(), want)
	}
}

func TestTokenizeLinesPieces(t *testing.T) {
	tok, err := tokenize.Load(testenv.Fixture(t, "vocab", "ggml-vocab-gpt-2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	opt := tokenize.Options{AddSpecial: true, ParseSpecial: true}
	if err := tokenizeLines(tok, opt, true, strings.NewReader(`{"text":"Hi<|endoftext|>"}`), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	want := `{"ids":[17250,50256],"tokens":["Hi","<|endoftext|>"],"offsets":[[0,2],[2,15]]}` + "\n"
	if out.String() != want {
		t.Errorf("got %q; want %q", out.String(), want)
	}
}

func TestTokenizeLinesBadLines(t *testing.T) {
	tok, err := tokenize.Load(testmodels.Embedder(t))
	if err != nil {
		t.Fatal(err)
	}
	in := "{\"text\": \"hello\"}\nnot json\n{\"txt\": \"b\"}\n{\"text\": 5}\n{\"text\": \"world\"}\n"
	var out, errOut bytes.Buffer
	err = tokenizeLines(tok, tokenize.Options{}, false, strings.NewReader(in), &out, &errOut)
	var pe partialError
	if !errors.As(err, &pe) {
		t.Fatalf("got error %v; want a partialError", err)
	}
	id := func(s string) int32 { return tok.Tokenize(s, tokenize.Options{}).Tokens[0].ID }
	if got, want := out.String(), fmt.Sprintf("{\"ids\":[%d]}\n{\"ids\":[%d]}\n", id("hello"), id("world")); got != want {
		t.Errorf("stdout %q; want %q", got, want)
	}
	for _, line := range []string{"line 2:", "line 3:", "line 4:"} {
		if !strings.Contains(errOut.String(), line) {
			t.Errorf("stderr %q does not mention %q", errOut.String(), line)
		}
	}
	if strings.Contains(errOut.String(), "line 1:") || strings.Contains(errOut.String(), "line 5:") {
		t.Errorf("stderr %q reports a good line", errOut.String())
	}
}

func TestTokenizeExitCodes(t *testing.T) {
	model := testmodels.Embedder(t)
	cases := []struct {
		name  string
		args  []string
		stdin string
		want  int
	}{
		{"ok", []string{"-m", model}, `{"text":"x"}`, exitOK},
		{"no model flag", nil, "", exitUsage},
		{"missing file", []string{"-m", "/nonexistent/model.gguf"}, "", exitUsage},
		{"stray argument", []string{"-m", model, "extra"}, "", exitUsage},
		{"bad line", []string{"-m", model}, "{\"text\":\"x\"}\n[1]\n", exitPartial},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			app := newApp(&stdout, &stderr)
			app.Reader = strings.NewReader(c.stdin)
			ctx := context.Background()
			err := app.RunContext(ctx, append([]string{"synapse", "tokenize"}, c.args...))
			if got := exitCode(ctx, err); got != c.want {
				t.Errorf("exit code %d (err %v); want %d", got, err, c.want)
			}
		})
	}
}

// TestTokenizeLinesEndless: an input line longer than readlimit.Line (an
// endless one, /dev/zero) is refused as a usage error naming the line,
// instead of being read into memory.
func TestTokenizeLinesEndless(t *testing.T) {
	tok, err := tokenize.Load(testmodels.Embedder(t))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := io.MultiReader(strings.NewReader("{\"text\": \"hello\"}\n"), f)
	var out, errOut bytes.Buffer
	err = tokenizeLines(tok, tokenize.Options{}, false, in, &out, &errOut)
	var ue usageError
	if !errors.As(err, &ue) || !errors.Is(err, readlimit.ErrTooLarge) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("got %v; want a usage error, ErrTooLarge naming line 2", err)
	}
}
