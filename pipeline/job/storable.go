package job

import (
	"strings"

	"github.com/synapse-embed/synapse/pipeline"
)

// ReasonNotStorable: the output cannot store the row as it is: a
// PostgreSQL table's text columns hold no U+0000 (NUL) byte, which a file
// output keeps.
const ReasonNotStorable = "not_storable"

// storableKind rejects a document the output cannot store before any of
// its work is done, into the errors file (ReasonNotStorable), and lets the
// run go on: without it, one NUL byte fails the COPY of its whole batch,
// and every retry and --resume fails at the same batch.
type storableKind[I, O any] struct {
	pipeline.Kind[doc, I, O]
	withText bool // the text is stored too (--with-text)
}

// storable is k, or k behind storableKind when the output is a
// PostgreSQL table.
func storable[I, O any](o *EmbedOptions, k pipeline.Kind[doc, I, O]) pipeline.Kind[doc, I, O] {
	if !o.dest().IsTable() {
		return k
	}
	return storableKind[I, O]{Kind: k, withText: o.WithText}
}

func (k storableKind[I, O]) Items(d doc) ([]pipeline.Work[I], error) {
	switch {
	case strings.IndexByte(d.ID, 0) >= 0:
		return nil, d.Error(ReasonNotStorable, "the id holds U+0000 (a NUL byte), which a PostgreSQL text column cannot store")
	case k.withText && strings.IndexByte(d.Text, 0) >= 0:
		return nil, d.Error(ReasonNotStorable, "the text holds U+0000 (a NUL byte), which the table's text column (--with-text) cannot store")
	}
	return k.Kind.Items(d)
}
