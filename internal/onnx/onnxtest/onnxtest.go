// Package onnxtest writes small ONNX encoders and Hugging Face style model
// directories for tests, so that a test which needs only an ONNX model runs
// in a fresh clone, without Python or the shared fixtures.
//
// The encoder is deliberately simple and exactly predictable: the hidden
// state of token j of a sequence is E[id] + T[type] + P[j] (embedding, token
// type and position rows, float32 adds), times the attention mask. Its
// optional sentence_embedding output is the masked mean of those rows.
package onnxtest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/synapse-embed/synapse/internal/onnx"
)

// Encoder describes a generated encoder graph.
type Encoder struct {
	Vocab, Hidden, Positions int
	Seed                     uint64
	NoHidden                 bool // no last_hidden_state output
	Pooled                   bool // a sentence_embedding output
	NoTokenTypes             bool // no token_type_ids input
	Int32                    bool // int32 inputs instead of int64
	// Quantized multiplies the hidden states by a weight matrix through
	// dynamic quantization, as onnxruntime's quantize_dynamic writes it
	// (DynamicQuantizeLinear, MatMulInteger, the scales multiplied back):
	// the activations' scale is taken over the whole input tensor, so a
	// sequence's output depends on the others of its batch. HiddenStates
	// does not describe such a graph.
	Quantized bool
}

// Tiny is a 64-row, 8-wide encoder with both outputs.
func Tiny() Encoder {
	return Encoder{Vocab: 64, Hidden: 8, Positions: 32, Seed: 1, Pooled: true}
}

// Tables are an encoder's weights: the rows the hidden states add up.
type Tables struct {
	E, T, P [][]float32
}

// Tables returns the encoder's weights (deterministic from Seed).
func (e Encoder) Tables() Tables {
	r := rand.New(rand.NewPCG(e.Seed, 0x5eed))
	rows := func(n int) [][]float32 {
		out := make([][]float32, n)
		for i := range out {
			out[i] = make([]float32, e.Hidden)
			for j := range out[i] {
				out[i][j] = float32(r.NormFloat64())
			}
		}
		return out
	}
	return Tables{E: rows(e.Vocab), T: rows(2), P: rows(e.Positions)}
}

// HiddenStates returns the hidden state the graph computes for one unpadded
// sequence of token type 0, token by token.
func (e Encoder) HiddenStates(ids []int32) [][]float32 {
	tb := e.Tables()
	out := make([][]float32, len(ids))
	for j, id := range ids {
		row := make([]float32, e.Hidden)
		for d := range row {
			row[d] = tb.E[id][d]
			if !e.NoTokenTypes {
				row[d] += tb.T[0][d]
			}
			row[d] += tb.P[j][d]
		}
		out[j] = row
	}
	return out
}

func flat(rows [][]float32) []float32 {
	var out []float32
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// Model returns the encoder's ONNX model.
func (e Encoder) Model() onnx.Model {
	tb := e.Tables()
	elem := onnx.Int64
	if e.Int32 {
		elem = onnx.Int32
	}
	bs := []onnx.Dim{{Param: "batch"}, {Param: "sequence"}}
	g := onnx.Graph{Name: "onnxtest-encoder"}
	g.Inputs = []onnx.Value{{Name: "input_ids", Tensor: true, Elem: elem, Dims: bs}, {Name: "attention_mask", Tensor: true, Elem: elem, Dims: bs}}
	if !e.NoTokenTypes {
		g.Inputs = append(g.Inputs, onnx.Value{Name: "token_type_ids", Tensor: true, Elem: elem, Dims: bs})
	}
	g.Initializers = []onnx.Tensor{
		{Name: "E", Dims: []int64{int64(e.Vocab), int64(e.Hidden)}, Floats: flat(tb.E)},
		{Name: "T", Dims: []int64{2, int64(e.Hidden)}, Floats: flat(tb.T)},
		{Name: "P", Dims: []int64{int64(e.Positions), int64(e.Hidden)}, Floats: flat(tb.P)},
		{Name: "c0", Dims: []int64{1}, Ints: []int64{0}},
		{Name: "c1", Dims: []int64{1}, Ints: []int64{1}},
		{Name: "c2", Dims: []int64{1}, Ints: []int64{2}},
		{Name: "cm1", Dims: []int64{1}, Ints: []int64{-1}},
	}
	node := func(op string, in []string, out string, attrs ...onnx.Attr) {
		g.Nodes = append(g.Nodes, onnx.Node{Op: op, Inputs: in, Outputs: []string{out}, Attrs: attrs})
	}
	node("Gather", []string{"E", "input_ids"}, "x", onnx.IntAttr("axis", 0))
	x := "x"
	if !e.NoTokenTypes {
		node("Gather", []string{"T", "token_type_ids"}, "t", onnx.IntAttr("axis", 0))
		node("Add", []string{"x", "t"}, "xt")
		x = "xt"
	}
	node("Shape", []string{"input_ids"}, "shape")
	node("Slice", []string{"shape", "c1", "c2"}, "seqlen")
	node("Slice", []string{"P", "c0", "seqlen", "c0"}, "pos")
	node("Add", []string{x, "pos"}, "h")
	node("Cast", []string{"attention_mask"}, "maskf", onnx.IntAttr("to", int64(onnx.Float)))
	node("Unsqueeze", []string{"maskf", "cm1"}, "mask3")
	h := "h"
	if e.Quantized {
		h = e.quantize(&g, node)
	}
	hiddenOut := "hm"
	if !e.NoHidden {
		hiddenOut = "last_hidden_state"
	}
	node("Mul", []string{h, "mask3"}, hiddenOut)
	dims := []onnx.Dim{{Param: "batch"}, {Param: "sequence"}, {Value: int64(e.Hidden)}}
	if !e.NoHidden {
		g.Outputs = append(g.Outputs, onnx.Value{Name: "last_hidden_state", Tensor: true, Elem: onnx.Float, Dims: dims})
	}
	if e.Pooled {
		node("ReduceSum", []string{hiddenOut, "c1"}, "sum", onnx.IntAttr("keepdims", 0))
		node("ReduceSum", []string{"mask3", "c1"}, "count", onnx.IntAttr("keepdims", 0))
		node("Div", []string{"sum", "count"}, "sentence_embedding")
		g.Outputs = append(g.Outputs, onnx.Value{Name: "sentence_embedding", Tensor: true, Elem: onnx.Float,
			Dims: []onnx.Dim{{Param: "batch"}, {Value: int64(e.Hidden)}}})
	}
	return onnx.Model{Producer: "synapse-onnxtest", Graph: g}
}

// quantize replaces h by h·W computed as a dynamically quantized MatMul:
// both operands quantized to uint8 at run time (W is a float initializer
// quantized by the graph itself, which keeps the writer float-only). It
// returns the product's name.
func (e Encoder) quantize(g *onnx.Graph, node func(op string, in []string, out string, attrs ...onnx.Attr)) string {
	r := rand.New(rand.NewPCG(e.Seed, 0x9a))
	w := make([]float32, e.Hidden*e.Hidden)
	for i := range w {
		w[i] = float32(r.NormFloat64()) / 4
	}
	g.Initializers = append(g.Initializers, onnx.Tensor{Name: "W", Dims: []int64{int64(e.Hidden), int64(e.Hidden)}, Floats: w})
	g.Nodes = append(g.Nodes,
		onnx.Node{Op: "DynamicQuantizeLinear", Inputs: []string{"h"}, Outputs: []string{"hq", "hs", "hz"}},
		onnx.Node{Op: "DynamicQuantizeLinear", Inputs: []string{"W"}, Outputs: []string{"wq", "ws", "wz"}})
	node("MatMulInteger", []string{"hq", "wq", "hz", "wz"}, "mi")
	node("Cast", []string{"mi"}, "mf", onnx.IntAttr("to", int64(onnx.Float)))
	node("Mul", []string{"hs", "ws"}, "scale")
	node("Mul", []string{"mf", "scale"}, "hw")
	return "hw"
}

// Words is the default vocabulary of WriteDir's tokenizer.
var Words = []string{"the", "cell", "cells", "protein", "gene", "study", "results", "of", "and", "in", "a", "to", "is", "hello", "world"}

// BertVocab returns a WordPiece vocabulary: [PAD] [UNK] [CLS] [SEP] [MASK],
// the words, the lowercase letters and digits, "##" and each letter and digit
// as a continuation piece, and ASCII punctuation.
func BertVocab(words []string) []string {
	v := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	seen := map[string]bool{}
	add := func(t string) {
		if !seen[t] {
			seen[t] = true
			v = append(v, t)
		}
	}
	for _, t := range v {
		seen[t] = true
	}
	for _, w := range words {
		add(strings.ToLower(w))
	}
	for c := 'a'; c <= 'z'; c++ {
		add(string(c))
		add("##" + string(c))
	}
	for c := '0'; c <= '9'; c++ {
		add(string(c))
		add("##" + string(c))
	}
	for _, c := range "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" {
		add(string(c))
	}
	return v
}

// BertTokenizerJSON returns a tokenizer.json for a BERT WordPiece
// vocabulary as the Hugging Face converters write it: BertNormalizer,
// BertPreTokenizer, WordPiece, and [CLS] $A [SEP] / [CLS] $A [SEP] $B:1 [SEP]:1.
func BertTokenizerJSON(vocab []string, maxLen int) ([]byte, error) {
	ids := map[string]int{}
	for i, t := range vocab {
		ids[t] = i
	}
	for _, t := range []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"} {
		if _, ok := ids[t]; !ok {
			return nil, fmt.Errorf("onnxtest: vocabulary lacks %s", t)
		}
	}
	var added []map[string]any
	for _, t := range []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"} {
		added = append(added, map[string]any{"id": ids[t], "content": t, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
	}
	special := func(t string, typ int) map[string]any {
		return map[string]any{"SpecialToken": map[string]any{"id": t, "type_id": typ}}
	}
	seq := func(id string, typ int) map[string]any {
		return map[string]any{"Sequence": map[string]any{"id": id, "type_id": typ}}
	}
	tj := map[string]any{
		"version":      "1.0",
		"truncation":   map[string]any{"direction": "Right", "max_length": maxLen, "strategy": "LongestFirst", "stride": 0},
		"padding":      nil,
		"added_tokens": added,
		"normalizer": map[string]any{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
			"strip_accents": nil, "lowercase": true},
		"pre_tokenizer": map[string]any{"type": "BertPreTokenizer"},
		"post_processor": map[string]any{
			"type":   "TemplateProcessing",
			"single": []any{special("[CLS]", 0), seq("A", 0), special("[SEP]", 0)},
			"pair":   []any{special("[CLS]", 0), seq("A", 0), special("[SEP]", 0), seq("B", 1), special("[SEP]", 1)},
			"special_tokens": map[string]any{
				"[CLS]": map[string]any{"id": "[CLS]", "ids": []int{ids["[CLS]"]}, "tokens": []string{"[CLS]"}},
				"[SEP]": map[string]any{"id": "[SEP]", "ids": []int{ids["[SEP]"]}, "tokens": []string{"[SEP]"}},
			},
		},
		"decoder": map[string]any{"type": "WordPiece", "prefix": "##", "cleanup": true},
		"model": map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
			"max_input_chars_per_word": 100, "vocab": ids},
	}
	return json.MarshalIndent(tj, "", "  ")
}

// Dir describes a generated model directory.
type Dir struct {
	Encoder Encoder
	Words   []string // tokenizer vocabulary words (nil: Words)
	Graph   string   // graph file name ("" : model.onnx)
	// Omit lists files not to write ("tokenizer.json", "config.json").
	Omit []string
}

// WriteDir writes a model directory into dir: the graph, tokenizer.json and
// config.json. The encoder's vocabulary is sized to the tokenizer's.
func WriteDir(dir string, d Dir) (Encoder, error) {
	words := d.Words
	if words == nil {
		words = Words
	}
	vocab := BertVocab(words)
	e := d.Encoder
	e.Vocab = len(vocab)
	graph := d.Graph
	if graph == "" {
		graph = "model.onnx"
	}
	omit := map[string]bool{}
	for _, f := range d.Omit {
		omit[f] = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return e, err
	}
	if err := e.Model().WriteFile(filepath.Join(dir, graph)); err != nil {
		return e, err
	}
	if !omit["tokenizer.json"] {
		tj, err := BertTokenizerJSON(vocab, e.Positions)
		if err != nil {
			return e, err
		}
		if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tj, 0o644); err != nil {
			return e, err
		}
	}
	if !omit["config.json"] {
		cfg := map[string]any{"architectures": []string{"BertModel"}, "model_type": "bert", "hidden_size": e.Hidden,
			"max_position_embeddings": e.Positions, "vocab_size": e.Vocab, "type_vocab_size": 2, "pad_token_id": 0}
		b, _ := json.MarshalIndent(cfg, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
			return e, err
		}
	}
	return e, nil
}
