package hfmodel

import (
	"strings"
	"testing"
)

// TestScoring: the score rule for each label layout, and the layouts
// refused (naming the labels).
func TestScoring(t *testing.T) {
	labels := func(names ...string) map[string]string {
		m := map[string]string{}
		for i, n := range names {
			m[string(rune('0'+i))] = n
		}
		return m
	}
	logits := []float32{0.25, 2}
	tests := []struct {
		name  string
		cfg   Config
		width int
		score float32 // of logits
		err   string
	}{
		{"1 label", Config{ID2Label: labels("LABEL_0")}, 1, 0.25, ""},
		{"no config, 1 column", Config{}, 1, 0.25, ""},
		{"num_labels only", Config{NumLabels: 1}, 0, 0.25, ""},
		{"2 default labels", Config{ID2Label: labels("LABEL_0", "LABEL_1")}, 2, 1.75, ""},
		{"2 named labels", Config{ID2Label: labels("irrelevant", "Relevant")}, 2, 1.75, ""},
		{"2 columns, no labels", Config{}, 2, 1.75, ""},
		{"label 0 positive", Config{ID2Label: labels("relevant", "irrelevant")}, 2, 0, `0="relevant"`},
		{"both positive", Config{ID2Label: labels("yes", "true")}, 2, 0, "do not say"},
		{"3 labels", Config{ID2Label: labels("contradiction", "entailment", "neutral")}, 3, 0, "3 labels"},
		{"width disagrees", Config{ID2Label: labels("LABEL_0")}, 2, 0, "2 columns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tt.cfg.Scoring(tt.width)
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("err %v; want one saying %q", err, tt.err)
				}
			case err != nil:
				t.Errorf("err %v; want none", err)
			case s.Score(logits[:s.Labels]) != tt.score:
				t.Errorf("score %v (%s); want %v", s.Score(logits[:s.Labels]), s, tt.score)
			}
		})
	}
}

// TestLabelScoring: GGUF rerankers' labels (classifier.output_labels) get
// the rule config.json's id2label gets; no labels is llama.cpp's one output.
func TestLabelScoring(t *testing.T) {
	logits := []float32{0.25, 2}
	tests := []struct {
		labels []string
		score  float32
		err    string
	}{
		{nil, 0.25, ""},
		{[]string{"LABEL_0"}, 0.25, ""},
		{[]string{"LABEL_0", "LABEL_1"}, 1.75, ""},
		{[]string{"not_relevant", "relevant"}, 1.75, ""},
		{[]string{"relevant", "not_relevant"}, 0, `0="relevant"`},
		{[]string{"a", "b"}, 0, "do not say"},
		{[]string{"contradiction", "entailment", "neutral"}, 0, "3 labels"},
	}
	for _, tt := range tests {
		s, err := LabelScoring(tt.labels)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: err %v; want one saying %q", tt.labels, err, tt.err)
			}
		case err != nil:
			t.Errorf("%q: err %v; want none", tt.labels, err)
		case s.Score(logits[:s.Labels]) != tt.score:
			t.Errorf("%q: score %v (%s); want %v", tt.labels, s.Score(logits[:s.Labels]), s, tt.score)
		}
	}
}
