package job

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/pipeline"
)

// outKind is what an embedding run asks of its output kind, from the flags
// to the last summary line; the run's steps (embed.go) ask it and never
// test --vectors or --late-chunking themselves. One file a kind:
// dense.go (the reference to copy), late.go, sparse.go, tokens.go; pick
// is the only place that chooses one (docs/architecture.md, "Adding an
// output kind"). A kind embeds kindBase for the steps it does not change.
type outKind interface {
	// check refuses, from the flags alone and before anything opens, what
	// the kind cannot do.
	check(o *EmbedOptions) error
	// chunking is the run's chunking for the model, the model's limits
	// checked (o.cut with the kind's window).
	chunking(o *EmbedOptions, m *artifact.Artifact) (Chunking, error)
	// modules changes the sentence-transformers modules a run applies (a
	// sparse run pools in the worker, not by the chain); exclude (the
	// pooling leaves the prompt out) is returned as it stands after.
	modules(st *stRun, exclude bool) bool
	// plan refuses the models the kind cannot run faithfully and fits the
	// chunking to the model, before any worker starts.
	plan(o *EmbedOptions, m *artifact.Artifact, st stRun, ch Chunking) (Chunking, error)
	// probe asks the loaded workers what the kind needs of them (and sets
	// the output's width when the kind decides it).
	probe(ctx context.Context, o *EmbedOptions, r *runner, p *embedPlan) error
	// chunkSize is the content tokens of the chunk a row holds.
	chunkSize(o *EmbedOptions, ch Chunking) int
	// settings sets the kind's part of the run's vector settings.
	settings(o *EmbedOptions, m *artifact.Artifact, s *vector.Settings)
	// schema is the output's schema, meta its metadata.
	schema(o *EmbedOptions, dims int, meta map[string]string) *arrow.Schema
	// startPart is the start line's part that says what is written: chunks
	// of chunk tokens, vectors of dims.
	startPart(o *EmbedOptions, chunk, dims int) string
	// calibrates refuses int8/uint8 ranges taken from the run's own first
	// documents, when the kind cannot embed them first.
	calibrates(o *EmbedOptions) error
	// table is the PostgreSQL column type (of width 1: the check's) and
	// whether the rows are sparse; an error when a table cannot hold them.
	table(o *EmbedOptions) (column string, sparse bool, err error)
	// names are the kind's --vectors value and vector settings' output
	// member, as a refusal of a --previous of another kind names them.
	names(o *EmbedOptions) (vectors, output string)
	// execute runs the pipeline over the records, writing through e's sink.
	execute(ctx context.Context, o *EmbedOptions, r *runner, cfg pipeline.Config, p *embedPlan, e *embedRun) error
	// summary is the kind's summary lines about chunks; it may set the
	// summary's Items line.
	summary(o *EmbedOptions, r *runner, p *embedPlan, e *embedRun) []SummaryLine
	// items names the pipeline's items in the progress line and summary.
	items() string
}

// needsSparse and needsTokens refuse a flag of the sparse or tokens kind
// in a run of another.
func needsSparse() error { return configErrorf("--sparse-top-k needs --vectors sparse") }

func needsTokens() error { return configErrorf("--as-query needs --vectors tokens (ColBERT queries)") }

// pick is the run's output kind: the only choice on --vectors and
// --late-chunking.
func (o *EmbedOptions) pick() (outKind, error) {
	switch o.Vectors {
	case "", VectorsDense:
		if o.LateChunking {
			return &lateOut{}, nil
		}
		return &denseOut{}, nil
	case VectorsSparse:
		return &sparseOut{}, nil
	case VectorsTokens:
		return &tokensOut{}, nil
	}
	return nil, configErrorf("--vectors %q: want dense, sparse or tokens", o.Vectors)
}

// ItemWords names the pipeline's items of the job ("chunks", or "windows"
// when each is pooled into chunks), for the progress line.
func (o *EmbedOptions) ItemWords() string {
	k, err := o.pick()
	if err != nil {
		return "chunks"
	}
	return k.items()
}

// kindBase is the steps most kinds share: chunks of --chunk-tokens, no
// probe, nothing to add to the settings, the model's modules.
type kindBase struct{}

func (kindBase) chunking(o *EmbedOptions, m *artifact.Artifact) (Chunking, error) {
	return o.cut(m, o.ChunkTokens, nil)
}

func (kindBase) modules(_ *stRun, exclude bool) bool { return exclude }

func (kindBase) probe(context.Context, *EmbedOptions, *runner, *embedPlan) error { return nil }

func (kindBase) chunkSize(_ *EmbedOptions, ch Chunking) int { return ch.Window }

func (kindBase) settings(*EmbedOptions, *artifact.Artifact, *vector.Settings) {}

func (kindBase) calibrates(*EmbedOptions) error { return nil }

func (kindBase) summary(o *EmbedOptions, r *runner, p *embedPlan, _ *embedRun) []SummaryLine {
	return p.st.lines(r.model, p.ch, o.ChunkTokens > 0, 0)
}

func (kindBase) items() string { return "chunks" }

// refusePooled refuses, for a pooled (dense) run, a model whose output is
// not one pooled vector: a multi-vector (ColBERT) model or a sparse
// encoder.
func refusePooled(m *artifact.Artifact) error {
	if err := refuseMultiVector(m); err != nil {
		return err
	}
	return refuseSparseEncoder(m)
}

// refuseMultiVector refuses a multi-vector (ColBERT) model in a run of
// one vector a chunk.
func refuseMultiVector(m *artifact.Artifact) error {
	if m.Chain.MultiVector() {
		return configErrorf("%s is a multi-vector (ColBERT) model: its Dense projection applies to every token and it has no pooled vector; give --vectors tokens", m.Name)
	}
	return nil
}
