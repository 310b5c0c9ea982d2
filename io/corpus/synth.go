package corpus

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
	return WriteSynthetic(path, Synthetic{Rows: rows, Seed: seed})
}

// Synthetic describes a synthetic corpus, or a later version of one: the
// corpus of Rows and Seed with a share of its rows changed (another title
// and text under the same id), deleted, and added at the end (ids
// "synth-new-N"). Which rows change is drawn from ChangeSeed; the rows that
// do not change are those of the original corpus, byte for byte.
type Synthetic struct {
	Rows                    int
	Seed                    int64
	Changed, Deleted, Added float64 // shares of Rows, 0 to 1
	ChangeSeed              int64
	// Shuffle writes the rows in an order drawn from ChangeSeed; the rows
	// are then held in memory until the end.
	Shuffle bool
}

// WriteSynthetic writes the corpus s describes to path (see
// WriteSyntheticParquet for its columns); memory use is one row group.
func WriteSynthetic(path string, s Synthetic) error {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "title", Type: arrow.BinaryTypes.String},
		{Name: "text", Type: arrow.BinaryTypes.String},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("synthetic: %w", err)
	}
	defer f.Close() // a second Close after the one below is harmless
	bw := bufio.NewWriterSize(f, 1<<20)
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(SyntheticRowGroup))
	fw, err := pqarrow.NewFileWriter(sc, bw, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return fmt.Errorf("synthetic: %w", err)
	}
	g := &synthGen{rng: rand.New(rand.NewPCG(uint64(s.Seed), 0x5eed)), change: rand.New(rand.NewPCG(uint64(s.ChangeSeed), 0xc4a9e)),
		bld: array.NewRecordBuilder(memory.DefaultAllocator, sc), fw: fw, shuffle: s.Shuffle}
	defer g.bld.Release()
	added := int(s.Added * float64(s.Rows))
	for i := range s.Rows + added {
		if i >= s.Rows {
			g.row("synth-new-"+strconv.Itoa(i-s.Rows), g.change)
		} else if err := g.next(i, s); err != nil {
			break
		}
		if err := g.cut(false); err != nil {
			break
		}
	}
	if s.Shuffle {
		g.shuffle = false
		g.writeShuffled()
	}
	if err := errors.Join(g.err, g.cut(true), fw.Close(), bw.Flush(), f.Close()); err != nil {
		return fmt.Errorf("synthetic: %w", err)
	}
	return nil
}

// synthGen writes a synthetic corpus row by row.
type synthGen struct {
	rng, change *rand.Rand
	sb          strings.Builder
	bld         *array.RecordBuilder
	fw          *pqarrow.FileWriter
	n           int
	err         error
	shuffle     bool
	held        [][3]string // Synthetic.Shuffle: every row, until the end
}

// writeShuffled writes the held rows in a random order.
func (g *synthGen) writeShuffled() {
	rows := g.held
	g.held = nil
	g.change.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	for _, r := range rows {
		g.append(r[0], r[1], r[2])
		g.cut(false)
	}
}

// next writes row i of the original corpus, changed, or not at all.
func (g *synthGen) next(i int, s Synthetic) error {
	id := "synth-" + strconv.Itoa(i)
	title, text := g.words(g.rng)
	switch u := g.change.Float64(); {
	case u < s.Deleted:
		return nil
	case u < s.Deleted+s.Changed:
		g.row(id, g.change)
	default:
		g.append(id, title, text)
	}
	return nil
}

// row appends a row whose words come from rng.
func (g *synthGen) row(id string, rng *rand.Rand) {
	title, text := g.words(rng)
	g.append(id, title, text)
}

func (g *synthGen) words(rng *rand.Rand) (title, text string) {
	title = synthWords(rng, &g.sb, 3+rng.IntN(10))
	words := 8 + rng.IntN(193)
	if rng.IntN(50) == 0 {
		words = 1000 + rng.IntN(2001) // a long document that needs chunking
	}
	return title, synthWords(rng, &g.sb, words)
}

func (g *synthGen) append(id, title, text string) {
	if g.shuffle {
		g.held = append(g.held, [3]string{id, title, text})
		return
	}
	g.bld.Field(0).(*array.StringBuilder).Append(id)
	g.bld.Field(1).(*array.StringBuilder).Append(title)
	g.bld.Field(2).(*array.StringBuilder).Append(text)
	g.n++
}

// cut writes the rows held as a row group when there are SyntheticRowGroup
// of them, or any at all when last.
func (g *synthGen) cut(last bool) error {
	if g.err != nil || g.n == 0 || (g.n < SyntheticRowGroup && !last) {
		return g.err
	}
	rec := g.bld.NewRecordBatch()
	g.err = g.fw.Write(rec)
	rec.Release()
	g.n = 0
	return g.err
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
