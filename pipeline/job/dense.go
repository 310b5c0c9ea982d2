package job

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/pgstore"
	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/pipeline"
)

// denseOut is the default output kind (--vectors dense): one pooled
// vector a chunk, in the embedding column (or vector, in another dtype).
// It is the reference kind: a new kind copies this file (see
// docs/architecture.md).
type denseOut struct{ kindBase }

// check refuses the flags of the other kinds.
func (*denseOut) check(o *EmbedOptions) error {
	switch {
	case o.SparseTopK != 0:
		return needsSparse()
	case o.AsQuery:
		return needsTokens()
	}
	return nil
}

func (*denseOut) plan(o *EmbedOptions, m *artifact.Artifact, _ stRun, ch Chunking) (Chunking, error) {
	return ch, refusePooled(m)
}

func (*denseOut) schema(o *EmbedOptions, dims int, meta map[string]string) *arrow.Schema {
	return output.EmbedSchemaWith(dims, o.Dtype, o.WithText, meta)
}

func (*denseOut) startPart(o *EmbedOptions, chunk, dims int) string {
	return fmt.Sprintf("text fields %s, chunks of %d tokens, %d dims, %s", strings.Join(o.textFields(), " + "), chunk, dims, o.Dtype)
}

// table is pgvector's type of the dtype.
func (*denseOut) table(o *EmbedOptions) (string, bool, error) {
	column, err := pgstore.ColumnType(o.Dtype, 1)
	return column, false, err
}

func (*denseOut) names(*EmbedOptions) (string, string) { return VectorsDense, "" }

func (*denseOut) execute(ctx context.Context, o *EmbedOptions, r *runner, cfg pipeline.Config, _ *embedPlan, e *embedRun) error {
	return execute(ctx, r, cfg, storable(o, pipeline.Kind[doc, Chunk, []float32](e.kind)), e.src, e.sink)
}
