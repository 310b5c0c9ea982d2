package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/model/tokenize"
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
		{"route", got.Route, "ONNX export, run by ONNX Runtime"},
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

// TestInspectONNXSentenceTransformers: inspect shows a sentence-transformers
// directory's chain (Transformer, Pooling modes, Dense shapes and
// activation, Normalize), what embed applies of it, max_seq_length, the
// prompts and default_prompt_name; as JSON and as text.
func TestInspectONNXSentenceTransformers(t *testing.T) {
	for _, pooled := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "st-encoder")
		enc := onnxtest.Tiny()
		enc.Pooled = pooled
		if _, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: enc}); err != nil {
			t.Fatal(err)
		}
		_, err := onnxtest.WriteST(dir, onnxtest.ST{Pooling: onnxtest.PoolingConfig(enc.Hidden, false, "mean", "max"),
			Dense: []onnxtest.Dense{{In: 2 * enc.Hidden, Out: 4, Activation: "torch.nn.modules.activation.GELU", Seed: 3}}, Normalize: true,
			MaxSeqLength: 16, Prompts: map[string]string{"query": "query: ", "document": "passage: "}, DefaultPrompt: "query"})
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
		st := got.SentenceTransformers
		if st == nil || len(st.Modules) != 4 {
			t.Fatalf("pooled %t: sentence_transformers %+v; want 4 modules", pooled, st)
		}
		var types []string
		for _, m := range st.Modules {
			types = append(types, m.Type)
		}
		p, d := st.Modules[1], st.Modules[2]
		wantApplied := "the graph's sentence_embedding output"
		if !pooled {
			wantApplied = "Pooling(max+mean exclude_prompt) + Dense(16->4 gelu bias sha256:"
		}
		checks := []struct {
			field     string
			got, want any
		}{
			{"module types", strings.Join(types, " "), "Transformer Pooling Dense Normalize"},
			{"pooling modes", strings.Join(p.Modes, "+"), "max+mean"},
			{"include_prompt", p.IncludePrompt != nil && !*p.IncludePrompt, true},
			{"pooling dir", p.Dir, "1_Pooling"},
			{"dense shape", fmt.Sprintf("%d->%d", d.InFeatures, d.OutFeatures), "16->4"},
			{"dense activation", d.Activation, "gelu"},
			{"dense bias", d.Bias != nil && *d.Bias, true},
			{"dense weights", d.Weights, filepath.Join("2_Dense", "model.safetensors")},
			{"applied", strings.HasPrefix(st.Applied, wantApplied), true},
			{"max_seq_length", st.MaxSeqLength, 16},
			{"prompts", st.Prompts["query"] + "|" + st.Prompts["document"], "query: |passage: "},
			{"default_prompt_name", st.DefaultPromptName, "query"},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("pooled %t: %s: got %v; want %v (applied %q)", pooled, c.field, c.got, c.want, st.Applied)
			}
		}
		if !pooled && !strings.HasSuffix(st.Applied, "+ Normalize, after the graph's last_hidden_state") {
			t.Errorf("applied %q; want the chain ending in Normalize, after last_hidden_state", st.Applied)
		}
		code, text, _ := runCLI(t, "inspect", dir)
		flat := strings.Join(strings.Fields(text), " ") // the columns' width depends on every row
		for _, want := range []string{"modules         0 Transformer: the ONNX graph", "1 Pooling: max + mean, prompt left out of the pooling (include_prompt false) (1_Pooling)",
			"2 Dense: 16 -> 4, gelu, bias (2_Dense/model.safetensors)", "3 Normalize (3_Normalize)", "applied         " + wantApplied,
			"max_seq_length  16 tokens", `prompts         document: "passage: " (--prompt-name document)`, `query: "query: " (--prompt-name query)`,
			"default prompt  query (applied unless --prefix or --prompt-name is given)"} {
			if code != 0 || !strings.Contains(flat, strings.Join(strings.Fields(want), " ")) {
				t.Errorf("pooled %t: text output (exit %d) lacks %q:\n%s", pooled, code, want, text)
			}
		}
	}
	// A plain directory has no sentence-transformers section.
	dir := filepath.Join(t.TempDir(), "plain")
	if _, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: onnxtest.Tiny()}); err != nil {
		t.Fatal(err)
	}
	if code, text, _ := runCLI(t, "inspect", dir); code != 0 || strings.Contains(text, "max_seq_length") || strings.Contains(text, "modules") {
		t.Errorf("a plain directory (exit %d): text shows a sentence-transformers section:\n%s", code, text)
	}
}
