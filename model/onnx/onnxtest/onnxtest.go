// Package onnxtest writes small ONNX encoders and Hugging Face style model
// directories for tests, so that a test which needs only an ONNX model runs
// in a fresh clone, without Python or the shared fixtures.
//
// The encoder is deliberately simple and exactly predictable: the hidden
// state of token j of a sequence is E[id] + T[type] + P[j] (embedding, token
// type and position rows, float32 adds), then, with Layers > 0, that many
// dense layers x·W + b (MatMul and Add, or Gemm with Gemm set), times the
// attention mask. Its optional sentence_embedding output is the masked mean
// of those rows; its optional logits output is BERT's masked-LM head over
// them (Encoder.MLM).
package onnxtest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/synapse-embed/synapse/model/onnx"
)

// Encoder describes a generated encoder graph.
type Encoder struct {
	Vocab, Hidden, Positions int
	Seed                     uint64
	NoHidden                 bool // no last_hidden_state output
	Pooled                   bool // a sentence_embedding output
	NoTokenTypes             bool // no token_type_ids input
	Int32                    bool // int32 inputs instead of int64
	// Layers dense layers follow the sum (weights W [Hidden, Hidden], bias
	// b), MatMul then Add; with Gemm, a Gemm (transB = 1, W stored
	// transposed) over the rows flattened to 2-D.
	Layers int
	Gemm   bool
	// MLM adds a masked-LM head (MLMTables) over the last layer's rows,
	// unmasked as BertForMaskedLM's, and its logits output [batch,
	// sequence, Vocab]; with NoHidden and without Pooled the graph has the
	// outputs of a BertForMaskedLM export, logits alone.
	MLM bool
}

// Tiny is a 64-row, 8-wide encoder with both outputs.
func Tiny() Encoder {
	return Encoder{Vocab: 64, Hidden: 8, Positions: 32, Seed: 1, Pooled: true}
}

// Tables are an encoder's weights: the rows the hidden states add up, and
// the dense layers' weights W[l][i][o] and biases B[l][o].
type Tables struct {
	E, T, P [][]float32
	W       [][][]float32
	B       [][]float32
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
	tb := Tables{E: rows(e.Vocab), T: rows(2), P: rows(e.Positions)}
	for range e.Layers {
		w := rows(e.Hidden)
		for _, r := range w {
			for j := range r {
				r[j] /= float32(e.Hidden) // keeps the states' scale
			}
		}
		tb.W = append(tb.W, w)
		tb.B = append(tb.B, rows(1)[0])
	}
	return tb
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
		for l := range tb.W {
			row = dense(row, tb.W[l], tb.B[l])
		}
		out[j] = row
	}
	return out
}

// dense is x·W + b, in float64 rounded to float32.
func dense(x []float32, w [][]float32, b []float32) []float32 {
	out := make([]float32, len(b))
	for o := range out {
		s := float64(b[o])
		for i := range x {
			s += float64(x[i]) * float64(w[i][o])
		}
		out[o] = float32(s)
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
	h := e.layers(&g, tb, node, "h")
	node("Cast", []string{"attention_mask"}, "maskf", onnx.IntAttr("to", int64(onnx.Float)))
	node("Unsqueeze", []string{"maskf", "cm1"}, "mask3")
	hiddenOut := "hm"
	if !e.NoHidden {
		hiddenOut = "last_hidden_state"
	}
	node("Mul", []string{h, "mask3"}, hiddenOut)
	if e.MLM {
		e.mlmHead(&g, node, h)
	}
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

// layers adds the dense layers after value h and returns the last one's output.
func (e Encoder) layers(g *onnx.Graph, tb Tables, node func(op string, in []string, out string, attrs ...onnx.Attr), h string) string {
	if e.Gemm && e.Layers > 0 {
		g.Initializers = append(g.Initializers, onnx.Tensor{Name: "flat2", Dims: []int64{2}, Ints: []int64{-1, int64(e.Hidden)}})
		node("Shape", []string{h}, "h_shape")
	}
	for l := range e.Layers {
		w, b := fmt.Sprintf("layer.%d.weight", l), fmt.Sprintf("layer.%d.bias", l)
		out := fmt.Sprintf("layer.%d.out", l)
		g.Initializers = append(g.Initializers, onnx.Tensor{Name: b, Dims: []int64{int64(e.Hidden)}, Floats: tb.B[l]})
		if !e.Gemm {
			g.Initializers = append(g.Initializers, onnx.Tensor{Name: w, Dims: []int64{int64(e.Hidden), int64(e.Hidden)}, Floats: flat(tb.W[l])})
			node("MatMul", []string{h, w}, out+".mm")
			node("Add", []string{out + ".mm", b}, out)
			h = out
			continue
		}
		wt := make([][]float32, e.Hidden) // [out, in]
		for o := range wt {
			wt[o] = make([]float32, e.Hidden)
			for i := range wt[o] {
				wt[o][i] = tb.W[l][i][o]
			}
		}
		g.Initializers = append(g.Initializers, onnx.Tensor{Name: w, Dims: []int64{int64(e.Hidden), int64(e.Hidden)}, Floats: flat(wt)})
		node("Reshape", []string{h, "flat2"}, out+".in")
		node("Gemm", []string{out + ".in", w, b}, out+".gemm", onnx.IntAttr("transB", 1))
		node("Reshape", []string{out + ".gemm", "h_shape"}, out)
		h = out
	}
	return h
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
		arch := "BertModel"
		if e.MLM {
			arch = "BertForMaskedLM"
		}
		cfg := map[string]any{"architectures": []string{arch}, "model_type": "bert", "hidden_size": e.Hidden,
			"max_position_embeddings": e.Positions, "vocab_size": e.Vocab, "type_vocab_size": 2, "pad_token_id": 0}
		b, _ := json.MarshalIndent(cfg, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
			return e, err
		}
	}
	return e, nil
}
