// Package chat renders a conversation in a model's chat template, in Go, as
// llama.cpp's llama_chat_apply_template does: the template family is
// recognised from the Jinja text a GGUF file carries (tokenizer.chat_template)
// by the markers llama.cpp looks for, and each family is written by hand. A
// family synapse does not render is an error naming it, never a plain prompt.
package chat

import (
	"errors"
	"fmt"
	"strings"
)

// Message is one turn: Role is "system", "user" or "assistant".
type Message struct {
	Role, Content string
}

// Family is a chat template family, named as llama.cpp names it.
type Family string

// The families Render writes.
const (
	ChatML          Family = "chatml"
	Phi4            Family = "phi4"
	Llama2          Family = "llama2"
	Llama2Sys       Family = "llama2-sys"
	Llama2SysBOS    Family = "llama2-sys-bos"
	Llama2SysStrip  Family = "llama2-sys-strip"
	MistralV1       Family = "mistral-v1"
	MistralV3       Family = "mistral-v3"
	MistralV3Tekken Family = "mistral-v3-tekken"
	MistralV7       Family = "mistral-v7"
	Phi3            Family = "phi3"
	Falcon3         Family = "falcon3"
	Zephyr          Family = "zephyr"
	Gemma           Family = "gemma"
	Llama3          Family = "llama3"
	DeepSeek        Family = "deepseek"
	CommandR        Family = "command-r"
	Vicuna          Family = "vicuna"
	VicunaOrca      Family = "vicuna-orca"
	Granite         Family = "granite"
)

// ErrUnsupported: the template is of a family Render does not write, or of
// no family llama.cpp recognises.
var ErrUnsupported = errors.New("chat: unsupported chat template")

var rendered = map[Family]bool{ChatML: true, Phi4: true, Llama2: true, Llama2Sys: true, Llama2SysBOS: true,
	Llama2SysStrip: true, MistralV1: true, MistralV3: true, MistralV3Tekken: true, MistralV7: true, Phi3: true,
	Falcon3: true, Zephyr: true, Gemma: true, Llama3: true, DeepSeek: true, CommandR: true, Vicuna: true,
	VicunaOrca: true, Granite: true}

// Detect recognises the family of a Jinja chat template (or a family's
// name), checking llama.cpp's markers in its order.
func Detect(tmpl string) (Family, error) {
	if tmpl == "" {
		return "", fmt.Errorf("%w: the model has no chat template (tokenizer.chat_template)", ErrUnsupported)
	}
	if rendered[Family(tmpl)] {
		return Family(tmpl), nil
	}
	f := detect(tmpl)
	if f == "" {
		return "", fmt.Errorf("%w: the model's chat template is not one of the families synapse renders (%s)", ErrUnsupported, excerpt(tmpl))
	}
	if !rendered[f] {
		return "", fmt.Errorf("%w: the model's chat template is of the %s family, which synapse does not render", ErrUnsupported, f)
	}
	return f, nil
}

func excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// detect mirrors llm_chat_detect_template; "" for no family. Families
// Render does not write are named so that the error can say which.
func detect(t string) Family {
	has := func(s string) bool { return strings.Contains(t, s) }
	switch {
	case has("<|im_start|>"):
		switch {
		case has("<|im_sep|>"):
			return Phi4
		case has("<end_of_utterance>"):
			return "smolvlm"
		}
		return ChatML
	case strings.HasPrefix(t, "mistral") || has("[INST]"):
		return detectMistralLlama2(has)
	case has("<|assistant|>") && has("<|end|>"):
		return Phi3
	case has("[gMASK]<sop>"):
		return "chatglm4"
	case has("<|assistant|>") && has("<|user|>"):
		if has("</s>") {
			return Falcon3
		}
		return "glmedge"
	case has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>"):
		return "glmedge"
	case has("<|user|>") && has("<|endoftext|>"):
		return Zephyr
	case has("bos_token + message['role']"):
		return "monarch"
	case has("<start_of_turn>"):
		return Gemma
	}
	return detectRest(has)
}

func detectMistralLlama2(has func(string) bool) Family {
	switch {
	case has("[SYSTEM_PROMPT]"):
		return MistralV7
	case has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]"):
		switch {
		case has(" [INST]"):
			return MistralV1
		case has(`"[INST]"`):
			return MistralV3Tekken
		}
		return MistralV3
	case has("content.strip()"):
		return Llama2SysStrip
	case has("bos_token + '[INST]"):
		return Llama2SysBOS
	case has("<<SYS>>"):
		return Llama2Sys
	}
	return Llama2
}

func detectRest(has func(string) bool) Family {
	switch {
	case has(`'\n\nAssistant: ' + eos_token`):
		return "orion"
	case has("GPT4 Correct "):
		return "openchat"
	case has("USER: ") && has("ASSISTANT: "):
		if has("SYSTEM: ") {
			return VicunaOrca
		}
		return Vicuna
	case has("### Instruction:") && has("<|EOT|>"):
		return DeepSeek
	case has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>"):
		return CommandR
	case has("<|start_header_id|>") && has("<|end_header_id|>"):
		return Llama3
	case has("[gMASK]sop"):
		return "chatglm3"
	case has("<用户>"):
		return "minicpm"
	case has("'Assistant: ' + message['content'] + eos_token"):
		return "deepseek2"
	case has("<｜Assistant｜>") && has("<｜User｜>") && has("<｜end▁of▁sentence｜>"):
		return "deepseek3"
	case has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]"):
		return "exaone"
	case has("rwkv-world"):
		return "rwkv-world"
	case has("<|start_of_role|>"):
		return Granite
	case has("<|header_start|>") && has("<|header_end|>"):
		return "llama4"
	}
	return ""
}
