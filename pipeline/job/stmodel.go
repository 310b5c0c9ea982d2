package job

import (
	"fmt"
	"slices"
	"strings"

	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/wire"
)

// stRun is what a sentence-transformers model directory decides in an
// embedding run: the prompt in effect, the modules applied after the graph
// and the default chunk size (max_seq_length).
type stRun struct {
	promptName string // "" for none
	prompt     string // the prompt's text, put in front of every document (as --prefix)
	byDefault  bool   // the model's default_prompt_name chose it
	// modules are the modules applied to the graph's output, as the output
	// metadata records them; post the part after the pooling, which the
	// vector settings carry ("" when only pooling is applied).
	modules, post string
	// needsExt: the workers must apply the chain (LOAD.st_modules).
	needsExt bool
	// poolFrom is the prompt's length in tokens, its leading special tokens
	// included, when the pooling leaves the prompt out (include_prompt
	// false); 0 otherwise.
	poolFrom int
}

// sentenceTransformers resolves the prompt and the modules of the run's
// model, and puts the prompt in front of the documents. The flags were
// checked; this refuses what the model cannot honour.
func (o *EmbedOptions) sentenceTransformers(m *artifact.Artifact, k outKind) (stRun, error) {
	var st stRun
	c := m.Chain
	switch {
	case o.PromptName != "" && o.Read.Prefix != "":
		return st, configErrorf("--prompt-name %s and --prefix: give one (the prompt is a prefix)", o.PromptName)
	case o.PromptName != "":
		text, ok := c.Prompts[o.PromptName]
		if !ok {
			return st, configErrorf("--prompt-name %s: %s has %s", o.PromptName, m.Name, promptList(c))
		}
		st.promptName, st.prompt = o.PromptName, text
	case o.Read.Prefix == "" && c.DefaultPrompt != "":
		st.promptName, st.prompt, st.byDefault = c.DefaultPrompt, c.Prompts[c.DefaultPrompt], true
	}
	if st.promptName != "" {
		o.Read.Prefix = st.prompt
	}
	if m.Format != artifact.FormatONNX {
		return st, nil
	}
	var exclude bool
	st.modules, st.post, st.needsExt, exclude = appliedModules(m, o.Pooling)
	exclude = k.modules(&st, exclude)
	if p := c.Pooling(); p != nil && !p.IncludePrompt && o.Read.Prefix != "" && !exclude && o.Pooling == "" {
		return st, configErrorf("%s: its Pooling module leaves the prompt out (include_prompt false), but the graph pools in itself (sentence_embedding), over every token; run it without a prompt or --prefix, or with --pooling", p.Dir)
	}
	if exclude && o.Read.Prefix != "" {
		st.poolFrom, st.needsExt = promptLength(m, o.Read.Prefix), true
		st.post = st.modules // the vectors depend on the whole pooling, prompt exclusion included
	}
	return st, nil
}

// promptLength is the number of leading tokens sentence-transformers
// leaves out of the pooling for a prompt (SentenceTransformer's
// _get_prompt_length): the prompt tokenized alone with the model's special
// tokens, less the last one when it is special.
func promptLength(m *artifact.Artifact, prompt string) int {
	pre, suf := m.Tokenizer.Affixes()
	ids := m.Tokenizer.Tokenize(prompt, tokenize.Options{}).IDs()
	n := len(pre) + len(ids) + len(suf)
	if len(suf) > 0 || len(ids) == 0 && len(pre) > 0 {
		n--
	}
	return n
}

func promptList(c hfmodel.Chain) string {
	if len(c.Prompts) == 0 {
		return "no prompts (config_sentence_transformers.json)"
	}
	names := make([]string, 0, len(c.Prompts))
	for n := range c.Prompts {
		names = append(names, n)
	}
	slices.Sort(names)
	return "prompts " + strings.Join(names, ", ")
}

// AppliedModules describes what synapse embed applies to the ONNX model
// m's graph outputs by default (no --pooling): "the graph's
// sentence_embedding output", or the modules after last_hidden_state, e.g.
// "Pooling(mean) + Dense(384->256 tanh bias sha256:…) + Normalize".
func AppliedModules(m *artifact.Artifact) string {
	all, _, _, _ := appliedModules(m, "")
	if !strings.HasPrefix(all, "the graph") {
		all += ", after the graph's last_hidden_state"
	}
	return all
}

// appliedModules describes what turns an ONNX graph's outputs into the
// vectors, as the engine decides it (engine.ONNX): the graph's
// sentence_embedding when it has one and no --pooling is given (the graph
// holds the modules), else the chain over last_hidden_state, with its
// pooling replaced by --pooling. needsExt is whether a worker must know
// LOAD.st_modules to apply it: anything but one mean, cls or lasttoken
// pooling; exclude whether the applied pooling leaves out the prompt.
func appliedModules(m *artifact.Artifact, pooling string) (all, post string, needsExt, exclude bool) {
	c := m.Chain
	if _, ok := m.ONNX.Output("sentence_embedding"); ok && pooling == "" {
		return "the graph's sentence_embedding output", "", false, false
	}
	if c.MultiVector() { // every token projected, nothing pooled (--vectors tokens)
		return c.String(), c.String(), true, false
	}
	if pooling != "" {
		mode := map[string]string{"mean": "mean", "cls": "cls", "last": "lasttoken"}[pooling]
		c.Modules = slices.Clone(c.Modules)
		if p := slices.IndexFunc(c.Modules, func(x hfmodel.Module) bool { return x.Kind == hfmodel.ModPooling }); p >= 0 {
			c.Modules[p].Modes, c.Modules[p].IncludePrompt = []string{mode}, true
		} else {
			c.Modules = []hfmodel.Module{{Kind: hfmodel.ModPooling, Modes: []string{mode}, IncludePrompt: true}}
		}
	}
	if c.Pooling() == nil {
		c.Modules = append([]hfmodel.Module{{Kind: hfmodel.ModPooling, Modes: []string{"mean"}, IncludePrompt: true}}, c.Modules...)
	}
	rest := hfmodel.Chain{Modules: slices.DeleteFunc(slices.Clone(c.Modules), func(x hfmodel.Module) bool { return x.Kind == hfmodel.ModPooling })}
	p := c.Pooling()
	needsExt = len(rest.Modules) > 0 || len(p.Modes) != 1 || !slices.Contains([]string{"mean", "cls", "lasttoken"}, p.Modes[0])
	return c.String(), rest.String(), needsExt, !p.IncludePrompt
}

// checkWorkers refuses workers that would not apply the chain.
func (st stRun) checkWorkers(r *runner) error {
	if st.needsExt && !r.pool.Supports(wire.ExtSTModules) {
		return configErrorf("%s needs workers that apply sentence-transformers modules (%s); these workers do not announce %s", r.model.Name, st.modules, wire.ExtSTModules)
	}
	return nil
}

// metadata records the modules and the prompt in the output's metadata.
func (st stRun) metadata(meta map[string]string) {
	if st.modules != "" {
		meta["synapse.modules"] = st.modules
	}
	meta["synapse.prompt_name"] = st.promptName
}

// lines are the summary lines saying what the model directory decided.
func (st stRun) lines(m *artifact.Artifact, ch Chunking, explicit bool, late int) []SummaryLine {
	var out []SummaryLine
	if st.modules != "" && (len(m.Chain.Modules) > 0 || m.Chain.MaxSeqLength > 0) {
		out = append(out, SummaryLine{"modules", st.modules})
	}
	if st.promptName != "" {
		how := "--prompt-name"
		if st.byDefault {
			how = "the model's default_prompt_name"
		}
		out = append(out, SummaryLine{"prompt", fmt.Sprintf("%s %q (%s)", st.promptName, st.prompt, how)})
	}
	if msl := m.Chain.MaxSeqLength; msl > 0 {
		pre, suf := m.Tokenizer.Affixes()
		text := fmt.Sprintf("%d tokens per chunk (max_seq_length %d less %d special tokens)", ch.Window, msl, len(pre)+len(suf))
		if late > 0 {
			text = fmt.Sprintf("%d tokens per chunk (--chunk-tokens), pooled from windows of up to %d tokens (max_seq_length %d less %d special tokens; --late-chunking)",
				late, ch.Window, msl, len(pre)+len(suf))
		} else if explicit && ch.Window+len(pre)+len(suf) > msl {
			text = fmt.Sprintf("%d tokens per chunk (--chunk-tokens), above max_seq_length %d (the model's): sentence-transformers truncates at %d tokens",
				ch.Window, msl, msl)
		} else if explicit {
			text = fmt.Sprintf("%d tokens per chunk (--chunk-tokens; max_seq_length %d)", ch.Window, msl)
		}
		out = append(out, SummaryLine{"chunk size", text})
	}
	return out
}
