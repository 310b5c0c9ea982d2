package modelgen

import (
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hybridgroup/yzma/pkg/llama"
	"github.com/synapse-embed/synapse/engine/testenv"
)

// llama.cpp is loaded once per test process: yzma binds its functions into
// package-level variables, so every llama.cpp test lives in this binary.
var (
	llamaOnce sync.Once
	llamaErr  error
)

func loadLlama(t *testing.T) {
	t.Helper()
	dir := testenv.LlamaLib(t)
	llamaOnce.Do(func() {
		if llamaErr = llama.Load(dir); llamaErr != nil {
			return
		}
		llama.LogSet(llama.LogSilent())
		llama.Init()
	})
	if llamaErr != nil {
		t.Fatalf("loading llama.cpp from %s: %v", dir, llamaErr)
	}
}

// run is what llama.cpp computed for some sequences of one model.
type run struct {
	nEmbd  int32
	params uint64
	out    [][]float32 // per sequence: pooled embedding, or the rank score
}

// evaluate loads the model at path, puts each sequence of seqs (token ids)
// into one batch, runs it (Encode for encoders, Decode otherwise) and returns
// each sequence's pooled output: width floats, or one score for rank pooling.
func evaluate(t *testing.T, path string, pooling llama.PoolingType, seqs [][]llama.Token) run {
	t.Helper()
	loadLlama(t)
	model, err := llama.ModelLoadFromFile(path, llama.ModelDefaultParams())
	if err != nil {
		t.Fatalf("llama.cpp loading %s: %v", path, err)
	}
	defer llama.ModelFree(model)
	params := llama.ContextDefaultParams()
	params.Embeddings = 1
	params.PoolingType = pooling
	// llama.cpp v0.5.0 aborts (GGML_ASSERT in build_pooling) when n_ubatch is not
	// a multiple of n_seq_max, so the sequence slots are a power of two.
	params.NCtx, params.NBatch, params.NUbatch, params.NSeqMax = 1024, 512, 512, 4
	if len(seqs) > 4 {
		t.Fatalf("%d sequences; at most 4", len(seqs))
	}
	ctx, err := llama.InitFromModel(model, params)
	if err != nil {
		t.Fatalf("llama.cpp context for %s: %v", path, err)
	}
	defer llama.Free(ctx)
	r := run{nEmbd: llama.ModelNEmbd(model), params: llama.ModelNParams(model)}
	n := 0
	for _, s := range seqs {
		n += len(s)
	}
	batch := llama.BatchInit(int32(n), 0, 1)
	defer llama.BatchFree(batch)
	for i, s := range seqs {
		for pos, tok := range s {
			if err := batch.Add(tok, llama.Pos(pos), []llama.SeqId{llama.SeqId(i)}, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	var rc int32
	if llama.ModelHasEncoder(model) {
		rc, err = llama.Encode(ctx, batch)
	} else {
		rc, err = llama.Decode(ctx, batch)
	}
	if err != nil || rc != 0 {
		t.Fatalf("llama.cpp evaluating %s: rc %d, %v", path, rc, err)
	}
	width := r.nEmbd
	if pooling == llama.PoolingTypeRank {
		width = 1
	}
	for i := range seqs {
		e, err := llama.GetEmbeddingsSeq(ctx, llama.SeqId(i), width)
		if err != nil || e == nil {
			t.Fatalf("llama.cpp: no output for sequence %d of %s: %v", i, path, err)
		}
		r.out = append(r.out, append([]float32(nil), e...))
	}
	return r
}

// checkOutputs asserts finite values, and that no output is constant and
// no two sequences' outputs are equal.
func checkOutputs(t *testing.T, r run, width int) {
	t.Helper()
	for i, e := range r.out {
		if len(e) != width {
			t.Fatalf("sequence %d: %d values; want %d", i, len(e), width)
		}
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, x := range e {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("sequence %d: non-finite value %v", i, x)
			}
			lo, hi = min(lo, x), max(hi, x)
		}
		if width > 1 && lo == hi {
			t.Errorf("sequence %d: constant output %v", i, lo)
		}
		for j := range i {
			if fmt.Sprint(r.out[j]) == fmt.Sprint(e) {
				t.Errorf("sequences %d and %d: same output %v", j, i, e[:min(4, len(e))])
			}
		}
	}
}

func TestLlamaCppRunsGeneratedModels(t *testing.T) {
	loadLlama(t)
	// [CLS] w1 w2 w3 [SEP] with ids from the middle of each vocabulary.
	bertSeqs := func(v Vocab) [][]llama.Token {
		n := llama.Token(v.Size())
		return [][]llama.Token{
			{BertCLS, n - 7, n - 40, n - 3, BertSEP},
			{BertCLS, n - 11, BertSEP},
			{BertCLS, n - 1, n - 2, BertSEP, n - 5, n - 6, BertSEP},
		}
	}
	llamaSeqs := func(Vocab) [][]llama.Token {
		return [][]llama.Token{{SPMBOS, 300, 301, 302}, {SPMBOS, 310}, {SPMBOS, 320, 330, 340, 350, 360}}
	}
	// The fixture vocabularies (bge, llama-spm) need the shared fixtures;
	// the generated ones run anywhere.
	demo := func(testing.TB) Vocab { return WordPieceVocab(DemoWords) }
	spmDemo := func(testing.TB) Vocab { return SPMVocab(DemoWords) }
	tests := []struct {
		name    string
		vocab   func(testing.TB) Vocab
		write   func(v Vocab, path string) error
		pooling llama.PoolingType
		width   int
		seqs    func(Vocab) [][]llama.Token
	}{
		{"bert-embed/bge", bgeVocab, func(v Vocab, p string) error { return TinyEmbedder(v).Write(p) }, llama.PoolingTypeMean, 128, bertSeqs},
		{"bert-embed/wordpiece", demo, func(v Vocab, p string) error { return TinyEmbedder(v).Write(p) }, llama.PoolingTypeMean, 128, bertSeqs},
		{"bert-embed/cls-f32-wordpiece", demo, func(v Vocab, p string) error {
			c := TinyEmbedder(v)
			c.Pooling, c.WeightType, c.Layers = PoolingCLS, 0, 3
			return c.Write(p)
		}, llama.PoolingTypeCLS, 128, bertSeqs},
		{"bert-embed/q8_0", demo, func(v Vocab, p string) error {
			c := TinyEmbedder(v)
			c.WeightType = 8
			return c.Write(p)
		}, llama.PoolingTypeMean, 128, bertSeqs},
		{"bert-rerank/bge", bgeVocab, func(v Vocab, p string) error { return TinyReranker(v).Write(p) }, llama.PoolingTypeRank, 1, bertSeqs},
		{"bert-rerank/wordpiece", demo, func(v Vocab, p string) error { return TinyReranker(v).Write(p) }, llama.PoolingTypeRank, 1, bertSeqs},
		{"demo-embedder", demo, func(_ Vocab, p string) error { return WriteDemoEmbedder(p, nil) }, llama.PoolingTypeMean, 128, bertSeqs},
		{"minilm/bge", bgeVocab, func(v Vocab, p string) error { return MiniLM(v).Write(p) }, llama.PoolingTypeMean, 384, bertSeqs},
		{"minilm/wordpiece", demo, func(v Vocab, p string) error { return MiniLM(v).Write(p) }, llama.PoolingTypeMean, 384, bertSeqs},
		{"llama/spm-fixture", spmVocab, func(v Vocab, p string) error { return TinyLlama(v).Write(p) }, llama.PoolingTypeMean, 64, llamaSeqs},
		{"llama/spm-generated", spmDemo, func(v Vocab, p string) error { return TinyLlama(v).Write(p) }, llama.PoolingTypeLast, 64, llamaSeqs},
		{"gemma-embedding/spm-generated", spmDemo, func(v Vocab, p string) error { return tinyGemma(v).Write(p) }, llama.PoolingTypeMean, 64, llamaSeqs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.vocab(t)
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := tt.write(v, path); err != nil {
				t.Fatal(err)
			}
			r := evaluate(t, path, tt.pooling, tt.seqs(v))
			if int(r.nEmbd) != tt.width && tt.pooling != llama.PoolingTypeRank {
				t.Errorf("n_embd = %d; want %d", r.nEmbd, tt.width)
			}
			checkOutputs(t, r, tt.width)
			t.Logf("llama.cpp: n_embd %d, %d parameters, sequence 0 output %v…", r.nEmbd, r.params, r.out[0][:min(3, len(r.out[0]))])
		})
	}
}

// TestLlamaCppTokenizesGeneratedVocab checks the generated vocabularies with
// llama.cpp's own tokenizers: every demo word is one token.
func TestLlamaCppTokenizesGeneratedVocab(t *testing.T) {
	loadLlama(t)
	tests := []struct {
		name  string
		write func(string) error
		want  func(ids []llama.Token, v Vocab) string // "" when ok
		vocab Vocab
	}{
		{"wordpiece", nil, nil, WordPieceVocab(DemoWords)},
		{"spm", nil, nil, SPMVocab(DemoWords)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			var err error
			if tt.vocab.Model() == "bert" {
				c := TinyEmbedder(tt.vocab)
				c.Layers, c.Width, c.FFN, c.Context = 1, 32, 32, 64
				err = c.Write(path)
			} else {
				c := TinyLlama(tt.vocab)
				c.Layers, c.Width, c.FFN = 1, 32, 32
				err = c.Write(path)
			}
			if err != nil {
				t.Fatal(err)
			}
			loadLlama(t)
			model, err := llama.ModelLoadFromFile(path, llama.ModelDefaultParams())
			if err != nil {
				t.Fatal(err)
			}
			defer llama.ModelFree(model)
			vocab := llama.ModelGetVocab(model)
			if got := int(llama.VocabNTokens(vocab)); got != tt.vocab.Size() {
				t.Errorf("llama.cpp vocabulary size %d; want %d", got, tt.vocab.Size())
			}
			kv, _ := tt.vocab.get("tokens")
			toks := kv.Value.([]string)
			for _, w := range DemoWords {
				ids := llama.Tokenize(vocab, w, false, false)
				if len(ids) != 1 || (toks[ids[0]] != w && toks[ids[0]] != spmSpace+w) {
					t.Errorf("%q: llama.cpp ids %v; want the one token of the word", w, ids)
				}
			}
			ids := llama.Tokenize(vocab, "Qz", true, false)
			if len(ids) < 3 || ids[0] != llama.Token(map[string]int{"bert": BertCLS, "llama": SPMBOS}[tt.vocab.Model()]) {
				t.Errorf("\"Qz\" with specials: llama.cpp ids %v", ids)
			}
		})
	}
}

// tinyGemma is a random-weight EmbeddingGemma: seven layers (five sliding,
// one full, one sliding) and the Dense projections 64 → 96 → 64.
func tinyGemma(v Vocab) GemmaEmbedding {
	return GemmaEmbedding{Name: "tiny-gemma", Layers: 7, Width: 64, Heads: 4, HeadsKV: 2, HeadDim: 32, FFN: 128, Context: 64,
		Window: 4, Pooling: PoolingMean, DenseWidth: 96, RopeBase: 1e6, Eps: 1e-6, Vocab: v, Seed: 5}
}
