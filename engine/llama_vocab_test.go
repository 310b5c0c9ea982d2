package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/wire"
)

var vocabOnlyConfig = wire.RuntimeConfig{VocabOnly: true}

// A vocabulary-only GGUF (no tensors) loads only with vocab_only, and then
// tokenizes but refuses to run.
func TestVocabOnlyLoad(t *testing.T) {
	e := testEngine(t)
	path := testenv.Fixture(t, "vocab", "ggml-vocab-bert-bge.gguf")
	req := LoadRequest{Path: path, Digest: fileDigest(t, path), Format: "gguf", Config: embedConfig}
	if _, err := e.Load(context.Background(), req); err == nil {
		t.Fatal("Load of a vocabulary-only GGUF for embeddings: no error; want one (it has no weights)")
	}
	req.Config = vocabOnlyConfig
	info, err := e.Load(context.Background(), req)
	if err != nil {
		t.Fatalf("Load vocab_only: %v", err)
	}
	defer e.Unload(context.Background(), info.Ref)
	if info.Dims != 0 {
		t.Errorf("dims %d; want 0", info.Dims)
	}
	ids, err := e.Tokenize(context.Background(), info.Ref, "Hello world", true, false)
	if err != nil {
		t.Fatal(err)
	}
	// [CLS] hello world [SEP] in the BGE vocabulary.
	if want := []int32{101, 7592, 2088, 102}; !slices.Equal(ids, want) {
		t.Errorf("Tokenize: got %v; want %v", ids, want)
	}
	ctx := context.Background()
	_, _, errEmbed := e.Embed(ctx, info.Ref, "", true, [][]int32{{101, 102}})
	_, errRerank := e.Rerank(ctx, info.Ref, []RerankGroup{{Query: []int32{101}, Candidates: [][]int32{{102}}}})
	_, errGen := e.Generate(ctx, info.Ref, []int32{101}, GenerateOptions{MaxTokens: 1})
	for op, err := range map[string]error{"Embed": errEmbed, "Rerank": errRerank, "Generate": errGen} {
		if got := wire.CodeOf(err); got != wire.CodeUnsupported {
			t.Errorf("%s on a vocab_only model: code %q (%v); want %q", op, got, err, wire.CodeUnsupported)
		}
	}
}

// vocab_only takes no other runtime_config field.
func TestVocabOnlyConfigInvalid(t *testing.T) {
	e := testEngine(t)
	path := testenv.Fixture(t, "vocab", "ggml-vocab-bert-bge.gguf")
	for _, rc := range []wire.RuntimeConfig{
		{VocabOnly: true, Embeddings: true},
		{VocabOnly: true, ContextSize: 128},
		{VocabOnly: true, Pooling: PoolingMean},
	} {
		_, err := e.Load(context.Background(), LoadRequest{Path: path, Digest: fileDigest(t, path), Config: rc})
		if got := wire.CodeOf(err); got != wire.CodeConfigInvalid {
			t.Errorf("Load %+v: code %q (%v); want %q", rc, got, err, wire.CodeConfigInvalid)
		}
	}
}

// A full model loaded vocab_only tokenizes exactly as the same model loaded
// for embeddings, under its own ref.
func TestVocabOnlyMatchesFullModel(t *testing.T) {
	var ref embedRef
	readJSON(t, &ref, "reference", "embed.json")
	e := testEngine(t)
	full := loadFixture(t, "ref-bert-embed.gguf", embedConfig)
	vocab := loadFixture(t, "ref-bert-embed.gguf", vocabOnlyConfig)
	if full.Ref == vocab.Ref {
		t.Fatalf("vocab_only and embedding loads share ref %s; want distinct refs", full.Ref)
	}
	ctx := context.Background()
	for i, it := range ref.Items {
		for _, special := range []bool{false, true} {
			want, err := e.Tokenize(ctx, full.Ref, it.Text, special, special)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Tokenize(ctx, vocab.Ref, it.Text, special, special)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("item %d special=%t: vocab_only gives %d ids; want the full model's %d", i, special, len(got), len(want))
			}
		}
	}
}

// Invalid UTF-8 is refused before llama.cpp sees it: its WPM and BPE
// tokenizers abort the process on some invalid sequences.
func TestTokenizeRefusesInvalidUTF8(t *testing.T) {
	e := testEngine(t)
	for _, name := range []string{"ggml-vocab-bert-bge.gguf", "ggml-vocab-gpt-2.gguf"} {
		path := testenv.Fixture(t, "vocab", name)
		info, err := e.Load(context.Background(), LoadRequest{Path: path, Digest: fileDigest(t, path), Config: vocabOnlyConfig})
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{"a\xf4\x90\x80\x80b", "\xed\xa0\x80", "x\xff"} {
			_, err := e.Tokenize(context.Background(), info.Ref, text, false, false)
			if got := wire.CodeOf(err); got != wire.CodeBadRequest {
				t.Errorf("%s: Tokenize(%q): code %q (%v); want %q", name, text, got, err, wire.CodeBadRequest)
			}
		}
		if err := e.Unload(context.Background(), info.Ref); err != nil {
			t.Fatal(err)
		}
	}
}
