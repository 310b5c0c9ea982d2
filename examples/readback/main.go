// Command readback reads a synapse embed output file back with arrow-go and,
// for each document's first chunk, prints its nearest neighbour by cosine.
// Where ids name topics as the bundled corpus does ("tides", "tides-2"), it
// ends with how many nearest neighbours share the document's topic.
//
//	go run ./examples/readback examples/out/vectors.arrow
package main

import (
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

type row struct {
	id    string
	chunk int32
	vec   []float32
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: readback FILE.arrow")
		os.Exit(2)
	}
	rows, meta, err := read(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "readback:", err)
		os.Exit(1)
	}
	for i, k := range meta.Keys() {
		fmt.Printf("%-22s %s\n", k, meta.Values()[i])
	}
	fmt.Printf("\n%d chunks\n\n", len(rows))
	var docs, sameTopic int
	for i, r := range rows {
		if r.chunk != 0 {
			continue
		}
		best, bestSim := -1, -2.0
		for j, o := range rows {
			if j != i && o.id != r.id {
				if s := cosine(r.vec, o.vec); s > bestSim {
					best, bestSim = j, s
				}
			}
		}
		if best >= 0 {
			fmt.Printf("%-16s nearest %-16s cosine %.3f\n", r.id, rows[best].id, bestSim)
			docs++
			if topic(r.id) == topic(rows[best].id) {
				sameTopic++
			}
		}
	}
	if sameTopic > 0 {
		fmt.Printf("\nnearest neighbour on the same topic (the id before \"-\"): %d of %d documents\n", sameTopic, docs)
	}
}

// topic is the part of a document id before its first "-".
func topic(id string) string {
	if i := strings.IndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

func read(path string) ([]row, arrow.Metadata, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, arrow.Metadata{}, err
	}
	defer f.Close()
	rd, err := ipc.NewFileReader(f, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, arrow.Metadata{}, err
	}
	defer rd.Close()
	sc := rd.Schema()
	col := func(name string) int { return sc.FieldIndices(name)[0] }
	var rows []row
	for i := 0; i < rd.NumRecords(); i++ {
		rec, err := rd.RecordBatch(i)
		if err != nil {
			return nil, arrow.Metadata{}, err
		}
		ids := rec.Column(col("id")).(*array.String)
		chunks := rec.Column(col("chunk")).(*array.Int32)
		emb := rec.Column(col("embedding")).(*array.FixedSizeList)
		dims := int(emb.DataType().(*arrow.FixedSizeListType).Len())
		vals := emb.ListValues().(*array.Float32).Float32Values()
		for r := 0; r < int(rec.NumRows()); r++ {
			off := (emb.Offset() + r) * dims
			rows = append(rows, row{ids.Value(r), chunks.Value(r), append([]float32(nil), vals[off:off+dims]...)})
		}
	}
	return rows, sc.Metadata(), nil
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}
