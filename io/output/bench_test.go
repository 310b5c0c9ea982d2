package output

import (
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkWrite384 writes 384-dimensional embeddings, one row per document.
func BenchmarkWrite384(b *testing.B) {
	for _, tc := range []struct {
		name, file string
		ckpt       bool
	}{{"arrow", "o.arrow", false}, {"parquet", "o.parquet", false}, {"arrow-checkpointed", "o.arrow", true}} {
		b.Run(tc.name, func(b *testing.B) {
			out := filepath.Join(b.TempDir(), tc.file)
			opts := WriterOptions{Schema: EmbedSchema(384, testMeta)}
			var w *Writer
			var err error
			if tc.ckpt {
				w, _, err = OpenCheckpointed(out, opts)
			} else {
				w, err = Create(out, opts)
			}
			if err != nil {
				b.Fatal(err)
			}
			emb := make([]float32, 384)
			rows := EmbedRows{{ID: "doc", NTokens: 128, TokenEnd: 128, ByteEnd: 600, CPEnd: 600, Embedding: emb}}
			b.SetBytes(384 * 4)
			i := int64(0)
			for b.Loop() {
				rows[0].ID = "doc-" + strconv.FormatInt(i, 10)
				emb[i%384] = float32(i)
				if err := w.Put(i, i, rows, nil); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if err := w.Commit(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
