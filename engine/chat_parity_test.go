package engine

import (
	"testing"

	"github.com/hybridgroup/yzma/pkg/llama"

	"github.com/synapse-embed/synapse/model/chat"
)

// llamaChat is llama.cpp's llama_chat_apply_template of msgs.
func llamaChat(t *testing.T, tmpl string, msgs []chat.Message, addAssistant bool) (string, bool) {
	t.Helper()
	cm := make([]llama.ChatMessage, len(msgs))
	for i, m := range msgs {
		cm[i] = llama.NewChatMessage(m.Role, m.Content)
	}
	buf := make([]byte, 1<<16)
	n := llama.ChatApplyTemplate(tmpl, cm, addAssistant, buf)
	if n < 0 {
		return "", false
	}
	return string(buf[:n]), true
}

// TestChatTemplateParity: package chat renders every family it supports as
// llama.cpp does, whether the template is named by its family or given as
// Jinja text that llama.cpp recognises by its markers.
func TestChatTemplateParity(t *testing.T) {
	testEngine(t) // loads llama.cpp
	convs := [][]chat.Message{
		{{Role: "user", Content: "Is the sky blue?"}},
		{{Role: "system", Content: "  Answer yes or no.\n"}, {Role: "user", Content: "\tIs the sky blue? "}},
		{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}, {Role: "assistant", Content: " Hello. "}, {Role: "user", Content: "Bye"}},
	}
	jinja := map[string]chat.Family{
		"{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>' + '\\n'}}{% endfor %}":      chat.ChatML,
		"{{ bos_token }}{% for m in messages %}{{ '[INST] ' + m['content'] + ' [/INST]' }}{% endfor %}":                        chat.Llama2,
		"{% if m['role'] == 'system' %}{{ '<<SYS>>\\n' + m['content'] }}{% endif %}[INST]":                                     chat.Llama2Sys,
		"{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}": chat.Llama3,
		"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}":                              chat.Gemma,
		"{{'<|' + message['role'] + '|>' + '\\n' + message['content'] + '<|end|>' + '\\n'}}<|assistant|>":                      chat.Phi3,
		"{{ '<|user|>\\n' + message['content'] + '<|endoftext|>' }}":                                                           chat.Zephyr,
	}
	for tmpl, want := range jinja {
		got, err := chat.Detect(tmpl)
		if err != nil || got != want {
			t.Errorf("Detect(%.40q…) = %q, %v; want %q", tmpl, got, err, want)
		}
	}
	var names []string
	for _, f := range []chat.Family{chat.ChatML, chat.Phi4, chat.Llama2, chat.Llama2Sys, chat.Llama2SysBOS, chat.Llama2SysStrip,
		chat.MistralV1, chat.MistralV3, chat.MistralV3Tekken, chat.MistralV7, chat.Phi3, chat.Falcon3, chat.Zephyr, chat.Gemma,
		chat.Llama3, chat.DeepSeek, chat.CommandR, chat.Vicuna, chat.VicunaOrca, chat.Granite} {
		names = append(names, string(f))
	}
	for tmpl := range jinja {
		names = append(names, tmpl)
	}
	for _, tmpl := range names {
		f, err := chat.Detect(tmpl)
		if err != nil {
			t.Fatalf("Detect(%.40q): %v", tmpl, err)
		}
		for ci, conv := range convs {
			for _, add := range []bool{true, false} {
				want, ok := llamaChat(t, tmpl, conv, add)
				if !ok {
					t.Errorf("llama.cpp does not know the template %.40q (%s)", tmpl, f)
					continue
				}
				got, err := chat.Render(f, conv, add)
				if err != nil || got != want {
					t.Errorf("%s, conversation %d, assistant turn %v:\n got %q (%v)\nwant %q", f, ci, add, got, err, want)
				}
			}
		}
	}
}
