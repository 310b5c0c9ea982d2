package hfmodel

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Cross-encoders (BertForSequenceClassification,
// XLMRobertaForSequenceClassification, …) output logits [batch, labels].
// A reranking score is one number per pair; Scoring says which, and refuses
// what cannot be decided:
//
//	1 label   score = logits[0] (sentence-transformers CrossEncoder's
//	          num_labels=1 models: ms-marco-MiniLM, bge-reranker, …)
//	2 labels  score = logits[1] − logits[0], when label 1 is the positive
//	          class (transformers' default names LABEL_0/LABEL_1, or label 1
//	          named positive, relevant, true, yes, …): the log-odds of the
//	          positive class under the softmax such a model is trained with,
//	          so its sigmoid (--sigmoid) is softmax(logits)[1], the
//	          probability CrossEncoder.predict(apply_softmax=True) gives.
//	          Labels whose names do not say which class is positive are refused.
//	3+ labels refused: an NLI or multi-class head has no single relevance score.
//
// The same rule holds for GGUF rerankers (LabelScoring), whose label names
// are {arch}.classifier.output_labels: the llama.cpp engine and the module
// both apply it.

// Scoring is how a cross-encoder's logits become one score per pair.
type Scoring struct {
	Labels int // the logits' width: 1 or 2
}

// Score is the relevance score of one pair's logits (len Labels).
func (s Scoring) Score(logits []float32) float32 {
	if s.Labels == 2 {
		return logits[1] - logits[0]
	}
	return logits[0]
}

// String describes the rule, e.g. "logits[1] - logits[0] (2 labels)".
func (s Scoring) String() string {
	if s.Labels == 2 {
		return "logits[1] - logits[0] (2 labels, label 1 positive)"
	}
	return "logits[0] (1 label)"
}

// IsCrossEncoder reports whether config.json names a sequence
// classification architecture (a cross-encoder when it reranks).
func (c Config) IsCrossEncoder() bool {
	return slices.ContainsFunc(c.Architectures, func(s string) bool { return strings.HasSuffix(s, "ForSequenceClassification") })
}

// Labels is the number of classifier outputs config.json declares: id2label's
// size, else num_labels; 0 when it says neither.
func (c Config) Labels() int {
	if len(c.ID2Label) > 0 {
		return len(c.ID2Label)
	}
	return max(c.NumLabels, 0)
}

// positiveLabels are label names that say the class is the relevant one.
var positiveLabels = map[string]bool{
	"label_1": true, "1": true, "positive": true, "pos": true, "relevant": true, "true": true, "yes": true,
	"match": true, "related": true, "similar": true, "entailment": true, "duplicate": true,
}

// Scoring decides the score rule for a cross-encoder whose logits are width
// wide (the graph's; 0 when unknown, then config.json's labels decide).
// config.json's labels, when it has them, must agree with width.
func (c Config) Scoring(width int) (Scoring, error) {
	n := c.Labels()
	switch {
	case width > 0 && n > 0 && width != n:
		return Scoring{}, fmt.Errorf("hfmodel: the graph's logits have %d columns but config.json declares %d labels %s", width, n, c.labelList())
	case width > 0:
		n = width
	case n == 0:
		n = 1 // transformers' default num_labels is 2, but a graph without a fixed width is read as one
	}
	names := make([]string, n)
	for i := range names {
		names[i] = c.label(i)
	}
	return scoring(names, c.labelList())
}

// LabelScoring decides the score rule for a classifier whose outputs carry
// these label names, one per logit: a GGUF reranker's
// {arch}.classifier.output_labels, which llama.cpp sizes its classifier
// output by (n_cls_out; 1 when the file names no labels).
func LabelScoring(labels []string) (Scoring, error) {
	if len(labels) == 0 {
		return Scoring{Labels: 1}, nil
	}
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = fmt.Sprintf("%d=%q", i, l)
	}
	return scoring(labels, "("+strings.Join(parts, ", ")+")")
}

// scoring is the rule for logits whose classes are named names ("" for
// unnamed ones); list shows the names in errors.
func scoring(names []string, list string) (Scoring, error) {
	switch len(names) {
	case 1:
		return Scoring{Labels: 1}, nil
	case 2:
		l0, l1 := strings.ToLower(names[0]), strings.ToLower(names[1])
		if positiveLabels[l1] && !positiveLabels[l0] || l0 == "" && l1 == "" {
			return Scoring{Labels: 2}, nil
		}
		return Scoring{}, fmt.Errorf("hfmodel: a cross-encoder with 2 labels %s: synapse scores logits[1] - logits[0] only when label 1 is the positive class (LABEL_1, positive, relevant, true, yes, …); these names do not say it is", list)
	}
	return Scoring{}, fmt.Errorf("hfmodel: a classifier with %d labels %s has no single relevance score; synapse reranks with 1-label cross-encoders, or 2-label ones whose label 1 is the positive class", len(names), list)
}

// label is id2label's name of class i, "" when config.json has none.
func (c Config) label(i int) string { return c.ID2Label[strconv.Itoa(i)] }

func (c Config) labelList() string {
	if len(c.ID2Label) == 0 {
		return "(no id2label)"
	}
	var parts []string
	for i := range len(c.ID2Label) {
		parts = append(parts, fmt.Sprintf("%d=%q", i, c.label(i)))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
