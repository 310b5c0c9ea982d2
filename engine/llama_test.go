package engine

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/testmodels"
	gotok "github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/wire"
)

var (
	testEngOnce sync.Once
	testEng     *Llama
	testEngErr  error
	testLoaded  sync.Map // name+config → ModelInfo, so each model loads once per test process
)

// testEngine returns the process's llama.cpp engine, or skips.
func testEngine(t testing.TB) *Llama {
	t.Helper()
	lib := testenv.LlamaLib(t)
	testEngOnce.Do(func() {
		testEng, testEngErr = OpenLlama(LlamaOptions{LibDir: lib, Log: os.Stderr, LogLevel: "error"})
	})
	if testEngErr != nil {
		t.Fatalf("OpenLlama: %v", testEngErr)
	}
	return testEng
}

// fileDigest is the file's artifact digest, "sha256:<hex>" (gguf.Digest).
func fileDigest(t testing.TB, path string) string {
	t.Helper()
	_, d, err := gguf.Digest(path)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Generated models (testmodels), for tests that need a model but not a
// reference one: they run without the fixtures.
const (
	genEmbed  = "tiny-embed"  // 2-layer 128-wide BERT, mean pooling, like ref-bert-embed.gguf
	genRerank = "tiny-rerank" // the same with rank pooling, like ref-bert-rerank.gguf
	genLlama  = "tiny-llama"  // 2-layer 64-wide llama with a SentencePiece vocabulary
)

// modelPath is the path of a generated model (genEmbed, genRerank,
// genLlama) or of a fixture model (a .gguf name, which needs the fixtures).
func modelPath(t testing.TB, name string) string {
	t.Helper()
	switch name {
	case genEmbed:
		return testmodels.Embedder(t)
	case genRerank:
		return testmodels.Reranker(t)
	case genLlama:
		return testmodels.Llama(t)
	}
	return testenv.Fixture(t, "models", name)
}

// loadFixture loads a model (modelPath) once per process and config.
func loadFixture(t testing.TB, name string, rc wire.RuntimeConfig) ModelInfo {
	t.Helper()
	e := testEngine(t)
	path := modelPath(t, name)
	key, _ := json.Marshal(struct {
		N string
		C wire.RuntimeConfig
	}{name, rc})
	if v, ok := testLoaded.Load(string(key)); ok {
		return v.(ModelInfo)
	}
	info, err := e.Load(context.Background(), LoadRequest{Path: path, Digest: fileDigest(t, path), Format: "gguf", Config: rc})
	if err != nil {
		t.Fatalf("Load %s: %v", name, err)
	}
	testLoaded.Store(string(key), info)
	return info
}

// Tests use one thread: llama.cpp's spinning thread pool collapses when the
// test processes of other packages share the two cores.
var embedConfig = wire.RuntimeConfig{Embeddings: true, Threads: 1}

type embedRef struct {
	Pooling   string `json:"pooling"`
	Normalize bool   `json:"normalize"`
	Items     []struct {
		Text      string    `json:"text"`
		IDs       []int32   `json:"ids"`
		IDsPlain  []int32   `json:"ids_plain"`
		Embedding []float32 `json:"embedding"`
	} `json:"items"`
}

type rerankRef struct {
	Items []struct {
		IDs   []int32 `json:"ids"`
		Score float32 `json:"score"`
	} `json:"items"`
}

func readJSON(t testing.TB, v any, rel ...string) {
	t.Helper()
	b, err := os.ReadFile(testenv.Fixture(t, rel...))
	if err != nil {
		testenv.MissingFixture(t, "reference: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// splitPair splits reference ids [CLS] q [SEP] d [SEP] into q and d.
func splitPair(t testing.TB, ids []int32) (q, d []int32) {
	t.Helper()
	const cls, sep = 101, 102
	i := -1
	for k, id := range ids {
		if id == sep {
			i = k
			break
		}
	}
	if ids[0] != cls || i < 0 || ids[len(ids)-1] != sep {
		t.Fatalf("reference pair ids not [CLS] q [SEP] d [SEP]: %v…", ids[:min(8, len(ids))])
	}
	return ids[1:i], ids[i+1 : len(ids)-1]
}

func TestEmbedReferenceParity(t *testing.T) {
	var ref embedRef
	readJSON(t, &ref, "reference", "embed.json")
	info := loadFixture(t, "ref-bert-embed.gguf", embedConfig)
	seqs := make([][]int32, len(ref.Items))
	for i, it := range ref.Items {
		seqs[i] = it.IDs
	}
	vecs, dims, err := testEngine(t).Embed(context.Background(), info.Ref, ref.Pooling, ref.Normalize, seqs)
	if err != nil {
		t.Fatal(err)
	}
	if dims != info.Dims || dims != len(ref.Items[0].Embedding) {
		t.Fatalf("dims %d (LOADED %d); want %d", dims, info.Dims, len(ref.Items[0].Embedding))
	}
	for i, it := range ref.Items {
		if c := testenv.Cosine(vecs[i*dims:(i+1)*dims], it.Embedding); c < 0.9999 {
			t.Errorf("item %d (%d ids): cosine %.6f; want ≥ 0.9999", i, len(it.IDs), c)
		}
	}
}

// Vectors must not depend on what else shares the batch: every item alone
// and all items together agree.
func TestEmbedBatchedMatchesAlone(t *testing.T) {
	e := testEngine(t)
	info := loadFixture(t, genEmbed, embedConfig)
	var seqs [][]int32
	for _, ids := range corpusIDs(t, 12) {
		seqs = append(seqs, ids[:min(len(ids), 100)])
	}
	all, dims, err := e.Embed(context.Background(), info.Ref, "", true, seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		one, _, err := e.Embed(context.Background(), info.Ref, "", true, [][]int32{s})
		if err != nil {
			t.Fatal(err)
		}
		if c := testenv.Cosine(one, all[i*dims:(i+1)*dims]); c < 0.99999 {
			t.Errorf("item %d: cosine batched vs alone %.7f; want ≥ 0.99999", i, c)
		}
	}
}

// A batch larger than n_ubatch and n_seq_max is split across calls, never
// truncated, and gives the same vectors as each sequence alone under the
// default config.
func TestEmbedSplitsLargeBatches(t *testing.T) {
	e := testEngine(t)
	small := loadFixture(t, genEmbed, wire.RuntimeConfig{Embeddings: true, ContextSize: 512, BatchSize: 512, UBatchSize: 512, SeqMax: 4, Threads: 1, Pooling: "mean"})
	def := loadFixture(t, genEmbed, embedConfig)
	seqs := corpusIDs(t, 10)
	total := 0
	for _, s := range seqs {
		total += len(s)
	}
	if total <= 512 || len(seqs) <= 4 {
		t.Fatalf("corpus too small to force a split: %d tokens, %d items", total, len(seqs))
	}
	got, dims, err := e.Embed(context.Background(), small.Ref, "", true, seqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(seqs)*dims {
		t.Fatalf("got %d floats; want %d", len(got), len(seqs)*dims)
	}
	for i, s := range seqs {
		want, _, err := e.Embed(context.Background(), def.Ref, "", true, [][]int32{s})
		if err != nil {
			t.Fatal(err)
		}
		if c := testenv.Cosine(got[i*dims:(i+1)*dims], want); c < 0.9999 {
			t.Errorf("item %d (%d ids): cosine %.6f to the default config's vector; want ≥ 0.9999", i, len(s), c)
		}
	}
}

// corpusIDs tokenizes the first n documents of the generated corpus (title
// and text) with the generated embedder's vocabulary, [CLS] … [SEP], cut
// at 512 ids.
func corpusIDs(t testing.TB, n int) [][]int32 {
	t.Helper()
	tok, err := gotok.Load(modelPath(t, genEmbed))
	if err != nil {
		t.Fatal(err)
	}
	var seqs [][]int32
	for _, d := range testmodels.Corpus(n) {
		var ids []int32
		for _, tk := range tok.Tokenize(d.Title+"\n"+d.Text, gotok.Options{AddSpecial: true}).Tokens {
			ids = append(ids, tk.ID)
		}
		if len(ids) > 512 {
			ids = append(ids[:511], modelgen.BertSEP)
		}
		seqs = append(seqs, ids)
	}
	return seqs
}

func TestEmbedPoolings(t *testing.T) {
	e := testEngine(t)
	info := loadFixture(t, genEmbed, embedConfig)
	seqs := [][]int32{{101, 1592, 1088, 102}, {101, 1054, 1003, 1037, 1231, 102}}
	vec := map[string][]float32{}
	for _, p := range []string{"", "mean", "cls", "last"} {
		v, dims, err := e.Embed(context.Background(), info.Ref, p, false, seqs)
		if err != nil {
			t.Fatalf("pooling %q: %v", p, err)
		}
		if dims != 128 {
			t.Fatalf("pooling %q: dims %d; want 128", p, dims)
		}
		vec[p] = v
	}
	if c := testenv.Cosine(vec[""][:128], vec["mean"][:128]); c < 0.999999 {
		t.Errorf("default vs mean: cosine %.7f; want 1 (the model's pooling is mean)", c)
	}
	if c := testenv.Cosine(vec["cls"][:128], vec["mean"][:128]); c > 0.9999 {
		t.Errorf("cls vs mean: cosine %.7f; want them to differ", c)
	}
}

func TestEmbedErrors(t *testing.T) {
	e := testEngine(t)
	info := loadFixture(t, genEmbed, embedConfig)
	long := make([]int32, 513)
	for i := range long {
		long[i] = 1000
	}
	tests := []struct {
		name, ref, pooling string
		seqs               [][]int32
		want               wire.Code
	}{
		{"unknown model", "nope", "", [][]int32{{101}}, wire.CodeModelNotLoaded},
		{"longer than n_ubatch", info.Ref, "", [][]int32{long}, wire.CodeBadRequest},
		{"empty sequence", info.Ref, "", [][]int32{{101}, {}}, wire.CodeBadRequest},
		{"token out of vocabulary", info.Ref, "", [][]int32{{101, int32(testmodels.Vocab().Size())}}, wire.CodeBadRequest},
		{"negative token", info.Ref, "", [][]int32{{-1}}, wire.CodeBadRequest},
		{"pooling none", info.Ref, "none", [][]int32{{101}}, wire.CodeBadRequest},
		{"unknown pooling", info.Ref, "max", [][]int32{{101}}, wire.CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := e.Embed(context.Background(), tt.ref, tt.pooling, true, tt.seqs)
			if got := wire.CodeOf(err); got != tt.want {
				t.Errorf("got %v (%q); want code %q", err, got, tt.want)
			}
		})
	}
}

func TestRerankReference(t *testing.T) {
	var ref rerankRef
	readJSON(t, &ref, "reference", "rerank.json")
	info := loadFixture(t, "ref-bert-rerank.gguf", embedConfig)
	if info.Dims != 1 {
		t.Errorf("reranker dims %d; want 1 classifier output", info.Dims)
	}
	// Group consecutive items by query, as the module would send them.
	for start := 0; start < len(ref.Items); {
		q, _ := splitPair(t, ref.Items[start].IDs)
		var cands [][]int32
		end := start
		for ; end < len(ref.Items); end++ {
			q2, d := splitPair(t, ref.Items[end].IDs)
			if !slices.Equal(q, q2) {
				break
			}
			cands = append(cands, d)
		}
		scores, err := testEngine(t).Rerank(context.Background(), info.Ref, []RerankGroup{{Query: q, Candidates: cands}})
		if err != nil {
			t.Fatal(err)
		}
		for k, s := range scores {
			if want := ref.Items[start+k].Score; math.Abs(float64(s-want)) > 0.02 {
				t.Errorf("item %d: score %.4f; want %.4f ± 0.02", start+k, s, want)
			}
		}
		start = end
	}
}

var genConfig = wire.RuntimeConfig{ContextSize: 256, Threads: 1}

// TestGenerateSampling: sampling at a temperature gives the same text for
// the same seed, another for another seed, and stays within a grammar.
func TestGenerateSampling(t *testing.T) {
	e := testEngine(t)
	info := loadFixture(t, genLlama, genConfig)
	prompt, err := e.Tokenize(context.Background(), info.Ref, "Once upon a time", true, false)
	if err != nil {
		t.Fatal(err)
	}
	gen := func(seed uint32, grammar string) string {
		g, err := e.Generate(context.Background(), info.Ref, prompt, GenerateOptions{MaxTokens: 12, Grammar: grammar, Temperature: 1.5, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return g.Text
	}
	a, b := gen(1, ""), gen(1, "")
	if a != b {
		t.Errorf("seed 1 twice: %q then %q; want the same text", a, b)
	}
	differs := false
	for seed := uint32(2); seed < 6 && !differs; seed++ {
		differs = gen(seed, "") != a
	}
	if !differs {
		t.Errorf("seeds 2-5 all gave %q: the seed is not used", a)
	}
	for seed := uint32(1); seed < 6; seed++ {
		if s := gen(seed, `root ::= ("yes" | "no")`); s != "yes" && s != "no" {
			t.Errorf("seed %d: %q breaks the grammar", seed, s)
		}
	}
	if _, err := e.Generate(context.Background(), info.Ref, prompt, GenerateOptions{MaxTokens: 2, Temperature: -1}); wire.CodeOf(err) != wire.CodeBadRequest {
		t.Errorf("temperature -1: %v; want bad_request", err)
	}
}

func TestGenerate(t *testing.T) {
	e := testEngine(t)
	info := loadFixture(t, genLlama, genConfig)
	prompt, err := e.Tokenize(context.Background(), info.Ref, "Is the sky blue? Answer:", true, false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, grammar string
		max           int
		accept        func(string) bool
		finish        string
	}{
		// A random model does not prefer the end itself: the grammar ends it.
		{"yes or no", `root ::= ("yes" | "no")`, 16, func(s string) bool { return s == "yes" || s == "no" }, FinishGrammar},
		{"digits", `root ::= [0-9] [0-9] [0-9]`, 16, func(s string) bool { return len(s) == 3 && strings.Trim(s, "0123456789") == "" }, FinishGrammar},
		{"no grammar, length", "", 5, func(string) bool { return true }, FinishLength},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := e.Generate(context.Background(), info.Ref, prompt, GenerateOptions{MaxTokens: tt.max, Grammar: tt.grammar})
			if err != nil {
				t.Fatal(err)
			}
			if !tt.accept(g.Text) {
				t.Errorf("text %q not accepted by grammar %q", g.Text, tt.grammar)
			}
			if g.FinishReason != tt.finish || g.NPrompt != len(prompt) {
				t.Errorf("finish %q, n_prompt %d; want %q, %d", g.FinishReason, g.NPrompt, tt.finish, len(prompt))
			}
			if tt.finish == FinishLength && g.NGen != tt.max {
				t.Errorf("n_gen %d; want %d", g.NGen, tt.max)
			}
			again, err := e.Generate(context.Background(), info.Ref, prompt, GenerateOptions{MaxTokens: tt.max, Grammar: tt.grammar})
			if err != nil || again != g {
				t.Errorf("second run %+v, %v; want %+v (greedy is deterministic)", again, err, g)
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	e := testEngine(t)
	gen := loadFixture(t, genLlama, genConfig)
	emb := loadFixture(t, genEmbed, embedConfig)
	tests := []struct {
		name, ref, grammar string
		prompt             []int32
		want               wire.Code
	}{
		{"invalid grammar", gen.Ref, `root ::= ("yes" |`, []int32{1, 100}, wire.CodeConfigInvalid},
		{"undefined rule", gen.Ref, `root ::= other`, []int32{1, 100}, wire.CodeConfigInvalid},
		{"empty prompt", gen.Ref, "", nil, wire.CodeBadRequest},
		{"embedding model", emb.Ref, "", []int32{101}, wire.CodeBadRequest},
		{"unknown model", "nope", "", []int32{1}, wire.CodeModelNotLoaded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Generate(context.Background(), tt.ref, tt.prompt, GenerateOptions{MaxTokens: 4, Grammar: tt.grammar})
			if got := wire.CodeOf(err); got != tt.want {
				t.Errorf("got %v (%q); want code %q", err, got, tt.want)
			}
		})
	}
}

// llama.cpp's WordPiece tokenizer with specials reproduces the reference ids
// for texts short enough not to be truncated.
func TestTokenizeMatchesReference(t *testing.T) {
	var ref embedRef
	readJSON(t, &ref, "reference", "embed.json")
	e := testEngine(t)
	info := loadFixture(t, "ref-bert-embed.gguf", embedConfig)
	checked := 0
	for i, it := range ref.Items {
		if len(it.IDs) >= 512 {
			continue
		}
		got, err := e.Tokenize(context.Background(), info.Ref, it.Text, true, false)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		if !slices.Equal(got, it.IDs) {
			t.Errorf("item %d: %d ids; want the reference's %d", i, len(got), len(it.IDs))
		}
	}
	if checked == 0 {
		t.Fatal("no reference item short enough")
	}
}

func TestLoadErrors(t *testing.T) {
	e := testEngine(t)
	model := modelPath(t, genEmbed)
	digest := fileDigest(t, model)
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "not.gguf")
	os.WriteFile(notGGUF, []byte("this is not a model"), 0o644)
	qwen := filepath.Join(dir, "qwen3-reranker.gguf")
	w := gguf.NewWriter()
	w.Set("general.architecture", "qwen3")
	w.Set("qwen3.pooling_type", uint32(4))
	if err := w.WriteFile(qwen); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, digest string
		rc                 wire.RuntimeConfig
		want               wire.Code
	}{
		{"digest mismatch", model, "sha256:" + strings.Repeat("0", 64), embedConfig, wire.CodeArtifactInvalid},
		{"malformed digest", model, "md5:abc", embedConfig, wire.CodeArtifactInvalid},
		{"missing file", filepath.Join(dir, "absent.gguf"), digest, embedConfig, wire.CodeArtifactInvalid},
		{"not gguf", notGGUF, fileDigest(t, notGGUF), embedConfig, wire.CodeArtifactInvalid},
		{"qwen3 reranker", qwen, fileDigest(t, qwen), embedConfig, wire.CodeUnsupported},
		{"ubatch over batch", model, digest, wire.RuntimeConfig{Embeddings: true, BatchSize: 128, UBatchSize: 256}, wire.CodeConfigInvalid},
		{"batch over context", model, digest, wire.RuntimeConfig{Embeddings: true, ContextSize: 256, BatchSize: 512}, wire.CodeConfigInvalid},
		{"context over training", model, digest, wire.RuntimeConfig{Embeddings: true, ContextSize: 4096}, wire.CodeConfigInvalid},
		{"negative threads", model, digest, wire.RuntimeConfig{Embeddings: true, Threads: -1}, wire.CodeConfigInvalid},
		{"n_seq_max not dividing n_ubatch", model, digest, wire.RuntimeConfig{Embeddings: true, UBatchSize: 512, SeqMax: 3}, wire.CodeConfigInvalid},
		{"too many sequences", model, digest, wire.RuntimeConfig{Embeddings: true, SeqMax: 100000}, wire.CodeConfigInvalid},
		{"unknown pooling", model, digest, wire.RuntimeConfig{Embeddings: true, Pooling: "max"}, wire.CodeConfigInvalid},
		{"pooling without embeddings", model, digest, wire.RuntimeConfig{Pooling: "mean"}, wire.CodeConfigInvalid},
		{"rank without classifier", model, digest, wire.RuntimeConfig{Embeddings: true, Pooling: "rank"}, wire.CodeConfigInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Load(context.Background(), LoadRequest{Path: tt.path, Digest: tt.digest, Format: "gguf", Config: tt.rc})
			if got := wire.CodeOf(err); got != tt.want {
				t.Errorf("got %v (%q); want code %q", err, got, tt.want)
			}
			var we *wire.Error
			if err != nil && !errors.As(err, &we) {
				t.Errorf("error %T is not a *wire.Error", err)
			}
		})
	}
}

func TestLoadIsIdempotentAndUnload(t *testing.T) {
	e := testEngine(t)
	path := modelPath(t, genEmbed)
	req := LoadRequest{Path: path, Digest: fileDigest(t, path), Config: wire.RuntimeConfig{Embeddings: true, SeqMax: 2, Threads: 1}}
	a, err := e.Load(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Load(context.Background(), req)
	if err != nil || b.Ref != a.Ref {
		t.Fatalf("second load: %+v, %v; want ref %s", b, err, a.Ref)
	}
	if !contains(e.Stats().ModelsLoaded, a.Ref) {
		t.Errorf("Stats().ModelsLoaded %v; want it to hold %s", e.Stats().ModelsLoaded, a.Ref)
	}
	if err := e.Unload(context.Background(), a.Ref); err != nil {
		t.Fatal(err)
	}
	if contains(e.Stats().ModelsLoaded, a.Ref) {
		t.Errorf("after unload: ModelsLoaded %v still holds %s", e.Stats().ModelsLoaded, a.Ref)
	}
	if err := e.Unload(context.Background(), a.Ref); wire.CodeOf(err) != wire.CodeModelNotLoaded {
		t.Errorf("second unload: %v; want model_not_loaded", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A decoder embeds through llama_decode with the KV memory cleared between
// calls; sequences sharing a call must not see each other.
func TestEmbedCausalModel(t *testing.T) {
	e := testEngine(t)
	info := loadFixture(t, genLlama, wire.RuntimeConfig{Embeddings: true, ContextSize: 128, Pooling: "last", SeqMax: 4, Threads: 1})
	seqs := [][]int32{{1, 450, 996, 1354}, {1, 724, 338, 263, 1243, 973}, {1, 1043}, {1, 450, 996, 1354, 701, 916}, {1, 869}}
	all, dims, err := e.Embed(context.Background(), info.Ref, "", false, seqs)
	if err != nil {
		t.Fatal(err)
	}
	if dims != 64 {
		t.Fatalf("dims %d; want 64", dims)
	}
	for i, s := range seqs {
		one, _, err := e.Embed(context.Background(), info.Ref, "", false, [][]int32{s})
		if err != nil {
			t.Fatal(err)
		}
		if c := testenv.Cosine(one, all[i*dims:(i+1)*dims]); c < 0.99999 {
			t.Errorf("sequence %d: cosine batched vs alone %.7f; want ≥ 0.99999", i, c)
		}
	}
	if _, _, err := e.Embed(context.Background(), info.Ref, "", false, [][]int32{make([]int32, 129)}); wire.CodeOf(err) != wire.CodeBadRequest {
		t.Errorf("sequence longer than n_ctx: %v; want bad_request", err)
	}
}
