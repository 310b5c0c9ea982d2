package gguf

import (
	"path/filepath"
	"testing"

	"github.com/synapse-embed/synapse/internal/testenv"
)

func TestOpenFixtures(t *testing.T) {
	dir := testenv.Fixtures(t)
	f, err := Open(filepath.Join(dir, "models", "ref-bert-embed.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Architecture(); got != "bert" {
		t.Errorf("architecture = %q; want bert", got)
	}
	toks, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(toks) != 30522 {
		t.Errorf("tokens: got %d (ok=%v); want 30522", len(toks), ok)
	}
	if len(f.Tensors) == 0 {
		t.Error("no tensors")
	}
	for _, kv := range f.KV {
		t.Logf("%s %v %v", kv.Key, kv.Type, summarize(kv.Value))
	}
}

func summarize(v any) any {
	switch x := v.(type) {
	case []string:
		return len(x)
	case []float32:
		return len(x)
	case []int32:
		return len(x)
	case []uint8:
		return len(x)
	}
	return v
}
