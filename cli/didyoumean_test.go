package cli

import (
	"strings"
	"testing"
)

// TestFlagDidYouMean: a flag the command does not have is refused (exit 2)
// and, when one of its flags is near (underscores for dashes, dashes left
// out, a typo or two), named; a flag near none gets no guess.
func TestFlagDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		near string // "" = no suggestion
	}{
		{[]string{"embed", "in.jsonl", "-m", "x", "--text_field", "body"}, "--text-field"},
		{[]string{"embed", "in.jsonl", "-m", "x", "--textfield", "body"}, "--text-field"},
		{[]string{"embed", "in.jsonl", "--modle", "x"}, "--model"},
		{[]string{"rerank", "in.jsonl", "-m", "x", "--batch_tokens", "9"}, "--batch-tokens"},
		{[]string{"models", "add", "--quantise", "int8", "x"}, "--quantize"},
		{[]string{"embed", "in.jsonl", "-m", "x", "--zzzz", "1"}, ""},
	} {
		res := runSynapse(t, nil, tc.args...)
		res.wantCode(t, exitUsage)
		got := strings.Contains(res.stderr, "did you mean")
		if tc.near == "" && got || tc.near != "" && !strings.Contains(res.stderr, "did you mean "+tc.near+"?") {
			t.Errorf("%s: stderr %q; want the suggestion %q", strings.Join(tc.args, " "), res.stderr, tc.near)
		}
	}
}
