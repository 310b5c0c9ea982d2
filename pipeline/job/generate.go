package job

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/record"
	"github.com/synapse-embed/synapse/model/chat"
	"github.com/synapse-embed/synapse/model/grammar"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/pipeline"
	"github.com/synapse-embed/synapse/supervise"
	"github.com/synapse-embed/synapse/wire"
)

// GenerateOptions is one `synapse generate` job.
type GenerateOptions struct {
	Options
	// Chat wraps each row's text in the model's chat template as the user's
	// turn (after System's turn, if set) and opens the assistant's.
	Chat   bool
	System string
	// MaxTokens bounds each generation (0 = DefaultMaxTokens).
	MaxTokens int
	// Grammar is a GBNF grammar (rule root); Schema, when set, is what the
	// grammar was written from, and every output must validate under it.
	Grammar string
	Schema  *grammar.Schema
	// Temperature 0 decodes greedily; above 0 each row is sampled with a
	// seed derived from Seed and its id, so results do not depend on
	// scheduling.
	Temperature float32
	Seed        uint64
	// Context is the context size workers load the model with (0: the
	// model's training context, at most 4096).
	Context int
}

// DefaultMaxTokens is the micro-LLM bound of protocol v1.
const DefaultMaxTokens = 64

// GenerateFormats are the output formats of a generate job.
var GenerateFormats = []output.Format{output.FormatArrow, output.FormatParquet, output.FormatJSONL}

// Check refuses, before anything starts, the job's options and outputs
// that cannot work whatever the model (Options.Check).
func (o *GenerateOptions) Check() error {
	if err := o.Options.Check(GenerateFormats); err != nil {
		return err
	}
	return checkDocInputs(&o.Options)
}

// Generate output columns.
const (
	ColText         = "text"
	ColFinishReason = "finish_reason"
	ColNPrompt      = "n_prompt"
	ColNGen         = "n_gen"
)

// GenerateSchema is the output schema: one row per input row.
func GenerateSchema(meta map[string]string) *arrow.Schema {
	str, i32 := arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32
	return output.NewSchema([]arrow.Field{{Name: output.ColID, Type: str}, {Name: ColText, Type: str},
		{Name: ColFinishReason, Type: str}, {Name: ColNPrompt, Type: i32}, {Name: ColNGen, Type: i32}}, meta)
}

// Reasons of a generate job's errors file.
const (
	ReasonPromptTooLong = "prompt_too_long" // the prompt leaves no room in the context
	ReasonSpecialText   = "special_text"    // the row holds a control token's text (--template chat)
	ReasonInvalidOutput = "invalid_output"  // the text does not validate under --json-schema
)

// Generate runs a generation job.
func Generate(ctx context.Context, o GenerateOptions) (Summary, error) {
	if o.Grammar != "" {
		if err := grammar.CheckGBNF(o.Grammar); err != nil {
			return Summary{Kind: "generate"}, &ConfigError{err}
		}
	}
	r, err := begin(&o.Options, "generate", o.Check)
	if err != nil {
		return Summary{Kind: "generate"}, err
	}
	return r.finish(o.run(ctx, r))
}

func (o *GenerateOptions) run(ctx context.Context, r *runner) error {
	m := r.model
	var family chat.Family
	if o.Chat {
		f, err := chat.Detect(m.ChatTemplate)
		if err != nil {
			return configErrorf("--template chat: model %s: %w", m.Name, err)
		}
		family = f
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	n := o.Context
	if n <= 0 {
		n = min(m.ContextLength, 4096)
	}
	if o.MaxTokens >= n {
		return configErrorf("--max-tokens %d does not fit the context of %d tokens", o.MaxTokens, n)
	}
	if err := r.load(ctx, wire.RuntimeConfig{ContextSize: n, BatchSize: min(n, 512), UBatchSize: min(n, 512)}); err != nil {
		return err
	}
	if o.Temperature > 0 && !r.pool.Supports(wire.ExtSampling) {
		return configErrorf("--temperature: this engine's workers cannot sample (they do not announce %s)", wire.ExtSampling)
	}
	if err := o.checkGrammar(ctx, r); err != nil {
		return err
	}
	if err := r.openWriter(&output.WriterOptions{Schema: GenerateSchema(o.metadata(r, family, n))}, o.resumeGuard()); err != nil {
		return err
	}
	r.started(fmt.Sprintf("up to %d new tokens, context %d%s", o.MaxTokens, n, map[bool]string{true: ", " + string(family) + " template"}[o.Chat]))
	src, err := r.docs(ctx)
	if err != nil {
		r.w.Abort()
		return err
	}
	k := &generateKind{o: o, tok: m.Tokenizer, family: family, ctx: n, req: r.req}
	return execute(ctx, r, r.config(1<<30, 1), pipeline.Kind[record.Doc, Prompt, wire.Text](k), src, &generateSink{w: r.w})
}

// checkGrammar has a worker parse the grammar before any row is read: one
// llama.cpp cannot parse is the user's mistake, never a failure per row.
func (o *GenerateOptions) checkGrammar(ctx context.Context, r *runner) error {
	if o.Grammar == "" {
		return nil
	}
	first := int32(0)
	if v := r.model.Tokenizer.Vocab(); v.BOS >= 0 {
		first = v.BOS
	}
	_, err := r.req.do(ctx, &wire.Generate{ModelRef: r.req.modelRef, MaxTokens: 0, Grammar: o.Grammar, IDs: []int32{first}}, 1)
	var we *wire.Error
	if errors.As(err, &we) && we.Code == wire.CodeConfigInvalid {
		return configErrorf("grammar: %s", we.Msg)
	}
	var ce *supervise.CrashError
	if errors.As(err, &ce) {
		// Parsing alone, with no row: the grammar is what kills the engine,
		// and will every time.
		return configErrorf("grammar: the engine crashed parsing it (%v); simplify it", err)
	}
	return err
}

func (o *GenerateOptions) metadata(r *runner, family chat.Family, n int) map[string]string {
	meta := commonMetadata(&o.Options, r.model)
	for k, v := range map[string]string{
		"synapse.max_tokens":    strconv.Itoa(o.MaxTokens),
		"synapse.context":       strconv.Itoa(n),
		"synapse.chat_template": string(family),
		"synapse.system":        o.System,
		"synapse.grammar":       o.Grammar,
		"synapse.temperature":   strconv.FormatFloat(float64(o.Temperature), 'g', -1, 32),
		"synapse.seed":          strconv.FormatUint(o.Seed, 10),
	} {
		meta[k] = v
	}
	return meta
}

// Prompt is one row's prompt.
type Prompt struct {
	IDs  []int32
	Seed uint32 // the row's sampling seed
}

// generateKind completes each row's prompt.
type generateKind struct {
	o      *GenerateOptions
	tok    tokenize.Tokenizer
	family chat.Family
	ctx    int
	req    *requester
}

func (k *generateKind) Place(d record.Doc) (int64, int64) { return d.Index, d.Group }

func (k *generateKind) Weight(d record.Doc) int64 { return int64(len(d.Text)) }

// Items tokenizes the row's prompt: as it is, or in the chat template, whose
// control tokens are parsed; a row's own text never turns into control
// tokens.
func (k *generateKind) Items(d record.Doc) ([]pipeline.Work[Prompt], error) {
	var ids []int32
	if k.family == "" {
		ids = k.tok.Tokenize(d.Text, tokenize.Options{AddSpecial: true}).IDs()
	} else {
		var msgs []chat.Message
		if k.o.System != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: k.o.System})
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: d.Text})
		for _, msg := range msgs {
			if t := k.controlText(msg.Content); t != "" {
				return nil, d.Error(ReasonSpecialText, fmt.Sprintf("the %s text holds %q, a control token of the model: it would be read as one", msg.Role, t))
			}
		}
		text, err := chat.Render(k.family, msgs, true)
		if err != nil {
			return nil, err
		}
		ids = k.tok.Tokenize(text, tokenize.Options{AddSpecial: true, ParseSpecial: true}).IDs()
	}
	if len(ids) >= k.ctx {
		return nil, d.Error(ReasonPromptTooLong, fmt.Sprintf("the prompt has %d tokens; the context holds %d (it is not cut)", len(ids), k.ctx))
	}
	p := Prompt{IDs: ids}
	if k.o.Temperature > 0 {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d\x00%s", k.o.Seed, d.ID)
		p.Seed = uint32(h.Sum64() ^ h.Sum64()>>32)
	}
	return []pipeline.Work[Prompt]{{Item: p}}, nil
}

// controlText is the text of the first control token s would turn into if
// its special-token text were parsed, "" when it holds none.
func (k *generateKind) controlText(s string) string {
	parsed := k.tok.Tokenize(s, tokenize.Options{ParseSpecial: true}).IDs()
	if slices.Equal(parsed, k.tok.Tokenize(s, tokenize.Options{}).IDs()) {
		return ""
	}
	v := k.tok.Vocab()
	for _, id := range parsed {
		control := v.Attrs != nil && int(id) < len(v.Attrs) && v.Attrs[id] == tokenize.TokenControl
		if (control || slices.Contains(v.ForcedControl, id)) && int(id) < len(v.Tokens) {
			return v.Tokens[id]
		}
	}
	return "a control token"
}

func (k *generateKind) Tokens(p Prompt) int { return len(p.IDs) + k.o.MaxTokens }

func (k *generateKind) Call(ctx context.Context, ps []Prompt) ([]wire.Text, error) {
	out := make([]wire.Text, len(ps))
	for i, p := range ps {
		req := &wire.Generate{ModelRef: k.req.modelRef, MaxTokens: k.o.MaxTokens, Grammar: k.o.Grammar,
			Temperature: k.o.Temperature, Seed: p.Seed, IDs: p.IDs}
		t, err := ask[*wire.Text](ctx, k.req, req, k.Tokens(p))
		if err != nil {
			return nil, err
		}
		out[i] = *t
	}
	return out, nil
}

// Check refuses text that breaks the JSON schema it was generated under: a
// grammar bug shows up here, never as bad data.
func (k *generateKind) Check(_ Prompt, t wire.Text) error {
	if k.o.Schema == nil {
		return nil
	}
	if err := k.o.Schema.Validate(t.Text); err != nil {
		return refuse(ReasonInvalidOutput, "%v (finish %s, %d tokens): %q", err, t.FinishReason, t.NGen, t.Text)
	}
	return nil
}

// generateSink writes one row per completed prompt.
type generateSink struct{ w *output.Writer }

func (s *generateSink) Put(r pipeline.Result[record.Doc, Prompt, wire.Text]) error {
	if r.File != nil {
		return s.w.PutFileError(r.File)
	}
	if r.RowErr != nil {
		return s.w.Put(r.Index, r.Group, nil, []*record.RowError{r.RowErr})
	}
	rows := make(textRows, len(r.Done))
	for i, d := range r.Done {
		rows[i] = textRow{id: r.Rec.ID, text: d.Out}
	}
	return s.w.Put(r.Index, r.Group, rows, itemErrors(r.Failed, func(f pipeline.Failed[Prompt]) *record.RowError {
		reason, detail, log := describe(f.Err)
		e := r.Rec.Error(reason, detail)
		e.WorkerLog = log
		return e
	}))
}

type textRow struct {
	id   string
	text wire.Text
}

type textRows []textRow

func (rs textRows) Len() int { return len(rs) }

// AppendTo implements output.Rows for a GenerateSchema builder.
func (rs textRows) AppendTo(b *array.RecordBuilder) error {
	f := b.Fields()
	if len(f) != 5 {
		return fmt.Errorf("job: text rows for a schema of %d columns", len(f))
	}
	for _, r := range rs {
		f[0].(*array.StringBuilder).Append(r.id)
		f[1].(*array.StringBuilder).Append(r.text.Text)
		f[2].(*array.StringBuilder).Append(r.text.FinishReason)
		f[3].(*array.Int32Builder).Append(int32(r.text.NPrompt))
		f[4].(*array.Int32Builder).Append(int32(r.text.NGen))
	}
	return nil
}
