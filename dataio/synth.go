package dataio

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// SyntheticRowGroup is the number of rows per row group of
// WriteSyntheticParquet's files.
const SyntheticRowGroup = 16384

// WriteSyntheticParquet writes a corpus of rows documents to path for
// benchmarks and memory tests: columns id ("synth-N"), title and text
// (pseudo-words: 8 to 200 of them, or 1,000 to 3,000 for one document in
// 50; about 1 KB on average), snappy
// compressed, SyntheticRowGroup rows per row group. The same seed gives the
// same rows. Memory use is one row group, whatever rows is.
func WriteSyntheticParquet(path string, rows int, seed int64) error {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "title", Type: arrow.BinaryTypes.String},
		{Name: "text", Type: arrow.BinaryTypes.String},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("dataio: synthetic: %w", err)
	}
	defer f.Close() // a second Close after the one below is harmless
	bw := bufio.NewWriterSize(f, 1<<20)
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(SyntheticRowGroup))
	fw, err := pqarrow.NewFileWriter(sc, bw, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return fmt.Errorf("dataio: synthetic: %w", err)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	var sb strings.Builder
	for done := 0; done < rows; {
		n := min(SyntheticRowGroup, rows-done)
		for i := range n {
			bld.Field(0).(*array.StringBuilder).Append("synth-" + strconv.Itoa(done+i))
			bld.Field(1).(*array.StringBuilder).Append(synthWords(rng, &sb, 3+rng.IntN(10)))
			words := 8 + rng.IntN(193)
			if rng.IntN(50) == 0 {
				words = 1000 + rng.IntN(2001) // a long document that needs chunking
			}
			bld.Field(2).(*array.StringBuilder).Append(synthWords(rng, &sb, words))
		}
		rec := bld.NewRecordBatch()
		err := fw.Write(rec)
		rec.Release()
		if err != nil {
			fw.Close()
			return fmt.Errorf("dataio: synthetic: %w", err)
		}
		done += n
	}
	if err := errors.Join(fw.Close(), bw.Flush(), f.Close()); err != nil {
		return fmt.Errorf("dataio: synthetic: %w", err)
	}
	return nil
}

var synthSyllables = [...]string{"ka", "lo", "mi", "ne", "ru", "sta", "ther", "ion", "pro", "tein", "cell", "gen",
	"ex", "pre", "sion", "al", "ic", "bi", "o", "ty", "re", "con", "dia", "lys", "ter", "ment", "ab", "un"}

// synthWords returns n pseudo-words with an occasional full stop.
func synthWords(rng *rand.Rand, sb *strings.Builder, n int) string {
	sb.Reset()
	for i := range n {
		if i > 0 {
			sb.WriteByte(' ')
		}
		for range 1 + rng.IntN(3) {
			sb.WriteString(synthSyllables[rng.IntN(len(synthSyllables))])
		}
		if rng.IntN(12) == 0 {
			sb.WriteByte('.')
		}
	}
	return sb.String()
}
