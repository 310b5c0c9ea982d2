package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/testmodels"
)

func TestInspectFixtureJSON(t *testing.T) {
	path := testenv.Fixture(t, "models", "ref-bert-embed.gguf")
	code, out, errOut := runCLI(t, "inspect", "--json", path)
	if code != 0 {
		t.Fatalf("exit %d; want 0; stderr: %s", code, errOut)
	}
	var got modelInfo
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		field string
		got   any
		want  any
	}{
		{"architecture", got.Architecture, "bert"},
		{"name", got.Name, "ref-bert-embed"},
		{"embedding_length", got.EmbeddingLength, uint64(128)},
		{"layers", got.Layers, uint64(2)},
		{"heads", got.Heads, uint64(4)},
		{"context_length", got.ContextLength, uint64(512)},
		{"pooling", got.Pooling, "mean"},
		{"tokenizer.model", got.Tokenizer.Model, "bert"},
		{"tokenizer.pre", got.Tokenizer.Pre, "bert-bge"},
		{"vocab_size", got.Tokenizer.VocabSize, 30522},
		{"tensors", got.Tensors, 37},
		{"parameters", got.Parameters, uint64(4369408)}, // llama.cpp's llama_model_n_params for this file
		{"file_size", got.FileSize, st.Size()},
		{"digest", got.Digest, sha256File(t, path)},
		{"gguf_version", got.GGUFVersion, uint32(3)},
		{"file_type_name", got.FileTypeName, "MOSTLY_F16"},
		{"add_bos unset", got.Tokenizer.AddBOS == nil, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v; want %v", c.field, c.got, c.want)
		}
	}
	wantSpecial := []specialToken{{"padding", 0, "[PAD]"}, {"unknown", 100, "[UNK]"}, {"cls", 101, "[CLS]"}, {"seperator", 102, "[SEP]"}, {"mask", 103, "[MASK]"}}
	if len(got.Tokenizer.Special) != len(wantSpecial) {
		t.Fatalf("special tokens %+v; want %+v", got.Tokenizer.Special, wantSpecial)
	}
	for i, w := range wantSpecial {
		if got.Tokenizer.Special[i] != w {
			t.Errorf("special token %d = %+v; want %+v", i, got.Tokenizer.Special[i], w)
		}
	}
}

func TestInspectText(t *testing.T) {
	// A generated model, so this runs without the shared fixtures.
	path := filepath.Join(t.TempDir(), "llama.gguf")
	c := modelgen.TinyLlama(modelgen.SPMVocab([]string{"hello", "world"}))
	if err := c.Write(path); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := inspect(&out, path, false); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		`(?m)^file +` + regexp.QuoteMeta(path) + `$`,
		`(?m)^digest +` + sha256File(t, path) + `$`,
		`(?m)^architecture +llama$`,
		`(?m)^file type +1 \(MOSTLY_F16\)$`,
		`(?m)^embedding width +64$`,
		`(?m)^layers +2$`,
		`(?m)^attention heads +4 \(2 key/value\)$`,
		`(?m)^context length +2048$`,
		`(?m)^pooling +\(none\)$`,
		`(?m)^tokenizer +llama$`,
		`(?m)^pre-tokenizer +default$`,
		`(?m)^special tokens +unknown +0  "<unk>"$`,
		`(?m)^ +bos +1  "<s>"$`,
		`(?m)^ +eos +2  "</s>"$`,
		`(?m)^add bos/eos/sep +true / false / unset$`,
		`(?m)^tensors +21$`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("output does not match %s:\n%s", want, text)
		}
	}
	// The value column is aligned: every line's value starts at the same offset.
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	col := strings.Index(lines[0], "/")
	for _, l := range lines {
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("line %q: value not at column %d", l, col)
		}
	}
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notGGUF, []byte("hello, not a model\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.gguf")
	tests := []struct {
		name     string
		args     []string
		code     int
		inStderr string
	}{
		{"missing file", []string{"inspect", missing}, exitUsage, missing},
		{"not GGUF", []string{"inspect", notGGUF}, exitUsage, notGGUF + ": gguf: not a GGUF file"},
		{"no argument", []string{"inspect"}, exitUsage, "want one model argument"},
		{"two arguments", []string{"inspect", notGGUF, missing}, exitUsage, "got 2"},
		{"unknown flag", []string{"inspect", "--yaml", notGGUF}, exitUsage, "yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.inStderr) {
				t.Errorf("exit %d, stderr %q; want exit %d and stderr containing %q", code, errOut, tt.code, tt.inStderr)
			}
			if out != "" {
				t.Errorf("stdout %q; want nothing", out)
			}
		})
	}
}

func TestGenModel(t *testing.T) {
	dir := t.TempDir()
	words := filepath.Join(dir, "words.txt")
	if err := os.WriteFile(words, []byte("alpha\n\nbeta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args      []string
		code      int
		arch      string
		pooling   string
		tokenizer string
	}{
		{[]string{"--kind", "bert-embed", "--words", words}, exitOK, "bert", "mean", "bert"},
		{[]string{"--kind", "bert-rerank"}, exitOK, "bert", "rank", "bert"},
		{[]string{"--kind", "llama", "--seed", "7"}, exitOK, "llama", "", "llama"},
		{[]string{"--kind", "gpt"}, exitUsage, "", "", ""},
		// Bad input is permanent (exit 2), never a failure a scheduler retries.
		{[]string{"--kind", "bert-embed", "--vocab-from", filepath.Join(dir, "none.gguf")}, exitUsage, "", "", ""},
		{[]string{"--kind", "bert-embed", "--vocab-from", words}, exitUsage, "", "", ""},
		{[]string{"--kind", "bert-embed", "--words", "/dev/zero"}, exitUsage, "", "", ""},
		{[]string{"--kind", "bert-embed", "--words", dir}, exitUsage, "", "", ""},
		{[]string{"--vocab-from", words, "--words", words}, exitUsage, "", "", ""},
	}
	for i, tt := range tests {
		out := filepath.Join(dir, "m.gguf")
		os.Remove(out)
		code, _, errOut := runCLI(t, append([]string{"gen-model", "--out", out}, tt.args...)...)
		if code != tt.code {
			t.Errorf("case %d %v: exit %d (%s); want %d", i, tt.args, code, errOut, tt.code)
			continue
		}
		if code != exitOK {
			continue
		}
		info, err := describeModel(out)
		if err != nil {
			t.Fatal(err)
		}
		if info.Architecture != tt.arch || info.Pooling != tt.pooling || info.Tokenizer.Model != tt.tokenizer {
			t.Errorf("case %d %v: %s/%q/%s; want %s/%q/%s", i, tt.args, info.Architecture, info.Pooling, info.Tokenizer.Model, tt.arch, tt.pooling, tt.tokenizer)
		}
	}
	code, out, _ := runCLI(t, "--help")
	if code != exitOK || strings.Contains(out, "gen-model") || !strings.Contains(out, "inspect") {
		t.Errorf("help (exit %d) lists gen-model or misses inspect:\n%s", code, out)
	}
}

// TestInspectRerankerLabels: inspect shows a GGUF reranker's classifier
// labels and the score rule synapse rerank applies, or why it cannot.
func TestInspectRerankerLabels(t *testing.T) {
	for _, tt := range []struct {
		path, labels, scoring, why string
	}{
		{testmodels.Reranker(t), "", "logits[0] (1 label)", ""},
		{testmodels.LabelledReranker(t, "LABEL_0", "LABEL_1"), "LABEL_0 LABEL_1", "logits[1] - logits[0] (2 labels, label 1 positive)", ""},
		{testmodels.LabelledReranker(t, "relevant", "irrelevant"), "relevant irrelevant", "", `2 labels (0="relevant", 1="irrelevant")`},
	} {
		code, out, errOut := runCLI(t, "inspect", "--json", tt.path)
		if code != 0 {
			t.Fatalf("%s: exit %d; stderr: %s", tt.path, code, errOut)
		}
		var got modelInfo
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, out)
		}
		if strings.Join(got.ClassifierLabels, " ") != tt.labels || got.Scoring != tt.scoring || !strings.Contains(got.ScoringError, tt.why) || (tt.why == "") != (got.ScoringError == "") {
			t.Errorf("%s: labels %q, scoring %q, error %q; want %q, %q, an error saying %q", tt.path, got.ClassifierLabels, got.Scoring, got.ScoringError, tt.labels, tt.scoring, tt.why)
		}
		_, text, _ := runCLI(t, "inspect", tt.path)
		want := "score " + tt.scoring
		if tt.why != "" {
			want = "score cannot rerank: "
		}
		if !strings.Contains(strings.Join(strings.Fields(text), " "), want) {
			t.Errorf("%s: text lacks %q:\n%s", tt.path, want, text)
		}
	}
	code, out, _ := runCLI(t, "inspect", "--json", testmodels.Embedder(t))
	if code != 0 || strings.Contains(out, "scoring") {
		t.Errorf("an embedder (exit %d) shows a score rule:\n%s", code, out)
	}
}
