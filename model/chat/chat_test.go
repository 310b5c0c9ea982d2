package chat

import (
	"errors"
	"strings"
	"testing"
)

func TestDetectRefuses(t *testing.T) {
	for _, tc := range []struct{ tmpl, want string }{
		{"", "no chat template"},
		{"{{ '<|header_start|>' + role + '<|header_end|>' }}", "llama4 family"},
		{"{{ '[gMASK]<sop>' }}", "chatglm4 family"},
		{"{% for m in messages %}{{ m.content }}{% endfor %}", "not one of the families"},
	} {
		_, err := Detect(tc.tmpl)
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Detect(%q) = %v; want ErrUnsupported saying %q", tc.tmpl, err, tc.want)
		}
	}
}

func TestRenderChatML(t *testing.T) {
	got, err := Render(ChatML, []Message{{"system", "Be brief."}, {"user", "Hi"}}, true)
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	if err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}
