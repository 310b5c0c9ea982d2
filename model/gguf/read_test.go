package gguf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
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

func TestDigest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.gguf")
	if err := os.WriteFile(path, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, d, err := Digest(path)
	// sha256("abc"), FIPS 180-2 appendix B.1.
	want := "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if err != nil || n != 3 || d != want {
		t.Errorf("Digest = %d, %q, %v; want 3, %q", n, d, err, want)
	}
	if _, _, err := Digest(filepath.Join(t.TempDir(), "missing.gguf")); err == nil {
		t.Error("Digest of a missing file: got no error")
	}
}
