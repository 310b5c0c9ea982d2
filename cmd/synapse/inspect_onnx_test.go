package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/internal/onnx/onnxtest"
	"github.com/synapse-embed/synapse/internal/tokenize"
)

// TestInspectONNX inspects a generated ONNX model directory, as JSON and as
// text, without ONNX Runtime.
func TestInspectONNX(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my-encoder")
	enc, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: onnxtest.Tiny()})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "inspect", "--json", dir)
	if code != 0 {
		t.Fatalf("exit %d; want 0; stderr: %s", code, errOut)
	}
	var got onnxModelInfo
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	graph := filepath.Join(dir, "model.onnx")
	checks := []struct {
		field     string
		got, want any
	}{
		{"format", got.Format, "onnx"},
		{"graph", got.Graph, graph},
		{"digest", got.Digest, sha256File(t, graph)},
		{"name", got.Name, "my-encoder"},
		{"architecture", got.Architecture, "bert"},
		{"dims", got.Dims, int64(enc.Hidden)},
		{"context_length", got.ContextLength, enc.Positions},
		{"pooling", got.Pooling, "sentence_embedding (in the graph)"},
		{"tokenizer.model", got.Tokenizer.Model, "WordPiece"},
		{"tokenizer.vocab_size", got.Tokenizer.VocabSize, enc.Vocab},
		{"tokenizer affixes", got.Tokenizer.PrefixText + " " + got.Tokenizer.SuffixText, "[CLS] [SEP]"},
		{"parameters", got.Parameters, int64((enc.Vocab+2+enc.Positions)*enc.Hidden + 4)},
		{"inputs", strings.Join(got.Inputs, "; "), "input_ids int64[batch, sequence]; attention_mask int64[batch, sequence]; token_type_ids int64[batch, sequence]"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v; want %v", c.field, c.got, c.want)
		}
	}
	if !slices.Contains(got.Outputs, "last_hidden_state float32[batch, sequence, 8]") {
		t.Errorf("outputs: got %v; want last_hidden_state float32[batch, sequence, 8] among them", got.Outputs)
	}
	code, text, _ := runCLI(t, "inspect", graph)
	for _, want := range []string{"onnx (ONNX Runtime engine)", "WordPiece", "[CLS] … [SEP]", got.Digest} {
		if code != 0 || !strings.Contains(text, want) {
			t.Errorf("text output (exit %d) lacks %q:\n%s", code, want, text)
		}
	}
	code, _, errOut = runCLI(t, "inspect", filepath.Join(dir, "tokenizer.json"))
	if code != exitUsage || !strings.Contains(errOut, "tokenizer.json") {
		t.Errorf("inspect tokenizer.json: exit %d, stderr %q; want a usage error (not a model) naming the file", code, errOut)
	}
}

// TestTokenizeONNX: `synapse tokenize -m` takes an ONNX model directory, a
// .onnx file and a tokenizer.json, and uses the tokenizer.json tokenizer.
func TestTokenizeONNX(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if _, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: onnxtest.Tiny()}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, filepath.Join(dir, "model.onnx"), filepath.Join(dir, "tokenizer.json")} {
		tok, err := loadTokenizer(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		v := tok.Vocab()
		var got []string
		for _, id := range tok.Tokenize("Hello, cells!", tokenize.Options{AddSpecial: true}).IDs() {
			got = append(got, v.Tokens[id])
		}
		if want := []string{"[CLS]", "hello", ",", "cells", "!", "[SEP]"}; !slices.Equal(got, want) {
			t.Errorf("%s: got %q; want %q", path, got, want)
		}
	}
}
