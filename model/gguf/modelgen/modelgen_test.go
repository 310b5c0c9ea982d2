package modelgen

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/gguf"
)

// bgeVocab is the bert-bge vocabulary of the shared fixtures.
func bgeVocab(t testing.TB) Vocab {
	t.Helper()
	v, err := VocabFromGGUF(testenv.Fixture(t, "vocab", "ggml-vocab-bert-bge.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func spmVocab(t testing.TB) Vocab {
	t.Helper()
	v, err := VocabFromGGUF(testenv.Fixture(t, "vocab", "ggml-vocab-llama-spm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// write writes a model made by w into dir and opens it.
func write(t testing.TB, path string, write func(string) error) *gguf.File {
	t.Helper()
	if err := write(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestMirrorsReference generates models of the reference models' shapes and
// compares metadata keys and types and the tensor directory with them.
func TestMirrorsReference(t *testing.T) {
	tiny := TinyLlama(spmVocab(t))
	tiny.Layers, tiny.Width, tiny.Heads, tiny.HeadsKV, tiny.FFN, tiny.Context = 1, 8, 2, 2, 32, 4096
	tests := []struct {
		ref   string
		write func(string) error
		// extraKeys may be in the generated model only: the llama-spm vocabulary
		// carries keys the older reference model lacks.
		extraKeys []string
	}{
		{"ref-bert-embed.gguf", TinyEmbedder(bgeVocab(t)).Write, nil},
		{"ref-bert-rerank.gguf", TinyReranker(bgeVocab(t)).Write, nil},
		{"llama-2-tiny-random.gguf", tiny.Write,
			[]string{"tokenizer.ggml.pre", "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"}},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			ref, err := gguf.Open(testenv.Fixture(t, "models", tt.ref))
			if err != nil {
				t.Fatal(err)
			}
			got := write(t, filepath.Join(t.TempDir(), "m.gguf"), tt.write)
			var refKeys, gotKeys []string
			for _, kv := range ref.KV {
				refKeys = append(refKeys, kv.Key+":"+kv.Type.String()+"/"+elem(kv))
			}
			for _, kv := range got.KV {
				if !slices.Contains(tt.extraKeys, kv.Key) {
					gotKeys = append(gotKeys, kv.Key+":"+kv.Type.String()+"/"+elem(kv))
				}
			}
			if !reflect.DeepEqual(gotKeys, refKeys) {
				t.Errorf("metadata keys:\n got %v\nwant %v", gotKeys, refKeys)
			}
			for _, k := range []string{"bert.pooling_type", "tokenizer.ggml.token_type_count", "general.file_type"} {
				r, _ := ref.Uint(k)
				if g, _ := got.Uint(k); g != r {
					t.Errorf("%s = %d; want %d", k, g, r)
				}
			}
			if len(got.Tensors) != len(ref.Tensors) {
				t.Fatalf("got %d tensors; want %d", len(got.Tensors), len(ref.Tensors))
			}
			for i, rt := range ref.Tensors {
				gt := got.Tensors[i]
				if gt.Name != rt.Name || gt.Type != rt.Type || !reflect.DeepEqual(gt.Dims, rt.Dims) {
					t.Errorf("tensor %d: got %s %v %v; want %s %v %v", i, gt.Name, gt.Type, gt.Dims, rt.Name, rt.Type, rt.Dims)
				}
			}
		})
	}
}

func elem(kv gguf.KV) string {
	if kv.Type == gguf.TypeArray {
		return kv.Elem.String()
	}
	return ""
}

func TestDeterministic(t *testing.T) {
	v := WordPieceVocab([]string{"alpha", "beta"})
	c := TinyEmbedder(v)
	c.Layers, c.Width, c.FFN, c.Context = 1, 32, 64, 16
	sum := func(c BERT) [32]byte {
		var b bytes.Buffer
		if _, err := c.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b.Bytes())
	}
	a, b := sum(c), sum(c)
	if a != b {
		t.Errorf("same configuration, different bytes: %x, %x", a, b)
	}
	c.Seed++
	if sum(c) == a {
		t.Errorf("different seeds, same bytes")
	}
}

// TestWeights checks the generated values: scale, norms and biases.
func TestWeights(t *testing.T) {
	c := TinyReranker(WordPieceVocab(DemoWords))
	c.WeightType = gguf.GGMLTypeF32
	path := filepath.Join(t.TempDir(), "m.gguf")
	f := write(t, path, c.Write)
	read := func(name string) []float32 {
		v, err := gguf.ReadTensor(path, f, name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	emb := read("token_embd.weight")
	var sum, sq float64
	for _, x := range emb {
		sum += float64(x)
		sq += float64(x) * float64(x)
		if math.Abs(float64(x)) > 3.5*WeightScale {
			t.Fatalf("weight %v beyond 3.5 sd", x)
		}
	}
	n := float64(len(emb))
	mean, sd := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
	if math.Abs(mean) > 0.001 || math.Abs(sd-WeightScale) > 0.001 {
		t.Errorf("token_embd: mean %.5f sd %.5f; want 0 and %v", mean, sd, WeightScale)
	}
	for name, want := range map[string]float32{"blk.1.layer_output_norm.weight": 1, "blk.0.attn_q.bias": 0, "cls.output.bias": 0} {
		for _, x := range read(name) {
			if x != want {
				t.Fatalf("%s holds %v; want all %v", name, x, want)
			}
		}
	}
	if a, b := read("blk.0.attn_q.weight"), read("blk.0.attn_k.weight"); reflect.DeepEqual(a, b) {
		t.Errorf("attn_q and attn_k hold the same values")
	}
}

func TestConfigErrors(t *testing.T) {
	bert := TinyEmbedder(WordPieceVocab(nil))
	llama := TinyLlama(SPMVocab(nil))
	tests := []struct {
		name string
		err  error
	}{
		{"bert heads", func() error { c := bert; c.Heads = 5; return c.Write(t.TempDir() + "/m") }()},
		{"bert zero layers", func() error { c := bert; c.Layers = 0; return c.Write(t.TempDir() + "/m") }()},
		{"bert vocab kind", func() error { c := bert; c.Vocab = SPMVocab(nil); return c.Write(t.TempDir() + "/m") }()},
		{"bert empty vocab", func() error { c := bert; c.Vocab = Vocab{}; return c.Write(t.TempDir() + "/m") }()},
		{"bert weight type", func() error { c := bert; c.WeightType = 2; return c.Write(t.TempDir() + "/m") }()},
		{"bert pooling", func() error { c := bert; c.Pooling = 9; return c.Write(t.TempDir() + "/m") }()},
		{"llama kv heads", func() error { c := llama; c.HeadsKV = 3; return c.Write(t.TempDir() + "/m") }()},
		{"llama odd head size", func() error { c := llama; c.Width, c.Heads, c.HeadsKV = 12, 4, 4; return c.Write(t.TempDir() + "/m") }()},
		{"gemma kv heads", func() error { c := tinyGemma(SPMVocab(nil)); c.HeadsKV = 3; return c.Write(t.TempDir() + "/m") }()},
		{"gemma no window", func() error { c := tinyGemma(SPMVocab(nil)); c.Window = 0; return c.Write(t.TempDir() + "/m") }()},
		{"gemma no pooling", func() error {
			c := tinyGemma(SPMVocab(nil))
			c.Pooling = PoolingNone
			return c.Write(t.TempDir() + "/m")
		}()},
		{"gemma fill", func() error {
			c := tinyGemma(SPMVocab(nil))
			c.DenseWidth, c.Fill = 0, map[string]func(int, []float32){"dense_2.weight": nil}
			return c.Write(t.TempDir() + "/m")
		}()},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, ErrConfig) {
			t.Errorf("%s: got %v; want ErrConfig", tt.name, tt.err)
		}
	}
	c := bert
	c.WeightType, c.Width, c.Heads = gguf.GGMLTypeQ8_0, 48, 4
	if err := c.Write(t.TempDir() + "/m"); !errors.Is(err, gguf.ErrInvalidModel) {
		t.Errorf("Q8_0 with width 48: got %v; want gguf.ErrInvalidModel", err)
	}
}

func TestWordPieceVocab(t *testing.T) {
	v := WordPieceVocab([]string{"Hello", "world", "hello", "two words", "", "naïve"})
	f := write(t, filepath.Join(t.TempDir(), "m.gguf"), func(p string) error {
		c := TinyEmbedder(v)
		c.Layers, c.Width, c.FFN, c.Context = 1, 32, 32, 8
		return c.Write(p)
	})
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	for id, want := range map[int]string{0: "[PAD]", 1: "[unused0]", 99: "[unused98]", 100: "[UNK]", 101: "[CLS]", 102: "[SEP]", 103: "[MASK]"} {
		if toks[id] != want {
			t.Errorf("token %d = %q; want %q", id, toks[id], want)
		}
	}
	for _, id := range []int{0, 100, 101, 102, 103} {
		if types[id] != tokControl {
			t.Errorf("token %d type %d; want control (3)", id, types[id])
		}
	}
	for key, want := range map[string]uint64{"unknown_token_id": 100, "seperator_token_id": 102, "padding_token_id": 0, "cls_token_id": 101, "mask_token_id": 103} {
		if got, ok := f.Uint("tokenizer.ggml." + key); !ok || got != want {
			t.Errorf("%s = %d (present %v); want %d", key, got, ok, want)
		}
	}
	seen := map[string]bool{}
	for _, tok := range toks {
		if seen[tok] {
			t.Errorf("duplicate token %q", tok)
		}
		seen[tok] = true
	}
	for _, want := range []string{"▁hello", "▁world", "▁naïve", "▁ï", "ï", "▁a", "z", "▁!", "~"} {
		if !seen[want] {
			t.Errorf("token %q missing", want)
		}
	}
	for _, absent := range []string{"hello", "▁Hello", "▁two words", "▁two", "▁A", "##a"} {
		if seen[absent] {
			t.Errorf("token %q present; want absent", absent)
		}
	}
}

func TestSPMVocab(t *testing.T) {
	v := SPMVocab([]string{"cat", "Catalog"})
	kv, _ := v.get("tokens")
	toks := kv.Value.([]string)
	if toks[0] != "<unk>" || toks[1] != "<s>" || toks[2] != "</s>" || toks[3] != "<0x00>" || toks[258] != "<0xFF>" {
		t.Errorf("special and byte tokens: got %q … %q", toks[:4], toks[258])
	}
	for _, want := range []string{"▁", "▁c", "▁ca", "▁cat", "▁cata", "▁catalog", "c", "g"} {
		if !slices.Contains(toks, want) {
			t.Errorf("piece %q missing", want)
		}
	}
	if slices.ContainsFunc(toks, func(s string) bool { return strings.Contains(s, "C") && !strings.HasPrefix(s, "<") && s != "C" }) {
		t.Errorf("upper-case word pieces present")
	}
	if v.Size() != len(toks) || v.Model() != "llama" {
		t.Errorf("Size, Model = %d, %q; want %d, llama", v.Size(), v.Model(), len(toks))
	}
}

func TestVocabFromGGUFErrors(t *testing.T) {
	if _, err := VocabFromGGUF(filepath.Join(t.TempDir(), "missing.gguf")); err == nil {
		t.Error("missing file: got nil error")
	}
	// A GGUF file without a vocabulary.
	path := filepath.Join(t.TempDir(), "novocab.gguf")
	w := gguf.NewWriter()
	if err := w.Set("general.architecture", "bert"); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := VocabFromGGUF(path); !errors.Is(err, ErrConfig) {
		t.Errorf("no tokens: got %v; want ErrConfig", err)
	}
}

func TestWriteDemoEmbedder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.gguf")
	f := write(t, path, func(p string) error { return WriteDemoEmbedder(p, nil) })
	if got, _ := f.Uint("bert.pooling_type"); got != uint64(PoolingMean) {
		t.Errorf("pooling = %d; want mean (1)", got)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	if !slices.Contains(toks, "▁embedding") {
		t.Errorf("demo vocabulary lacks the demo words")
	}
}

// BenchmarkMiniLM measures generating the MiniLM-shaped model (about 45 MB).
func BenchmarkMiniLM(b *testing.B) {
	c := MiniLM(bgeVocab(b))
	path := filepath.Join(b.TempDir(), "minilm.gguf")
	for b.Loop() {
		if err := c.Write(path); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEmbeddingGemma300MShape: the benchmark preset is a valid model of
// embeddinggemma-300m's shape (about 300M parameters with Gemma's 262,144
// tokens: 102M in the layers, 4.7M in the Dense projections).
func TestEmbeddingGemma300MShape(t *testing.T) {
	c := EmbeddingGemma300M(SPMVocab(nil))
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, s := range c.tensors() {
		if s.name == "token_embd.weight" {
			continue
		}
		k := uint64(1)
		for _, d := range s.dims {
			k *= d
		}
		n += k
	}
	if n < 100e6 || n > 110e6 {
		t.Errorf("%d parameters outside the embeddings; embeddinggemma-300m has about 107M", n)
	}
}
