package previous

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/synapse-embed/synapse/io/output"
)

// legacyRows are rows of the schema of synapse before chunk_id, byte_start
// and code point offsets: id, chunk, token_start, token_end, char_start,
// char_end (bytes), n_tokens, embedding, doc_hash.
type legacyRows output.EmbedRows

func legacySchema(meta map[string]string) *arrow.Schema {
	i32 := func(name string) arrow.Field { return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int32} }
	return output.NewSchema([]arrow.Field{
		{Name: output.ColID, Type: arrow.BinaryTypes.String},
		i32(output.ColChunk), i32(output.ColTokenStart), i32(output.ColTokenEnd), i32(output.ColCharStart), i32(output.ColCharEnd), i32(output.ColNTokens),
		{Name: output.ColEmbedding, Type: arrow.FixedSizeListOf(testDims, arrow.PrimitiveTypes.Float32)},
		{Name: output.ColDocHash, Type: &arrow.FixedSizeBinaryType{ByteWidth: output.DocHashSize}},
	}, meta)
}

func (rs legacyRows) Len() int { return len(rs) }

func (rs legacyRows) AppendTo(b *array.RecordBuilder) error {
	f := b.Fields()
	for _, r := range rs {
		f[0].(*array.StringBuilder).Append(r.ID)
		for i, v := range [...]int32{r.Chunk, r.TokenStart, r.TokenEnd, r.ByteStart, r.ByteEnd, r.NTokens} {
			f[1+i].(*array.Int32Builder).Append(v)
		}
		l := f[7].(*array.FixedSizeListBuilder)
		l.Append(true)
		l.ValueBuilder().(*array.Float32Builder).AppendValues(r.Embedding, nil)
		f[8].(*array.FixedSizeBinaryBuilder).Append(r.DocHash[:])
	}
	return nil
}

// TestLegacySchema: an output of an earlier version, with char_start and
// char_end for the byte offsets and no chunk_id or code point offsets,
// is a usable previous output, in both formats, and its byte offsets are
// read from the old columns.
func TestLegacySchema(t *testing.T) {
	for _, ext := range []string{"arrow", "parquet"} {
		t.Run(ext, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "old."+ext)
			meta := map[string]string{"synapse.settings_digest": "sha256:x", "synapse.settings": "{}"}
			w, err := output.Create(path, output.WriterOptions{Schema: legacySchema(meta), BatchRows: 16})
			if err != nil {
				t.Fatal(err)
			}
			docs := testDocs(40)
			for k, d := range docs {
				if err := w.Put(int64(k), int64(k), legacyRows(rowsOf(d, k)), nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			s, err := Open([]string{path}, dir)
			if err != nil {
				t.Fatalf("open an output of the old schema: %v", err)
			}
			defer s.Close()
			for k, d := range docs {
				m, err := s.Find(d.id, hashOf(d.text))
				if err != nil || m.Status != Unchanged {
					t.Fatalf("%s: %+v, %v; want unchanged", d.id, m, err)
				}
				rows, _, err := s.Copy(m.Start, m.End)
				if err != nil || fmt.Sprint(rows) != fmt.Sprint(rowsOf(d, k)) {
					t.Fatalf("%s: copied %v (%v); want %v", d.id, rows, err, rowsOf(d, k))
				}
			}
		})
	}
}
