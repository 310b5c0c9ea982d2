//go:build cgo

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine"
	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// `synapse embed -m DIR` on sentence-transformers model directories: the
// whole modules.json chain applied, max_seq_length and prompts honoured.

// graphHidden is the graph's last_hidden_state for one sequence, computed
// by ONNX Runtime in the test process (not through synapse).
func graphHidden(t *testing.T, path string, ids []int32) [][]float64 {
	t.Helper()
	if _, err := engine.OpenONNX(engine.ONNXOptions{Lib: testenv.ORTLib(t)}); err != nil {
		t.Fatal(err)
	}
	return onnxtest.LastHiddenState(t, path, ids)
}

// stModel writes a generated encoder (last_hidden_state only, 8 wide,
// 32 positions) with the sentence-transformers files st describes.
func stModel(t *testing.T, dir string, st onnxtest.ST) []onnxtest.Dense {
	t.Helper()
	enc := onnxtest.Tiny()
	enc.Pooled = false
	if _, err := onnxtest.WriteDir(dir, onnxtest.Dir{Encoder: enc}); err != nil {
		t.Fatal(err)
	}
	dense, err := onnxtest.WriteST(dir, st)
	if err != nil {
		t.Fatal(err)
	}
	return dense
}

var stTexts = []string{"Hello world", "The cell study results", "protein, gene and cells!", "a", "the gene of the protein is in the cell"}

func stDocs(t *testing.T, path string) {
	var docs []map[string]any
	for i, s := range stTexts {
		docs = append(docs, map[string]any{"id": fmt.Sprint(i), "text": s})
	}
	writeJSONL(t, path, docs)
}

// checkST compares every row of out with the independent computation over
// the graph's last_hidden_state of [CLS] prefix+text-window [SEP]; it
// returns the lowest cosine.
func checkST(t *testing.T, model, out, prefix string, modes []string, dense []onnxtest.Dense, normalize bool) float64 {
	t.Helper()
	return checkSTFrom(t, model, out, prefix, 0, modes, dense, normalize)
}

// checkSTFrom is checkST with the first from tokens of each document's
// first chunk left out of the pooling (include_prompt false).
func checkSTFrom(t *testing.T, model, out, prefix string, from int, modes []string, dense []onnxtest.Dense, normalize bool) float64 {
	t.Helper()
	tok, err := tokenize.LoadHF(filepath.Join(model, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	pre, suf := tok.Affixes()
	_, rows := readOutput(t, out)
	if len(rows) < len(stTexts) {
		t.Fatalf("%d rows for %d texts", len(rows), len(stTexts))
	}
	worst := 1.0
	for _, r := range rows {
		var i int
		fmt.Sscan(r.ID, &i)
		ids := tok.Tokenize(prefix+stTexts[i], tokenize.Options{}).IDs()
		seq := append(append(slices.Clone(pre), ids[r.TokenStart:r.TokenEnd]...), suf...)
		skip := 0
		if r.Chunk == 0 {
			skip = from
		}
		want := onnxtest.STReferenceFrom(graphHidden(t, filepath.Join(model, "model.onnx"), seq), skip, modes, dense, normalize)
		x := make([]float32, len(want))
		for d, v := range want {
			x[d] = float32(v)
		}
		if len(r.Emb) != len(x) {
			t.Fatalf("doc %s chunk %d: %d dims; want %d", r.ID, r.Chunk, len(r.Emb), len(x))
		}
		worst = min(worst, testenv.Cosine(r.Emb, x))
	}
	return worst
}

// TestEmbedONNXSentenceTransformers: Pooling + Dense + Normalize give the
// vectors the independent computation gives; without the Dense module
// they change; the metadata and the summary name the modules applied.
func TestEmbedONNXSentenceTransformers(t *testing.T) {
	work := t.TempDir()
	model := filepath.Join(work, "st")
	modes := []string{"mean"}
	dense := stModel(t, model, onnxtest.ST{Pooling: onnxtest.PoolingConfig(8, true, modes...),
		Dense: []onnxtest.Dense{{In: 8, Out: 8, Seed: 7}}, Normalize: true})
	in := filepath.Join(work, "in.jsonl")
	stDocs(t, in)
	out := filepath.Join(work, "st.arrow")
	res := runONNX(t, "embed", in, "-m", model, "-o", out, "--no-normalize")
	res.wantCode(t, exitOK)
	if c := checkST(t, model, out, "", modes, dense, true); c < 0.99999 {
		t.Errorf("Pooling + Dense + Normalize: lowest cosine %.7f to the independent computation; want ≥ 0.99999", c)
	}
	schema, rows := readOutput(t, out)
	if got, _ := schema.Metadata().GetValue("synapse.modules"); !strings.HasPrefix(got, "Pooling(mean) + Dense(8->8 tanh bias sha256:") || !strings.HasSuffix(got, " + Normalize") {
		t.Errorf("synapse.modules %q; want Pooling(mean) + Dense(8->8 tanh bias sha256:…) + Normalize", got)
	}
	if !strings.Contains(res.stdout+res.stderr, "modules        Pooling(mean) + Dense(8->8") {
		t.Errorf("summary does not name the modules:\n%s", res.stderr)
	}
	if n := norm(rows[0].Emb); n < 0.99999 || n > 1.00001 {
		t.Errorf("--no-normalize with a Normalize module: norm %v; want 1 (the module is the model's)", n)
	}

	// Without the Dense module the vectors change (same width).
	os.RemoveAll(filepath.Join(model, "2_Dense"))
	if _, err := onnxtest.WriteST(model, onnxtest.ST{Pooling: onnxtest.PoolingConfig(8, true, modes...), Normalize: true}); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(work, "nodense.arrow")
	runONNX(t, "embed", in, "-m", model, "-o", out2, "-q").wantCode(t, exitOK)
	if c := checkST(t, model, out2, "", modes, nil, true); c < 0.99999 {
		t.Errorf("Pooling + Normalize: lowest cosine %.7f; want ≥ 0.99999", c)
	}
	_, rows2 := readOutput(t, out2)
	changed := 0
	for i := range rows2 {
		if testenv.Cosine(rows[i].Emb, rows2[i].Emb) < 0.99 {
			changed++
		}
	}
	if changed == 0 {
		t.Errorf("removing the Dense module left every vector as it was")
	}
}

// TestEmbedONNXSTPoolingModes: a concatenated pooling (max + weightedmean)
// into a GELU Dense layer, end to end.
func TestEmbedONNXSTPoolingModes(t *testing.T) {
	work := t.TempDir()
	model := filepath.Join(work, "st")
	modes := []string{"max", "weightedmean"}
	dense := stModel(t, model, onnxtest.ST{Pooling: onnxtest.PoolingConfig(8, true, modes...),
		Dense: []onnxtest.Dense{{In: 16, Out: 4, Seed: 3, Activation: "torch.nn.modules.activation.GELU"}}})
	in, out := filepath.Join(work, "in.jsonl"), filepath.Join(work, "out.arrow")
	stDocs(t, in)
	runONNX(t, "embed", in, "-m", model, "-o", out, "--no-normalize", "-q").wantCode(t, exitOK)
	if c := checkST(t, model, out, "", modes, dense, false); c < 0.99999 {
		t.Errorf("max+weightedmean + Dense GELU: lowest cosine %.7f; want ≥ 0.99999", c)
	}
}

// TestEmbedONNXSTRefused: a directory naming a module synapse does not
// apply is refused before any work (exit 2, the module named, no output).
func TestEmbedONNXSTRefused(t *testing.T) {
	work := t.TempDir()
	in := filepath.Join(work, "in.jsonl")
	stDocs(t, in)
	tests := []struct {
		name string
		st   onnxtest.ST
		want string
	}{
		{"unknown module", onnxtest.ST{Pooling: onnxtest.PoolingConfig(8, true, "mean"), Extra: []string{"sentence_transformers.models.WeightedLayerPooling"}},
			"module 2 is sentence_transformers.models.WeightedLayerPooling"},
		{"unknown activation", onnxtest.ST{Pooling: onnxtest.PoolingConfig(8, true, "mean"), Dense: []onnxtest.Dense{{In: 8, Out: 4, Activation: "torch.nn.modules.activation.Hardswish"}}},
			"activation_function torch.nn.modules.activation.Hardswish"},
		{"Dense of the wrong width", onnxtest.ST{Pooling: onnxtest.PoolingConfig(8, true, "cls", "mean"), Dense: []onnxtest.Dense{{In: 8, Out: 4}}},
			"Dense in_features 8, but the module before it gives 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := filepath.Join(t.TempDir(), "st")
			stModel(t, model, tt.st)
			out := filepath.Join(work, strings.ReplaceAll(tt.name, " ", "_")+".arrow")
			res := runONNX(t, "embed", in, "-m", model, "-o", out)
			res.wantCode(t, exitUsage)
			if !strings.Contains(res.stderr, tt.want) {
				t.Errorf("stderr does not say %q:\n%s", tt.want, res.stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s written by a refused run", out)
			}
		})
	}
}

// TestEmbedONNXSTPromptsAndLength: max_seq_length is the default chunk
// size; default_prompt_name applies unless --prefix or --prompt-name is
// given; the metadata and the summary say what was in effect; --previous
// is refused under another prompt.
func TestEmbedONNXSTPromptsAndLength(t *testing.T) {
	work := t.TempDir()
	model := filepath.Join(work, "st")
	modes := []string{"cls"}
	stModel(t, model, onnxtest.ST{Pooling: onnxtest.PoolingConfig(8, true, modes...), Normalize: true, MaxSeqLength: 8,
		Prompts: map[string]string{"query": "query: ", "document": "passage: "}, DefaultPrompt: "document"})
	in := filepath.Join(work, "in.jsonl")
	stDocs(t, in)
	meta := func(out, key string) string {
		schema, _ := readOutput(t, out)
		v, _ := schema.Metadata().GetValue(key)
		return v
	}

	def := filepath.Join(work, "default.arrow")
	res := runONNX(t, "embed", in, "-m", model, "-o", def)
	res.wantCode(t, exitOK)
	for key, want := range map[string]string{"synapse.chunk_tokens": "6", "synapse.prompt_name": "document", "synapse.prefix": "passage: ", "synapse.modules": "Pooling(cls) + Normalize"} {
		if got := meta(def, key); got != want {
			t.Errorf("default run: %s %q; want %q", key, got, want)
		}
	}
	for _, want := range []string{`prompt         document "passage: " (the model's default_prompt_name)`, "chunk size     6 tokens per chunk (max_seq_length 8 less 2 special tokens)"} {
		if !strings.Contains(res.stdout+res.stderr, want) {
			t.Errorf("summary lacks %q:\n%s%s", want, res.stdout, res.stderr)
		}
	}
	if c := checkST(t, model, def, "passage: ", modes, nil, true); c < 0.99999 {
		t.Errorf("default prompt: lowest cosine %.7f; want ≥ 0.99999", c)
	}

	query := filepath.Join(work, "query.arrow")
	res = runONNX(t, "embed", in, "-m", model, "-o", query, "--prompt-name", "query", "--chunk-tokens", "20")
	res.wantCode(t, exitOK)
	if got := meta(query, "synapse.prompt_name") + "|" + meta(query, "synapse.prefix") + "|" + meta(query, "synapse.chunk_tokens"); got != "query|query: |20" {
		t.Errorf("--prompt-name query --chunk-tokens 20: prompt|prefix|chunk_tokens %q; want query|query: |20", got)
	}
	if !strings.Contains(res.stdout+res.stderr, "20 tokens per chunk (--chunk-tokens), above max_seq_length 8") {
		t.Errorf("summary does not say the chunks exceed max_seq_length:\n%s", res.stderr)
	}
	if c := checkST(t, model, query, "query: ", modes, nil, true); c < 0.99999 {
		t.Errorf("--prompt-name query: lowest cosine %.7f; want ≥ 0.99999", c)
	}

	prefixed := filepath.Join(work, "prefix.arrow")
	runONNX(t, "embed", in, "-m", model, "-o", prefixed, "--prefix", "x ", "-q").wantCode(t, exitOK)
	if got := meta(prefixed, "synapse.prompt_name") + "|" + meta(prefixed, "synapse.prefix"); got != "|x " {
		t.Errorf("--prefix: prompt|prefix %q; want |x  (no default prompt)", got)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--prompt-name", "passage"}, "--prompt-name passage: st has prompts document, query"},
		{[]string{"--prompt-name", "query", "--prefix", "q: "}, "--prompt-name query and --prefix: give one"},
		{[]string{"--prompt-name", "query", "--previous", def}, `prefix: previous "passage: ", this run "query: "`},
		{[]string{"--chunk-tokens", "31"}, "--chunk-tokens 31 does not fit the model's context of 32"},
	} {
		out := filepath.Join(work, "refused.arrow")
		res := runONNX(t, append([]string{"embed", in, "-m", model, "-o", out}, tc.args...)...)
		res.wantCode(t, exitUsage)
		if !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%v: stderr lacks %q:\n%s", tc.args, tc.want, res.stderr)
		}
	}
}

// TestEmbedONNXSTExcludePrompt: a Pooling module with include_prompt false
// leaves the prompt's tokens ([CLS] and the prompt, as sentence-transformers
// counts them) out of the pooling; without a prompt it pools every token.
func TestEmbedONNXSTExcludePrompt(t *testing.T) {
	work := t.TempDir()
	model := filepath.Join(work, "st")
	modes := []string{"mean"}
	stModel(t, model, onnxtest.ST{Pooling: onnxtest.PoolingConfig(8, false, modes...), Normalize: true,
		Prompts: map[string]string{"query": "query: "}})
	in := filepath.Join(work, "in.jsonl")
	stDocs(t, in)
	tok, err := tokenize.LoadHF(filepath.Join(model, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	from := 1 + len(tok.Tokenize("query: ", tokenize.Options{}).IDs()) // [CLS] query : ([SEP] is special: not counted)
	out := filepath.Join(work, "query.arrow")
	res := runONNX(t, "embed", in, "-m", model, "-o", out, "--prompt-name", "query")
	res.wantCode(t, exitOK)
	if c := checkSTFrom(t, model, out, "query: ", from, modes, nil, true); c < 0.99999 {
		t.Errorf("include_prompt false, prompt of %d tokens: lowest cosine %.7f; want ≥ 0.99999", from, c)
	}
	if c := checkST(t, model, out, "query: ", modes, nil, true); c > 0.9999 {
		t.Errorf("the prompt's tokens were pooled (cosine %.7f to pooling every token)", c)
	}
	schema, _ := readOutput(t, out)
	if got, _ := schema.Metadata().GetValue("synapse.modules"); got != "Pooling(mean exclude_prompt) + Normalize" {
		t.Errorf("synapse.modules %q; want Pooling(mean exclude_prompt) + Normalize", got)
	}
	plain := filepath.Join(work, "plain.arrow")
	runONNX(t, "embed", in, "-m", model, "-o", plain, "-q").wantCode(t, exitOK)
	if c := checkST(t, model, plain, "", modes, nil, true); c < 0.99999 {
		t.Errorf("include_prompt false without a prompt: lowest cosine %.7f to pooling every token", c)
	}
}
