package convert

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/hfmodel"
)

// WriteGGUF converts a BERT source to a GGUF file (float32 weights) with
// llama.cpp's BERT tensor names and metadata and its WordPiece vocabulary
// (from tokenizer.json, spelled as llama.cpp's converter spells it). What
// a GGUF file cannot carry is refused: RoBERTa's position offset, a
// classifier head, sentence-transformers Dense modules, a pooling other
// than mean or cls. max_seq_length, when sentence_bert_config.json sets
// one below max_position_embeddings, becomes the context (the position
// table is cut to it), so that synapse chunks as sentence-transformers
// truncates.
func (s *Source) WriteGGUF(path string) error {
	if s.arch.decoder == gemmaDecoder {
		return s.writeGemmaGGUF(path)
	}
	if s.arch.decoder != "" {
		return s.writeQwen3GGUF(path)
	}
	if s.arch.offset || s.arch.classifier || s.arch.distil || s.arch.mpnet || s.arch.modern {
		return fmt.Errorf("convert: %s: %w: --format gguf converts BERT encoders (BertModel, BertForMaskedLM), not %s; use --format onnx", s.Dir, ErrRefused, s.Arch)
	}
	chain, err := s.readChain()
	if err != nil {
		return err
	}
	pooling, err := ggufPooling(s.Dir, chain)
	if err != nil {
		return err
	}
	vocab, err := wordPieceVocab(filepath.Join(s.Dir, "tokenizer.json"))
	if err != nil {
		return err
	}
	return s.writeGGUFWith(path, vocab, s.ggufTensors, func(fill map[string]func(int, []float32)) (ggufModel, error) {
		c := s.Config
		types := c.TypeVocabSize
		if types == 0 {
			types = 2
		}
		return modelgen.BERT{Name: filepath.Base(s.Dir), Layers: c.Layers, Width: c.HiddenSize, Heads: c.Heads, FFN: c.Intermediate,
			Context: s.ggufContext(chain), TokenTypes: types, Pooling: pooling, WeightType: gguf.GGMLTypeF32, Eps: c.eps(), Vocab: vocab, Fill: fill}, nil
	})
}

// readChain reads the directory's sentence-transformers chain; one that
// does not parse is refused.
func (s *Source) readChain() (hfmodel.Chain, error) {
	chain, err := hfmodel.ReadChain(s.Dir)
	if err != nil {
		return chain, fmt.Errorf("convert: %s: %w: %w", s.Dir, ErrRefused, err)
	}
	return chain, nil
}

// ggufModel is a model modelgen writes as a GGUF file.
type ggufModel interface{ Write(path string) error }

// writeGGUFWith writes the model build makes of the weights (tensors gives
// each GGUF tensor's fill from the open weights, for a vocabulary of
// vocab's size) to path; the weights stay open while it is written.
func (s *Source) writeGGUFWith(path string, vocab modelgen.Vocab, tensors func(*weights, int) (map[string]func(int, []float32), error),
	build func(fill map[string]func(int, []float32)) (ggufModel, error)) error {
	w, err := s.openWeights()
	if err != nil {
		return err
	}
	defer w.close()
	fill, err := tensors(w, vocab.Size())
	if err != nil {
		return err
	}
	m, err := build(fill)
	if err != nil {
		return err
	}
	if err := m.Write(path); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	return nil
}

// ggufPooling is the GGUF pooling type of the sentence-transformers chain:
// mean without a Pooling module; Dense modules cannot be carried.
func ggufPooling(dir string, chain hfmodel.Chain) (modelgen.Pooling, error) {
	if err := noDense(dir, chain, "; use --format onnx"); err != nil {
		return 0, err
	}
	p := chain.Pooling()
	switch {
	case p == nil:
		return modelgen.PoolingMean, nil
	case len(p.Modes) == 1 && p.Modes[0] == "mean":
		return modelgen.PoolingMean, nil
	case len(p.Modes) == 1 && p.Modes[0] == "cls":
		return modelgen.PoolingCLS, nil
	}
	return 0, fmt.Errorf("convert: %s: %w: pooling %v has no GGUF pooling type; use --format onnx", dir, ErrRefused, p.Modes)
}

// ggufTensors reads every weight the GGUF file holds, checked against
// config.json, and returns them by their GGUF names as row fills. A torch
// Linear's weight [out, in] is GGUF's [in, out] in ne order: the same rows.
func (s *Source) ggufTensors(w *weights, vocab int) (map[string]func(int, []float32), error) {
	c := s.Config
	h, f := int64(c.HiddenSize), int64(c.Intermediate)
	types := int64(c.TypeVocabSize)
	if types == 0 {
		types = 2
	}
	fill := map[string]func(int, []float32){} // position_embd: its first Context rows
	add := func(gname, hname string, cols int64, shape ...int64) error {
		v, err := w.tensor(hname, shape...)
		if err != nil {
			return err
		}
		fill[gname] = func(row int, dst []float32) { copy(dst, v[int64(row)*cols:int64(row+1)*cols]) }
		return nil
	}
	type pair struct {
		gguf, hf string
		cols     int64
		shape    []int64
	}
	list := []pair{
		{"token_embd.weight", "embeddings.word_embeddings.weight", h, []int64{int64(vocab), h}},
		{"position_embd.weight", "embeddings.position_embeddings.weight", h, []int64{int64(c.MaxPositionEmbeddings), h}},
		{"token_types.weight", "embeddings.token_type_embeddings.weight", h, []int64{types, h}},
		{"token_embd_norm.weight", "embeddings.LayerNorm.weight", h, []int64{h}},
		{"token_embd_norm.bias", "embeddings.LayerNorm.bias", h, []int64{h}},
	}
	for l := range c.Layers {
		b, p := fmt.Sprintf("blk.%d.", l), fmt.Sprintf("encoder.layer.%d.", l)
		list = append(list,
			pair{b + "attn_q.weight", p + "attention.self.query.weight", h, []int64{h, h}},
			pair{b + "attn_q.bias", p + "attention.self.query.bias", h, []int64{h}},
			pair{b + "attn_k.weight", p + "attention.self.key.weight", h, []int64{h, h}},
			pair{b + "attn_k.bias", p + "attention.self.key.bias", h, []int64{h}},
			pair{b + "attn_v.weight", p + "attention.self.value.weight", h, []int64{h, h}},
			pair{b + "attn_v.bias", p + "attention.self.value.bias", h, []int64{h}},
			pair{b + "attn_output.weight", p + "attention.output.dense.weight", h, []int64{h, h}},
			pair{b + "attn_output.bias", p + "attention.output.dense.bias", h, []int64{h}},
			pair{b + "attn_output_norm.weight", p + "attention.output.LayerNorm.weight", h, []int64{h}},
			pair{b + "attn_output_norm.bias", p + "attention.output.LayerNorm.bias", h, []int64{h}},
			pair{b + "ffn_up.weight", p + "intermediate.dense.weight", h, []int64{f, h}},
			pair{b + "ffn_up.bias", p + "intermediate.dense.bias", f, []int64{f}},
			pair{b + "ffn_down.weight", p + "output.dense.weight", f, []int64{h, f}},
			pair{b + "ffn_down.bias", p + "output.dense.bias", h, []int64{h}},
			pair{b + "layer_output_norm.weight", p + "output.LayerNorm.weight", h, []int64{h}},
			pair{b + "layer_output_norm.bias", p + "output.LayerNorm.bias", h, []int64{h}},
		)
	}
	for _, p := range list {
		if err := add(p.gguf, p.hf, p.cols, p.shape...); err != nil {
			return nil, err
		}
	}
	return fill, nil
}

// wordPieceVocab reads tokenizer.json's WordPiece vocabulary as GGUF
// tokenizer metadata: pieces spelled as llama.cpp's converter spells them
// (a word-initial piece gets the phantom space ▁, a "##" continuation
// loses its ##, bracketed and added special tokens stay), the added special
// tokens as control tokens, and the special token ids.
func wordPieceVocab(path string) (modelgen.Vocab, error) {
	b, err := readlimit.ReadFile(path, readlimit.Tokenizer)
	if err != nil {
		return modelgen.Vocab{}, fmt.Errorf("convert: %w", err)
	}
	var tj struct {
		Model struct {
			Type     string         `json:"type"`
			Vocab    map[string]int `json:"vocab"`
			UnkToken string         `json:"unk_token"`
		} `json:"model"`
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(b, &tj); err != nil {
		return modelgen.Vocab{}, fmt.Errorf("convert: %s: %w: %v", path, ErrRefused, err)
	}
	if tj.Model.Type != "WordPiece" {
		return modelgen.Vocab{}, fmt.Errorf("convert: %s: %w: --format gguf needs a WordPiece tokenizer; this one is %q (use --format onnx)", path, ErrRefused, tj.Model.Type)
	}
	n := len(tj.Model.Vocab)
	toks := make([]string, n)
	for t, id := range tj.Model.Vocab {
		if id < 0 || id >= n || toks[id] != "" {
			return modelgen.Vocab{}, fmt.Errorf("convert: %s: %w: vocabulary ids are not 0…%d, each once (%q is %d)", path, ErrRefused, n-1, t, id)
		}
		toks[id] = t
	}
	special := map[int]bool{}
	for _, a := range tj.AddedTokens {
		if a.Special {
			special[a.ID] = true
		}
	}
	types := make([]int32, n)
	for id, t := range toks {
		types[id] = 1 // normal
		switch {
		case special[id]:
			types[id] = 3 // control
		case strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]"):
		case strings.HasPrefix(t, "##"):
			toks[id] = t[2:]
		default:
			toks[id] = "\u2581" + t
		}
	}
	id := func(t string) (uint32, error) {
		v, ok := tj.Model.Vocab[t]
		if !ok {
			return 0, fmt.Errorf("convert: %s: %w: no %s token", path, ErrRefused, t)
		}
		return uint32(v), nil
	}
	kv := []gguf.KV{
		{Key: modelgen.TokenizerPrefix + "model", Type: gguf.TypeString, Value: "bert"},
		{Key: modelgen.TokenizerPrefix + "pre", Type: gguf.TypeString, Value: "default"},
		{Key: modelgen.TokenizerPrefix + "tokens", Type: gguf.TypeArray, Elem: gguf.TypeString, Value: toks},
		{Key: modelgen.TokenizerPrefix + "token_type", Type: gguf.TypeArray, Elem: gguf.TypeInt32, Value: types},
	}
	unk := tj.Model.UnkToken
	if unk == "" {
		unk = "[UNK]"
	}
	keys := []struct{ key, tok string }{{"unknown_token_id", unk}, {"seperator_token_id", "[SEP]"}, // sic: llama.cpp's key
		{"padding_token_id", "[PAD]"}, {"cls_token_id", "[CLS]"}, {"mask_token_id", "[MASK]"}}
	for _, k := range keys {
		v, err := id(k.tok)
		if err != nil {
			return modelgen.Vocab{}, err
		}
		kv = append(kv, gguf.KV{Key: modelgen.TokenizerPrefix + k.key, Type: gguf.TypeUint32, Value: v})
	}
	return modelgen.Vocab{KV: kv}, nil
}
