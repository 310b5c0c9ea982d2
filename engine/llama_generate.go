package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/hybridgroup/yzma/pkg/llama"

	"github.com/synapse-embed/synapse/wire"
)

var errEmptySeq = errors.New("empty token sequence")

type seqLenError struct{ n, limit int }

func (e *seqLenError) Error() string {
	return fmt.Sprintf("%d tokens exceed the %d a single evaluation holds (min of n_ubatch and n_ctx; the module chunks long inputs)", e.n, e.limit)
}

type tokenError struct{ tok, nVocab int32 }

func (e *tokenError) Error() string {
	return fmt.Sprintf("token id %d outside the vocabulary [0,%d)", e.tok, e.nVocab)
}

// Generate decodes from prompt until an end-of-generation token
// (FinishStop, or FinishGrammar when the grammar allowed nothing else while
// the model alone would have gone on), opt.MaxTokens tokens or a full
// context (FinishLength). It decodes greedily (deterministic) unless
// opt.Temperature > 0: then it samples at that temperature from a generator
// seeded with opt.Seed (the same for the same prompt and options). A
// non-empty grammar is a GBNF grammar with rule "root" that constrains every
// token; one llama.cpp cannot parse is config_invalid.
func (e *Llama) Generate(ctx context.Context, ref string, prompt []int32, opt GenerateOptions) (Generation, error) {
	maxTokens, grammar := opt.MaxTokens, opt.Grammar
	m, err := e.runnable(ref, "generate")
	if err != nil {
		return Generation{}, err
	}
	if m.cfg.embeddings {
		return Generation{}, wire.Errorf(wire.CodeBadRequest, "model %s was loaded for embeddings; load it with embeddings: false to generate", ref)
	}
	if maxTokens < 0 {
		return Generation{}, wire.Errorf(wire.CodeBadRequest, "max_tokens %d < 0", maxTokens)
	}
	if opt.Temperature < 0 || math.IsNaN(float64(opt.Temperature)) || math.IsInf(float64(opt.Temperature), 0) {
		return Generation{}, wire.Errorf(wire.CodeBadRequest, "temperature %v: want 0 (greedy) or more", opt.Temperature)
	}
	if err := m.checkIDs(prompt, m.cfg.nCtx); err != nil {
		return Generation{}, wire.Errorf(wire.CodeBadRequest, "prompt: %w", err)
	}
	chain, err := m.sampler(grammar, opt.Temperature, opt.Seed)
	if err != nil {
		return Generation{}, err
	}
	defer llama.SamplerFree(chain)
	if err := m.prefill(prompt); err != nil {
		return Generation{}, err
	}
	g := Generation{NPrompt: len(prompt), FinishReason: FinishLength}
	var out []llama.Token
	var text []byte // the pieces so far, for the UTF-8 guard
	pieces := m.tokenPieces()
	for len(out) < maxTokens && len(prompt)+len(out) < m.cfg.nCtx {
		if err := ctx.Err(); err != nil {
			return Generation{}, wire.Errorf(wire.CodeInternal, "generate: %w", err)
		}
		tok := m.sampleValid(chain, unfinished(text))
		if tok == llama.TokenNull || llama.VocabIsEOG(m.vocab, tok) {
			g.FinishReason = FinishStop
			if grammar != "" && !m.prefersEnd() {
				g.FinishReason = FinishGrammar
			}
			break
		}
		out = append(out, tok)
		text = append(text, pieces[tok]...)
		if len(out) == maxTokens {
			break
		}
		if err := m.decode([]llama.Token{tok}, len(prompt)+len(out)-1, true); err != nil {
			return Generation{}, err
		}
	}
	g.NGen = len(out)
	g.Text = llama.Detokenize(m.vocab, out, false, false)
	if tail := unfinished([]byte(g.Text)); len(tail) > 0 { // cut short inside a character
		g.Text = g.Text[:len(g.Text)-len(tail)]
	}
	if !utf8.ValidString(g.Text) {
		return Generation{}, wire.Errorf(wire.CodeInternal, "generated text is not valid UTF-8 (%q)", g.Text)
	}
	return g, nil
}

// prefersEnd reports whether the model's own most likely next token (the
// logits before any sampler) ends the generation.
func (m *llamaModel) prefersEnd() bool {
	logits, err := llama.GetLogitsIth(m.gen, -1, int(m.nVocab))
	if err != nil || len(logits) == 0 {
		return true
	}
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	return llama.VocabIsEOG(m.vocab, llama.Token(best))
}

// sampler builds the chain: a grammar sampler when grammar is set, then
// greedy choice, or temperature and a seeded draw when temp > 0.
func (m *llamaModel) sampler(grammar string, temp float32, seed uint32) (llama.Sampler, error) {
	if strings.IndexByte(grammar, 0) >= 0 {
		return 0, wire.Errorf(wire.CodeConfigInvalid, "grammar contains a NUL byte")
	}
	chain := llama.SamplerChainInit(llama.SamplerChainDefaultParams())
	if grammar != "" {
		logs.takeErrors()
		g := llama.SamplerInitGrammar(m.vocab, grammar, "root")
		if g == 0 {
			llama.SamplerFree(chain)
			return 0, wire.Errorf(wire.CodeConfigInvalid, "grammar rejected by llama.cpp's GBNF parser: %s", logs.takeErrors())
		}
		llama.SamplerChainAdd(chain, g)
	}
	if temp > 0 {
		llama.SamplerChainAdd(chain, llama.SamplerInitTemp(temp))
		llama.SamplerChainAdd(chain, llama.SamplerInitDist(seed))
		return chain, nil
	}
	llama.SamplerChainAdd(chain, llama.SamplerInitGreedy())
	return chain, nil
}

// prefill clears the KV memory and evaluates the prompt in n_batch chunks,
// with logits for its last token only.
func (m *llamaModel) prefill(prompt []int32) error {
	if mem, err := llama.GetMemory(m.gen); err == nil && mem != 0 {
		llama.MemoryClear(mem, true)
	}
	toks := make([]llama.Token, len(prompt))
	for i, t := range prompt {
		toks[i] = llama.Token(t)
	}
	for start := 0; start < len(toks); start += m.cfg.nBatch {
		end := min(start+m.cfg.nBatch, len(toks))
		if err := m.decode(toks[start:end], start, end == len(toks)); err != nil {
			return err
		}
	}
	return nil
}

// decode evaluates toks at positions pos… on sequence 0 of the generation context.
func (m *llamaModel) decode(toks []llama.Token, pos int, lastLogits bool) error {
	b := m.batchFor(len(toks))
	b.Clear()
	for i, t := range toks {
		if err := b.Add(t, llama.Pos(pos+i), []llama.SeqId{0}, lastLogits && i == len(toks)-1); err != nil {
			return wire.Errorf(wire.CodeInternal, "batch: %w", err)
		}
	}
	if rc, _ := llama.Decode(m.gen, *b); rc != 0 {
		return wire.Errorf(wire.CodeInternal, "llama_decode failed (code %d at position %d): %s", rc, pos, logs.takeErrors())
	}
	return nil
}

// Tokenize runs llama.cpp's tokenizer for the model's vocabulary. The text
// must be valid UTF-8 without NUL: llama.cpp v0.5.0's WPM and BPE tokenizers
// abort the process (an uncaught std::invalid_argument) on some invalid
// sequences, such as "\xf4\x90\x80\x80". TOKENIZE's JSON text is always
// valid UTF-8; the check guards callers in the same process.
func (e *Llama) Tokenize(_ context.Context, ref, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	m, err := e.model(ref)
	if err != nil {
		return nil, err
	}
	if strings.IndexByte(text, 0) >= 0 {
		return nil, wire.Errorf(wire.CodeBadRequest, "text contains a NUL byte")
	}
	if !utf8.ValidString(text) {
		return nil, wire.Errorf(wire.CodeBadRequest, "text is not valid UTF-8")
	}
	return tokenize(m.vocab, text, addSpecial, parseSpecial), nil
}
