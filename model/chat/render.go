package chat

import (
	"fmt"
	"strings"
)

// trim drops C isspace characters at both ends, as llama.cpp's trim does.
func trim(s string) string { return strings.Trim(s, " \t\n\v\f\r") }

// Render writes msgs in family f's layout; addAssistant opens the
// assistant's turn for the model to complete.
func Render(f Family, msgs []Message, addAssistant bool) (string, error) {
	if !rendered[f] {
		return "", fmt.Errorf("%w: family %q", ErrUnsupported, f)
	}
	var b strings.Builder
	switch f {
	case ChatML, Phi4:
		sep, end := "\n", "<|im_end|>\n"
		if f == Phi4 {
			sep, end = "<|im_sep|>", "<|im_end|>"
		}
		for _, m := range msgs {
			b.WriteString("<|im_start|>" + m.Role + sep + m.Content + end)
		}
		if addAssistant {
			b.WriteString("<|im_start|>assistant" + sep)
		}
	case MistralV7:
		for _, m := range msgs {
			switch m.Role {
			case "system":
				b.WriteString("[SYSTEM_PROMPT] " + m.Content + "[/SYSTEM_PROMPT]")
			case "user":
				b.WriteString("[INST] " + m.Content + "[/INST]")
			default:
				b.WriteString(" " + m.Content + "</s>")
			}
		}
	case MistralV1, MistralV3, MistralV3Tekken:
		renderMistral(&b, f, msgs)
	case Llama2, Llama2Sys, Llama2SysBOS, Llama2SysStrip:
		renderLlama2(&b, f, msgs)
	case Gemma:
		renderGemma(&b, msgs, addAssistant)
	default:
		renderSimple(&b, f, msgs, addAssistant)
	}
	return b.String(), nil
}

func renderMistral(b *strings.Builder, f Family, msgs []Message) {
	lead, trail := "", " "
	if f == MistralV1 {
		lead = " "
	}
	if f == MistralV3Tekken {
		trail = ""
	}
	inTurn := false
	for _, m := range msgs {
		if !inTurn {
			b.WriteString(lead + "[INST]" + trail)
			inTurn = true
		}
		switch m.Role {
		case "system":
			b.WriteString(m.Content + "\n\n")
		case "user":
			b.WriteString(m.Content + lead + "[/INST]")
		default:
			content := m.Content
			if f == MistralV3 {
				content = trim(content)
			}
			b.WriteString(trail + content + "</s>")
			inTurn = false
		}
	}
}

func renderLlama2(b *strings.Builder, f Family, msgs []Message) {
	system := f != Llama2
	inTurn := true // no BOS at the start: the tokenizer adds it
	b.WriteString("[INST] ")
	for _, m := range msgs {
		content := m.Content
		if f == Llama2SysStrip {
			content = trim(content)
		}
		if !inTurn {
			inTurn = true
			if f == Llama2SysBOS {
				b.WriteString("<s>[INST] ")
			} else {
				b.WriteString("[INST] ")
			}
		}
		switch {
		case m.Role == "system" && system:
			b.WriteString("<<SYS>>\n" + content + "\n<</SYS>>\n\n")
		case m.Role == "system":
			b.WriteString(content + "\n")
		case m.Role == "user":
			b.WriteString(content + " [/INST]")
		default:
			b.WriteString(content + "</s>")
			inTurn = false
		}
	}
}

func renderGemma(b *strings.Builder, msgs []Message, addAssistant bool) {
	system := ""
	for _, m := range msgs {
		if m.Role == "system" {
			system += trim(m.Content) // gemma has no system turn: it goes into the next user turn
			continue
		}
		role := m.Role
		if role == "assistant" {
			role = "model"
		}
		b.WriteString("<start_of_turn>" + role + "\n")
		if system != "" && role != "model" {
			b.WriteString(system + "\n\n")
			system = ""
		}
		b.WriteString(trim(m.Content) + "<end_of_turn>\n")
	}
	if addAssistant {
		b.WriteString("<start_of_turn>model\n")
	}
}

// renderSimple writes the families whose turns are a fixed frame around
// each message.
func renderSimple(b *strings.Builder, f Family, msgs []Message, addAssistant bool) {
	var open string
	for _, m := range msgs {
		b.WriteString(simpleTurn(f, m))
	}
	switch f {
	case Phi3, Falcon3, Zephyr:
		open = "<|assistant|>\n"
	case Llama3:
		open = "<|start_header_id|>assistant<|end_header_id|>\n\n"
	case DeepSeek:
		open = "### Response:\n"
	case CommandR:
		open = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
	case Vicuna, VicunaOrca:
		open = "ASSISTANT:"
	case Granite:
		open = "<|start_of_role|>assistant<|end_of_role|>" // no newline in the pinned llama.cpp release
	}
	if addAssistant {
		b.WriteString(open)
	}
}

func simpleTurn(f Family, m Message) string {
	r, c := m.Role, m.Content
	switch f {
	case Phi3:
		return "<|" + r + "|>\n" + c + "<|end|>\n"
	case Falcon3:
		return "<|" + r + "|>\n" + c + "\n"
	case Zephyr:
		return "<|" + r + "|>\n" + c + "<|endoftext|>\n"
	case Llama3:
		return "<|start_header_id|>" + r + "<|end_header_id|>\n\n" + trim(c) + "<|eot_id|>"
	case Granite:
		return "<|start_of_role|>" + r + "<|end_of_role|>" + c + "<|end_of_text|>\n"
	case DeepSeek:
		switch r {
		case "system":
			return c
		case "user":
			return "### Instruction:\n" + c + "\n"
		case "assistant":
			return "### Response:\n" + c + "\n<|EOT|>\n"
		}
	case CommandR:
		token := map[string]string{"system": "<|SYSTEM_TOKEN|>", "user": "<|USER_TOKEN|>", "assistant": "<|CHATBOT_TOKEN|>"}[r]
		if token != "" {
			return "<|START_OF_TURN_TOKEN|>" + token + trim(c) + "<|END_OF_TURN_TOKEN|>"
		}
	case Vicuna, VicunaOrca:
		switch r {
		case "system":
			if f == VicunaOrca {
				return "SYSTEM: " + c + "\n"
			}
			return c + "\n\n"
		case "user":
			return "USER: " + c + "\n"
		case "assistant":
			return "ASSISTANT: " + c + "</s>\n"
		}
	}
	return ""
}
